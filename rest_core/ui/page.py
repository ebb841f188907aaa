"""The page without Gradio: its words (the header, the example prompts, the step-through's notes and
the glossary) and what its controls do beyond a chat turn: the pages open now (a closed one frees
its session at once), the datastores a page may choose, the start-up builds' banner, building an
uploaded corpus ("Your corpus"), and the step-through (one REST step per click, "Why this c?", the
guided examples). Each returns plain values (HTML, figures, names) that app.py puts in its
components; a chat turn and the comparison are rest_core/ui/session.py's.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rest_core.config import ConfigError
from rest_core.knobs import APP_KNOBS, values_in_order
from rest_core.ui import answer_view, guided, phases, style, trie_view, why_c_view
from rest_core.ui.runtime import NO_STORE, Runtime, StoreBuilds, choose_stores, selected_names
from rest_core.ui.session import Session, message_too_long, status_html, time_limit_note
from rest_core.ui.settings import Settings
from rest_core.ui.source_share import source_share_html
from rest_core.ui.stepper import STEP_C_MAX, Stepper, step_c
from rest_core.ui.upload_jobs import UploadJob

log = logging.getLogger("rest.app")

# ----------------------------------------------------------------------------------------------
# The page's words

HEADER = """
<div id="header">
<h1>REST: retrieval-based speculative decoding, live</h1>
<p>Each step, REST looks up the last few tokens of the conversation in a <b>datastore</b> (a suffix array over a real
corpus) and in the <b>conversation itself</b>, merges what followed them into a trie, and lets the model check the
heaviest draft tokens in <b>one</b> forward pass. Accepted drafts cost no extra steps; the text is exactly what plain
decoding would write.</p>
</div>
"""

EXAMPLES = [
    ["Write a Python function that checks whether a string is a palindrome, with a docstring and two tests."],
    ["Write a Python class Stack with push, pop, peek and is_empty methods."],
    ["What are three tips for staying productive when working from home?"],
    ["Explain the difference between a list and a tuple in Python."],
]

STEP_NOTE = (
    "Step mode runs one forward pass per click, with a fixed draft budget c (up to 64, so the tree is worth looking at) "
    "and the other settings from the side panel. Timings here are not meaningful as speed figures: the page renders "
    "between steps and the budget is not the fast one. Use Send and Compare for speed."
)

GLOSSARY = """
| term | meaning |
|---|---|
| **datastore** | a large corpus (chat answers, Python code) stored as token ids with a suffix array, so any token sequence is found in it by binary search. The store named *chat* is a corpus of ShareGPT conversations, not this conversation |
| **suffix array** | every position of the corpus, sorted by the text that starts there; all occurrences of a token sequence sit next to each other in it, so two binary searches find them all |
| **conversation (context)** | the draft source that is this conversation itself (the prompt and the answer so far), searched the same way: an answer that repeats earlier text drafts itself |
| **n_max, n_min** | the longest and shortest context suffix (the last n tokens) looked up; the longest one that occurs wins |
| **m** | how many tokens after each occurrence are taken as a continuation |
| **K** | at most K occurrences are used; above K a fair sample of K is taken |
| **trie** | a prefix tree: the continuations merged so that continuations sharing a beginning share a branch; one node per token, its path from the root is the draft it stands for |
| **weight** | how likely a node's path is: each source's weight (the *datastore weight* and *context weight* knobs) is split evenly over that source's continuations, and a node adds up the shares of every continuation through it, from both sources |
| **heaviest** | the nodes of largest weight; the c heaviest always form a connected subtree (a child never outweighs its parent), and only they are verified |
| **c** | the draft budget: how many trie nodes are verified per step. Large c checks more guesses in the same forward: worth it on a GPU, where verifying 64 tokens costs about as much as 1; on a CPU every extra token costs time, so a small c wins (see *Why this c?*) |
| **auto budget** | picks c per step: it measures on this device how long a forward over 1, 2, 4, … tokens takes (the *measured cost*) and keeps the c whose expected accepted tokens per millisecond is best |
| **tree attention mask** | lets every draft node see the cached context, its ancestors and itself only, so one forward pass checks every branch at once |
| **KV cache** | the keys and values the model computed for every earlier token, kept so that a step computes only its new tokens; after a step the rejected drafts' entries are dropped |
| **root** | the last emitted token: it starts each step's forward pass (its KV is not cached yet) |
| **rows** | the tokens of one verify forward, one row each: row 0 is the root, row i the i-th drafted node; in the mask, a row is what that token may attend to |
| **position id** | the position in the text the model is told a token has: a drafted node sits at its root's position plus its depth, so siblings share one position, as they would in their own branch |
| **lazy logits** | the output head (the largest matrix of a small model) scores only the rows the acceptance walk reaches, not every drafted row |
| **M** | mean tokens emitted per forward pass (plain decoding: 1). The speedup is M divided by how much longer a REST forward takes than a one-token one, so it is always below M |
| **prefill** | the one forward over the whole prompt before the first new token (the KV cache is filled); left out of every tokens/s on this page |
| **prompt lookup** | transformers' own draft method, compared in *Speed*: it drafts from the prompt and answer only: the last few tokens (transformers' default: up to 2) are looked up earlier in the text and the k = 3 tokens that followed them are drafted as one chain; no datastore, no trie |
| **temperature, top-p, top-k** | sampling settings: temperature 0 is greedy (always the likeliest token); above 0 the model draws from its distribution, flattened by a higher temperature, cut to the k likeliest tokens (top-k) and to the likeliest ones whose chances add up to p (top-p). REST keeps a draft token only when it equals that draw |
| **lossless** | the output is exactly what plain decoding writes: a draft token is kept only where it equals the model's own choice (or, sampling, the model's own draw) |
"""

ONE_FORWARD = """
#### Why checking many tokens in one forward beats one forward per token

