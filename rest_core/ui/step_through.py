"""Step through: one visitor's answer advanced one REST step per click (Next step, Back, Run to
end, New answer), each step shown as its phases (captions and figures from rest_core.ui.phases;
the state is the visitor's rest_core.ui.stepper.Stepper, `Session.steps`), and the page's clicks
while the model is busy (queued, at most MAX_WAITING per page). No Gradio here: each action
returns a `StepView` that teach_tab.py maps onto its panels.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rest_core.config import ConfigError
from rest_core.ui import answer_view, phases, style, trie_view
from rest_core.ui.chat import message_too_long, time_limit_note
from rest_core.ui.lifecycle import admit_job, job_done
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import Session
from rest_core.ui.stepper import Stepper, step_c
from rest_core.ui.store_pick import pick_for
from rest_core.ui.style import status_html
from rest_core.ui.words import K_MEANS

log = logging.getLogger("rest.app")


@dataclass(frozen=True, kw_only=True)
class StepView:
    """The step-through's panels for the stepper's current step (empty before the first)."""

    header: str = ""
    answer: str = ""
    retrieve: str = ""
    trie_caption: str = ""
    trie: Any = None  # plotly Figure
    verify: str = ""
    mask: Any = None  # plotly Figure: the tree attention mask
    accept: str = ""
    status: str = ""
    steps: int = 0  # steps taken: the step slider goes over 1..steps (hidden below two)
    shown: int = 0  # the step shown, 1-based


# Before the first step: one line instead of four empty panels (assets/app.css hides them while
# the header holds this line; they stay in the page for the handlers). What a step does is said
# just above it ("Step mode runs one step per click: ..."), so this line only says what to press.
EMPTY_HEAD = (
    '<div class="tt-head tt-empty">Press <b>Next step</b> for the answer\'s first step. '
    "No message yet? Pick a guided example above.</div>"
)


def step_view(st: Stepper, status: str = "") -> StepView:
    """The panels of the step shown; `status` under the page's word on the stores it picked."""
    if st.stores_note and st.started:
        status = status_html(style.esc(st.stores_note), elem_id="step-store-pick") + status
    ev = st.event
    if ev is None:
        empty = trie_view.empty_figure("Press Next step.", height=260)
        return StepView(header=EMPTY_HEAD, trie=trie_view.empty_figure("Press Next step."), mask=empty, status=status)
    p = phases.step_panels(
        ev,
        st.context(),
        st.tokenizer,
        st.config.retrieval if st.config else None,
        stores=st.stores,
    )
    answer = answer_view.highlight_html(st.events[: st.pos + 1], st.tokenizer, current=ev.step)
    return StepView(
        header=p.header + settings_used_html(st),
        answer=f'<div class="answer">{answer}</div>',
        retrieve=p.retrieve,
        trie_caption=p.trie_caption,
        trie=without_badge(p.trie),
        verify=p.verify,
        mask=p.mask,
        accept=p.accept,
        status=status,
        steps=len(st.events),
        shown=st.pos + 1,
    )


BARE_TOP = 20  # px above the tree's title here, no label badge over it (at 8 the first line lost its top)


def without_badge(fig: Any) -> Any:
    """The tree figure as the step-through shows it (show_label=False: no label badge above it):
    its title at the top, without the band of trie_view.TITLE_TOP px kept for Chat's badge. A
    message-only figure is left as it is. The figure is as much shorter, its plot as tall."""
    if fig is not None and fig.layout.title.text:
        top = BARE_TOP + trie_view.TITLE_LINES * 18 + 6
        height = fig.layout.height - (fig.layout.margin.t - top)
        fig.update_layout(title=dict(y=1 - BARE_TOP / height), margin=dict(t=top), height=height)
    return fig


def settings_used_html(st: Stepper) -> str:
    """The settings this answer runs with, from Chat's Settings panel (the step-through has no
    panel of its own), folded under its sources: greedy or sampled, the retrieval's n_max,
    n_min, m and K, the most new tokens."""
    cfg = st.config
    if cfg is None:
        return ""
    names = [name for name, _ in cfg.draft.stores] if cfg.draft.stores else list(st.stores)
    sources = names if cfg.draft.use_datastore else []
    if cfg.draft.use_context:
        sources.append(style.CONTEXT_NAME)
    s, r = cfg.sampling, cfg.retrieval
    how = (
        "greedy (temperature 0)"
        if s.temperature <= 0
        else f"sampling at temperature {s.temperature:g}, top-p {s.top_p:g}"
    )
    said = "drafts from " + (" + ".join(sources) if sources else "no source") + " · " + how
    rest = [
        f"suffixes of {r.n_max} down to {r.n_min} tokens, m = {r.m}, K = {r.max_matches:,} ({K_MEANS})",
        f"at most {cfg.max_new_tokens:,} new tokens",
    ]
    # folded: the same line every step, read once (its sources and sampling stay in the summary)
    return (
        f'<details class="tt-settings"><summary>Settings used: {style.esc(said)}</summary>'
        "From the Chat view's Settings panel: " + style.esc(" · ".join(rest)) + "</details>"
    )


