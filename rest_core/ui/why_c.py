"""Why this c?: the measured forward-cost curve and the expected speedup against the draft budget
c, over the visitor's step-through answer (or its last chat answer). One model call (the cost
curve); the figure comes from rest_core.ui.why_c_view, the caption from why_c_words and source_share. No Gradio here."""

from __future__ import annotations

import logging
import traceback
from dataclasses import replace
from typing import Any

from rest_core.config import ConfigError
from rest_core.ui import compare_view, style, why_c_view, why_c_words
from rest_core.ui.chat import time_limit_note
from rest_core.ui.compare import measured
from rest_core.ui.fairness import LONG
from rest_core.ui.measures import LIVE, STEPPED, plain_forward
from rest_core.ui.runtime import NO_STORE, Runtime
from rest_core.ui.session import Session
from rest_core.ui.source_share import source_share_html
from rest_core.ui.stepper import STEP_C_MAX, step_c
from rest_core.ui.style import status_html

log = logging.getLogger("rest.app")


def why_c(runtime: Runtime, session: Session, c: float) -> tuple[Any, str]:
    """Why this c?: the measured forward-cost curve and the expected speedup against c, over this
    visitor's step-through answer (or its last chat answer): (figure, caption); the figure is
    None when the cost could not be measured (the caption then says why)."""
    try:
        asked = step_c(c)
    except ConfigError as exc:
        return None, status_html(style.esc(str(exc)), "err")
    events, answer = list(session.steps.events), "The step-through's answer"
    message = session.steps.message
    if not events and session.chat.view is not None:
        events, answer = list(session.chat.view.events), "The last chat answer"
        message = next((m["content"] for m in reversed(session.chat.messages) if m["role"] == "user"), "")
    limit = runtime.settings.max_seconds
    try:  # one model call, within the request's time limit as Send's: larger sizes are extrapolated
        curve = runtime.calls.cost(NO_STORE, STEP_C_MAX + 1, limit)
    except Exception as exc:  # noqa: BLE001
        log.error("cost curve failed:\n%s", traceback.format_exc())
        return None, status_html(style.esc(f"could not measure the forward cost: {exc}"), "err")
    # a fixed c is every step's; the auto budget's steps record what each chose, so the figure
    # marks the c asked for, the most a step may verify
    chosen = events[-1].c if events and not why_c_view.auto_budget(events) else asked
    fig = why_c_view.why_c_figure(curve, events, chosen, max_c=STEP_C_MAX)
    notes = []
    if curve.sizes[-1] <= STEP_C_MAX:
        notes.append(
            f"Measured up to {curve.sizes[-1]} tokens: the measurement {time_limit_note(limit)}; "
            "the cost past it is extrapolated."
        )
    # Compare's figures sit beside the prediction when Compare ran on this answer's prompt
    steps = bool(session.steps.events)  # the answer is the step-through's (each step one call)
    prompt = list((session.steps.prompt_ids if steps else session.chat.prompt_ids) or [])
    measured = session.measured
    elsewhere = measured is not None and list(measured.prompt_ids) != prompt  # Compare ran on another prompt
    caption = why_c_words.why_c_caption(
        curve,
        events,
        chosen,
        answer,
        max_c=STEP_C_MAX,
        compared=session.plain_forward,
        measured=None if elsewhere else measured,
        elsewhere=measured if elsewhere else None,
        ran=STEPPED if steps else LIVE,
        notes=notes,
    )
    session.why_c_of = answer_of(session)
    about = f'<p class="tt-cap why-of">{style.esc(described(answer, message, len(events)))}</p>' if events else ""
    return fig, about + f'<div class="tt-cap">{caption}</div>' + source_share_html(events, curve, chosen, answer)


def check_on_prompt(runtime: Runtime, session: Session) -> str:
    """“Compare it on this prompt”: REST at the step-through answer's own settings, then plain
    decoding, back to back on its prompt, each within half the time limit; what they measured is
    kept as Compare's is (`session.measured`), so Why this c? sets it beside its prediction.
    "" once measured, else why not (no step-through answer; the machine's load changed)."""
    steps = session.steps
    if steps.job is None or not steps.events:
        return "Step through an answer first: this compares on the step-through's prompt (a chat answer: Compare under the chat)."
    job = replace(steps.job, explain=False, max_seconds=runtime.settings.max_seconds / 2, max_steps=0, lane=LONG)
    try:
        rest, ar = (runtime.calls.steps(replace(job, config=job.config.with_method(m))) for m in ("rest", "ar"))
        cmp = compare_view.compare(rest.events, ar.events, job.config.sampling.greedy)
    except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
        log.error("compare on the step-through's prompt failed:\n%s", traceback.format_exc())
        return f"could not compare on this prompt: {exc}"
    session.measured = measured(cmp, steps.prompt_ids, style.quoted(steps.message))
    session.plain_forward = plain_forward(ar.events)
    return "" if session.measured is not None else cmp.load_note()


def answer_of(session: Session) -> tuple[str, int] | None:
    """The answer Why this c? describes for this visitor now, as why_c picks it: the step-through's
    (by its number), else the last chat answer's; None when there is neither."""
    if session.steps.events:
        return ("steps", session.steps.answers)
    if session.chat.view is not None and session.chat.view.events:
        return ("chat", session.chat.answers)
    return None


def stale(session: Session) -> bool:
    """Whether Why this c? shows an answer that is no longer the one on screen (a new answer,
    New answer, Clear): then its figure and caption go."""
    return session.why_c_of is not None and session.why_c_of != answer_of(session)


def described(answer: str, message: str, steps: int) -> str:
    """The caption's first line: which answer it describes, by its message, and over how many steps."""
    whose = answer.replace("The ", "the ", 1)
    return f"About {whose} to {style.quoted(message)}, over its {style.plural(steps, 'step')} so far."