Plain decoding runs the whole model once per token: a forward over the cached text and one new token gives one
token. REST asks the model about the root and c drafted tokens in **one** forward: every accepted draft token is a
forward saved, and the model's own next token comes free at the end, so a step writes M tokens (1 + the accepted
ones) for the price of one forward over 1 + c tokens. On a GPU that price is about that of one token, up to dozens
of tokens: the forward's time goes into reading the weights, not into the arithmetic, so M is nearly the speedup.
On a CPU every extra token adds arithmetic, so the forward over 1 + c tokens costs more, and the speedup is M
divided by that ratio (*Speed* in Chat shows both measured; *Why this c?* in Step through the cost against c).
Either way the text is the same: a draft token is kept only where the model would have written it.
"""

WHY_C_NOTE = (
    "Measures the forward pass on this device for 1, 2, 4, … 65 tokens (a few seconds the first time): the same "
    "*measured cost* the auto budget uses. Combined with this session's acceptance it gives the expected speedup for every c."
)


# ----------------------------------------------------------------------------------------------
# Sessions and the pages that hold them

QUEUE_SIZE = 32  # requests waiting for the model, all sessions together
BUSY = "Your previous request is still queued or running: wait for it to finish (or Stop it)."


def as_session(value: Any) -> Session:
    """The page's session state, used now; a fresh Session where the state was lost (or an API
    call sent none)."""
    if not isinstance(value, Session):
        return Session()
    value.touch()
    return value


class NotCopied:
    """A callable that copies and deep copies return as it is.

    Gradio deep-copies the page config on every page load (GET / and /config), and the config
    holds the session state's delete callback: a bound method there would drag its object, and
    through it the runtime (model, engines, datastores), into every copy: seconds and gigabytes
    per page load."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __copy__(self) -> NotCopied:
        return self

    def __deepcopy__(self, memo: dict) -> NotCopied:
        return self