def run_step(st: Stepper, action: Callable[[], Any]) -> StepView:
    """Do `action` on the stepper and show where it got to; a failure is a message in the page,
    and so is a note `action` returns (a string: why it stopped short)."""
    try:
        stopped = action()
    except (ConfigError, ValueError) as exc:
        return step_view(st, status_html(style.esc(str(exc)), "err"))
    except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
        log.error("step-through failed:\n%s", traceback.format_exc())
        st.close()
        return step_view(st, status_html(style.esc(f"step-through failed: {exc}"), "err"))
    if isinstance(stopped, str) and stopped:
        return step_view(st, status_html(style.esc(stopped), "warn"))
    if st.full and st.pos == len(st.events) - 1:
        return step_view(st, status_html(style.esc(steps_kept_note(st.max_steps)), "warn"))
    note = "The answer is complete." if st.finished and st.pos == len(st.events) - 1 else ""
    return step_view(st, status_html(note) if note else "")


def run_to_end(max_seconds: float) -> Callable[[Stepper], str]:
    """Run to end's move: every remaining step, for at most `max_seconds` (0: no limit) as a
    chat answer; returns the note when the limit stopped it ("" otherwise)."""

    def move(st: Stepper) -> str:
        if not st.run_to_end(max_seconds):
            return ""
        return (
            f"Run to end {time_limit_note(max_seconds)}: the model is shared, so one request may use it for "
            f"{max_seconds:g} s at most. Press Run to end again to go on."
        )

    return move


def _new_answer(st: Stepper, message: str) -> bool:
    """Whether Next / Run to end start a new answer: none is under way, or the box holds another message."""
    typed = (message or "").strip()
    return not st.started or bool(typed and typed != st.message)


def advance(
    runtime: Runtime,
    move: Callable[[Stepper], Any],
    message: str,
    session: Session,
    store: Any,
    c: float,
    knobs: Mapping[str, Any],
) -> StepView:
    """Next step / Run to end (`move`, see run_step) on the visitor's step-through: first starts
    an answer to the message when none is under way, on the chosen stores (the visitor's own
    uploads included), or, while the visitor has chosen none (session.stores_auto), on the stores
    that fit the message, as Chat picks them (store_pick), saying which and why. A message over
    the server's limit is refused before anything tokenizes it."""
    st = session.steps
    message = style.clean_text(message)
    new = _new_answer(st, message)
    refused = message_too_long(message, runtime.settings.max_message_chars) if new else None
    if refused:
        return step_view(st, status_html(style.esc(refused), "warn"))

    def act() -> Any:
        budget = step_c(c)  # checked on every move: a bad c is a message, never a traceback
        if new:
            private, owner = session.corpora.uploads, session.key
            pick = pick_for(message, runtime.store_names()) if session.stores_auto and message.strip() else None
            stores = pick.stores if pick else store
            st.start(runtime, message, stores, dict(knobs), budget, private=private, owner=owner)
            st.stores_note = pick.text if pick else ""
        return move(st)

    return run_step(st, act)


MAX_WAITING = 4  # a page's step clicks (Next step, Run to end) queued at once


def ask_step(runtime: Runtime, st: Stepper, what: str = "step") -> str:
    """A page's click of Next step or Run to end (`what`: "step" or "run"), before it joins the
    model's queue: queued unless MAX_WAITING of this page's clicks wait already; the verdict
    goes to `st.tickets` for the queue's validator (admit_click). Returns the status line to
    show at once: the model is busy and the click waits, it is being taken, or it was refused."""
    with st.clicks_lock:
        if st.waiting >= MAX_WAITING:
            st.tickets.append(False)
            return status_html(style.esc(STEPS_WAITING), "warn")
        st.waiting += 1
        st.tickets.append(True)
        ahead = st.waiting - 1
    doing = "Running to the end" if what == "run" else f"Taking step {st.pos + 1 + st.waiting}"
    if runtime.busy or ahead:
        mine = f" ({ahead} earlier click{'s' if ahead != 1 else ''} of yours first)" if ahead else ""
        return status_html(
            style.esc(f"Waiting for the model: another answer is running{mine}. {doing} as soon as it is done…"), "warn"
        )
    return status_html(style.esc(f"{doing}…"))


STEPS_WAITING = (
    f"{MAX_WAITING} of your clicks are waiting for the model already: this one was not queued. "
    "Click again once a step shows."
)


def admit_click(runtime: Runtime, session: Session, request: Any = None) -> str:
    """The queue's validator of Next step / Run to end: "" when admitted, else why not. The
    page's verdict on the click (ask_step), or for an API call, which has none, the jobs per
    session and per client that Send's admission allows (admit_job)."""
    st = session.steps
    with st.clicks_lock:
        page_click = bool(st.tickets)
        if page_click:
            why = "" if st.tickets.popleft() else STEPS_WAITING
        else:
            why = admit_job(runtime, session, request)
        if not why:
            st.admitted.append(page_click)
    return why


def click_done(runtime: Runtime, session: Session) -> None:
    """A queued step click ended (taken, failed or cancelled): it waits no more."""
    st = session.steps
    with st.clicks_lock:
        page_click = st.admitted.popleft() if st.admitted else False
        if page_click:
            st.waiting = max(0, st.waiting - 1)
    if not page_click:
        job_done(runtime, session)


def steps_kept_note(max_steps: int) -> str:
    """The step-through's line once an answer holds as many steps as it keeps."""
    return (
        f"The step-through keeps {max_steps} steps of one answer, and this one has them all: press New answer to "
        "start again, or use Send in Chat for a long answer."
    )