class OpenPages:
    """Which Session each open page holds (weakly), so that closing a page frees its data at once
    (Gradio would keep a closed page's state for an hour); and the sessions that upload corpora,
    freed once idle for the session TTL whatever endpoints they used (Gradio's state TTL counts
    from the last update of the state, and a client of /build_corpus alone never updates it)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._open: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()  # page -> its Session
        self._uploading: dict[str, Session] = {}  # key -> a session that built (or builds) corpora
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None

    def release(self, session: Any) -> Session:
        """Clear, the session state's expiry, a closed page and idleness: free everything the
        session holds: its conversation, events, saved KV cache and uploaded corpora (the same
        object stays the page's state, empty)."""
        if not isinstance(session, Session):
            return Session()
        with self._lock:
            self._uploading.pop(session.key, None)
        session.release(self.runtime)
        return session

    def uploading(self, session: Any) -> None:
        """`session` builds a corpus: freed once idle for the session TTL (`sweep`, from a
        thread started with the first one)."""
        ttl = self.runtime.settings.session_ttl
        if not isinstance(session, Session) or not ttl:
            return
        with self._lock:
            self._uploading[session.key] = session
            if self._sweeper is None:
                self._sweeper = _start_sweeper(self, period_s=min(max(ttl / 4, 0.2), 30.0))

    def sweep(self, now: float | None = None) -> list[Session]:
        """Release the uploading sessions idle for longer than the session TTL; returns them."""
        s = self.runtime.settings
        horizon = job_horizon(s, QUEUE_SIZE)
        with self._lock:
            idle = [x for x in self._uploading.values() if s.session_ttl and x.idle_s(horizon, now) > s.session_ttl]
        for session in idle:
            log.info("session idle for over %g s: its uploads are deleted", s.session_ttl)
            self.release(session)
        return idle

    def opened(self, page: str | None, session: Any) -> None:
        if isinstance(session, Session) and page:
            self._open[page] = session

    def closed(self, page: str | None, held: Any = None) -> None:
        """The page closed: free the Session its load saw and `held`, the one the page's state
        holds now (they differ when two events at page load each created the state)."""
        seen = self._open.pop(page, None) if page else None
        freed = [s for s in {id(x): x for x in (seen, held) if isinstance(x, Session)}.values()]
        log.info("page closed (%s): %s", page, f"released {len(freed)}" if freed else "no session held")
        for session in freed:
            self.release(session)


def _start_sweeper(pages: OpenPages, period_s: float) -> threading.Thread:
    """A daemon thread that sweeps `pages` every `period_s` seconds while they exist."""
    ref = weakref.ref(pages)

    def loop() -> None:
        while (held := ref()) is not None:
            try:
                held.sweep()
            except Exception:  # noqa: BLE001 - the next sweep tries again
                log.error("session sweep failed:\n%s", traceback.format_exc())
            del held
            time.sleep(period_s)

    thread = threading.Thread(target=loop, daemon=True, name="session-sweeper")
    thread.start()
    return thread


def job_horizon(settings: Settings, queue_size: int) -> float:
    """The longest a generation can wait in a queue of `queue_size` and then run (seconds): a
    session's admissions older than this no longer count (Session.admit)."""
    return (queue_size + 1) * settings.max_seconds + 60 if settings.max_seconds else 3600.0


def admit_job(runtime: Runtime, session: Any) -> bool:
    """Whether `session` may queue one more job on the model (Send, Compare, a step, Run to end,
    Why this c?): at most the server's max_jobs queued or running per session (Session.admit).
    Asked when a request is queued, so a refused one never takes a place in the shared queue."""
    if not isinstance(session, Session):
        return True
    s = runtime.settings
    return session.admit(s.max_jobs, job_horizon(s, QUEUE_SIZE))


def job_done(session: Any) -> None:
    """An admitted job ended (finished, failed or cancelled)."""
    if isinstance(session, Session):
        session.job_done()


# ----------------------------------------------------------------------------------------------
# Datastores


def store_choices(
    runtime: Runtime, session: Any, current: Any, default_first: bool = False
) -> tuple[list[str], list[str]]:
    """The datastore multi-select for a page: everyone's stores and this session's own (never
    another session's), and the selection: the user's choice while its stores exist."""
    if isinstance(session, Session):
        session.touch()
    names = session.store_choices(runtime) if isinstance(session, Session) else runtime.store_names()
    return choose_stores(names, current, default_first)


def builds_banner(builds: StoreBuilds) -> str:
    """The banner while the default datastores are built at start-up; "" otherwise."""
    message = builds.message()
    return status_html(message, "info") if message else ""


def legend_html(current: Any) -> str:
    """The colour key of the chosen stores (each its own colour, in the order chosen)."""
    try:
        return answer_view.legend_html(selected_names(current))
    except ValueError:  # more stores than bits: generation says so; the key shows the first ones
        return answer_view.legend_html(selected_names(current)[:6])


# ----------------------------------------------------------------------------------------------
# Your corpus: uploaded files and pasted text -> a datastore of the session's


def corpus_status(message: str, kind: str = "info") -> str:
    return f'<div class="status {kind}" id="corpus-msg">{message}</div>'


def progress_html(job: UploadJob) -> str:
    """The build's status line: a bar, then documents and tokens read, or the suffix array."""
    p = job.progress
    fraction = p.fraction if p is not None else 0.0
    text = p.describe() if p is not None else "starting"
    return (
        f'<div class="status info" id="corpus-msg"><progress max="1" value="{fraction:.3f}"></progress> '
        f"Building <b>{style.esc(job.name)}</b>: {style.esc(text)}…</div>"
    )


@dataclass(frozen=True)
class CorpusStep:
    """What a corpus build shows now: its status line and, once built, the datastore selection
    with the new store added (None: the selection stays). `used`: the build has read (and
    deleted) the uploaded files, so the file input is emptied."""

    status: str
    selected: list[str] | None = None
    used: bool = False


def files_added(session: Any, files: Any) -> None:
    """Files put in the page's file input (uploaded, not built yet): the session's raw uploads,
    deleted on Clear or when it expires unless a build reads them first."""
    if isinstance(session, Session):
        session.touch()
        session.raw.update(_paths(files))


def _paths(files: Any) -> list[str]:
    return [f if isinstance(f, str) else getattr(f, "name", str(f)) for f in (files or [])]


def build_corpus(
    runtime: Runtime, session: Any, files: Any, pasted: str, name: str, current: Any
) -> Iterator[CorpusStep]:
    """Build a datastore from the uploaded files and pasted text in the background, following its
    progress (polled: the build runs in its own thread, chat goes on); every refusal a message."""
    if not isinstance(session, Session):
        yield CorpusStep(corpus_status("The page lost its session: reload it.", "err"))
        return
    session.touch()
    paths = _paths(files)
    session.raw.update(paths)  # until the build takes them: Clear or expiry deletes them
    names = [style.clean_text(Path(p).name) for p in paths]  # shown in the page: valid text only
    try:
        job = session.start_upload(runtime, paths, names, style.clean_text(pasted), style.clean_text(name))
    except ValueError as exc:  # a refusal: a message, never a traceback
        yield CorpusStep(corpus_status(style.esc(str(exc)), "warn"))
        return
    except Exception as exc:  # noqa: BLE001 - the model (its tokenizer) failed to load
        log.error("upload failed to start", exc_info=True)
        yield CorpusStep(corpus_status(style.esc(f"the build could not start: {exc}"), "err"))
        return
    while not job.done.wait(0.4):
        if session.build is not job:  # released (Clear, the page closed): it was cancelled
            return
        yield CorpusStep(progress_html(job))
    session.touch()  # idle from the build's end, not its start
    if session.build is not job:
        return
    try:
        line = session.finish_upload(runtime)
    except ValueError as exc:
        yield CorpusStep(corpus_status(style.esc(f"Nothing built: {exc}"), "warn"), used=bool(paths))
        return
    where = "everyone's datastores (published)" if job.public else "your datastores (private to this page)"
    msg = f"Built <b>{style.esc(job.name)}</b>, added to {where} and selected: {style.esc(line)}."
    yield CorpusStep(corpus_status(msg, "info"), [*selected_names(current), job.name])


# ----------------------------------------------------------------------------------------------
# Step through: one REST step per click, each shown as its phases (captions and figures from
# rest_core.ui.phases; the state is a rest_core.ui.stepper.Stepper)


def as_stepper(value: Any) -> Stepper:
    return value if isinstance(value, Stepper) else Stepper()


@dataclass(frozen=True)
class StepView:
    """The step-through's panels for the stepper's current step (empty before the first)."""

    stepper: Stepper
    header: str = ""
    answer: str = ""
    retrieve: str = ""
    trie_caption: str = ""
    trie: Any = None  # plotly Figure
    verify: str = ""
    mask: Any = None  # plotly Figure: the tree attention mask
    accept: str = ""
    status: str = ""


def step_view(st: Stepper, status: str = "") -> StepView:
    ev = st.event
    if ev is None:
        empty = trie_view.empty_figure("Press Next step.", height=260)
        return StepView(st, trie=empty, mask=empty, status=status)
    p = phases.step_panels(
        ev,
        st.context(),
        st.tokenizer,
        st.config.retrieval if st.config else None,
        n_steps=len(st.events),
        stores=st.stores,
    )
    answer = answer_view.highlight_html(st.events[: st.pos + 1], st.tokenizer)
    return StepView(
        st,
        p.header,
        f'<div class="answer">{answer}</div>',
        p.retrieve,
        p.trie_caption,
        p.trie,
        p.verify,
        p.mask,
        p.accept,
        status,
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
    st: Stepper,
    session: Any,
    store: Any,
    c: float,
    knobs: Sequence[Any],
) -> StepView:
    """Next step / Run to end (`move`, see run_step): first starts an answer to the message, on
    the chosen stores (this page's own uploads included), when none is under way. A message
    over the server's limit is refused before anything tokenizes it."""
    message = style.clean_text(message)
    new = _new_answer(st, message)
    refused = message_too_long(message, runtime.settings.max_message_chars) if new else None
    if refused:
        return step_view(st, status_html(style.esc(refused), "warn"))

    def act() -> Any:
        budget = step_c(c)  # checked on every move: a bad c is a message, never a traceback
        if new:
            private, owner = (session.uploads, session.key) if isinstance(session, Session) else ({}, "")
            st.start(runtime, message, store, values_in_order(knobs), budget, private=private, owner=owner)
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


def admit_click(runtime: Runtime, st: Stepper, session: Any) -> bool:
    """The queue's validator of Next step / Run to end: the page's verdict on the click
    (ask_step), or for an API call, which has none, one job per session as Send's (admit_job)."""
    with st.clicks_lock:
        page_click = bool(st.tickets)
        ok = st.tickets.popleft() if page_click else admit_job(runtime, session)
        if ok:
            st.admitted.append(page_click)
    return ok


def click_done(st: Stepper, session: Any) -> None:
    """A queued step click ended (taken, failed or cancelled): it waits no more."""
    with st.clicks_lock:
        page_click = st.admitted.popleft() if st.admitted else False
        if page_click:
            st.waiting = max(0, st.waiting - 1)
    if not page_click:
        job_done(session)


def why_c(runtime: Runtime, st: Stepper, session: Any, c: float) -> tuple[Any, str]:
    """Why this c?: the measured forward-cost curve and the expected speedup against c, over this
    answer's steps (or the last chat answer's): (figure, caption); the figure is None when the
    cost could not be measured (the caption then says why)."""
    try:
        asked = step_c(c)
    except ConfigError as exc:
        return None, status_html(style.esc(str(exc)), "err")
    events, answer = list(st.events), "The step-through's answer"
    if not events and getattr(session, "view", None) is not None:
        events, answer = list(session.view.events), "The last chat answer"
    limit = runtime.settings.max_seconds
    try:  # one model call, within the request's time limit as Send's: larger sizes are extrapolated
        curve = runtime.calls.cost(runtime.key, NO_STORE, STEP_C_MAX + 1, limit)
    except Exception as exc:  # noqa: BLE001
        log.error("cost curve failed:\n%s", traceback.format_exc())
        return None, status_html(style.esc(f"could not measure the forward cost: {exc}"), "err")
    chosen = events[-1].c if events else asked
    fig = why_c_view.why_c_figure(curve, events, chosen, max_c=STEP_C_MAX)
    caption = why_c_view.why_c_caption(curve, events, chosen, answer, max_c=STEP_C_MAX)
    if curve.sizes[-1] <= STEP_C_MAX:
        caption += (
            f" Measured up to {curve.sizes[-1]} tokens: the measurement {time_limit_note(limit)}; "
            "the cost past it is extrapolated."
        )
    return fig, f'<p class="tt-cap">{style.esc(caption)}</p>' + source_share_html(events, curve, chosen)


@dataclass(frozen=True)
class GuidedChoice:
    """A guided example resolved for this server: its prompt and mode ("step", "send" or
    "compare"), the step-through's c, the datastore selection (its store, or the first built one
    when it is missing), the note to show and every knob's value (knob name -> value)."""

    prompt: str
    mode: str
    c: int
    stores: list[str]
    note: str
    knobs: dict[str, Any]


def guided_example(runtime: Runtime, title: str, knobs: Sequence[Any]) -> GuidedChoice | None:
    """The guided example of that title on the current knob values (in rest_core.knobs order)."""
    ex = next((e for e in guided.GUIDED_EXAMPLES if e.title == title), None)
    if ex is None:
        return None
    values = guided.example_settings(ex, values_in_order(knobs))
    names = runtime.store_names()
    store = ex.store if ex.store in names or ex.store == NO_STORE else (names[0] if names else NO_STORE)
    missing = f" (the {ex.store} store is not built here: using {store})" if store != ex.store else ""
    where = {"step": "In Step through", "send": "In Chat: Send", "compare": "In Chat: Compare with plain decoding"}[
        ex.mode
    ]
    note = f'<p class="example-note"><b>{style.esc(where)}.</b> {style.esc(ex.watch)}{style.esc(missing)}</p>'
    stores = [] if store == NO_STORE else [store]
    return GuidedChoice(ex.prompt, ex.mode, int(values["c"]), stores, note, {k.name: values[k.name] for k in APP_KNOBS})
