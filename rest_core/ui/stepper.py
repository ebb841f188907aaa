"""Step-through mode: one user's answer advanced one REST step per click. No Gradio here.

Nothing is held on the model between clicks (a ZeroGPU Space keeps nothing between its GPU
calls): each "Next step" past the steps already taken is one model call
(rest_core.ui.model_calls.take_steps) that prefills the prompt and the tokens so far, takes one
step and returns its event as plain data; "Run to end" is one call for every remaining step,
within the server's time limit. The stepper keeps only those events, compact as Send's (the
part of each trie the panels draw: a K = 5000 step's whole trie is megabytes), and at most
`max_steps` of them per answer, so one visitor's step-through holds a bounded amount of memory;
it moves through them on the CPU ("Back", and "Next" over steps already taken, never touch the model). Where the model
stays in this process the engine keeps the KV cache of the last call, so the next click's
prefill costs nothing; on ZeroGPU it re-reads the answer so far, a few milliseconds on a GPU
for a small model. Greedy decoding gives the same tokens either way; a seeded sampled answer
draws its next call's numbers from the seed plus the tokens so far, so it is a fair sample but
not the one Send writes on that seed.

Clicks while the model is busy: each click of Next step or Run to end is queued (the model's
queue, behind the answer that holds it) and the page says it waits (rest_core.ui.step_through.ask_step);
at most MAX_WAITING clicks of one page wait at once, and a click past that, or while the same
page's chat answer or comparison still runs, is refused with a message in the step-through.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from copy import deepcopy
from dataclasses import replace
from pathlib import Path
from typing import Any

from rest_core.config import GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.knobs import BY_NAME
from rest_core.ui.chat import request_config
from rest_core.ui.fairness import LONG, SHORT
from rest_core.ui.model_calls import ModelJob
from rest_core.ui.runtime import Runtime
from rest_core.ui.style import clean_text

STEP_C_MAX = 64  # step mode lets the tree grow: speed is not the point here
MAX_STEPS = 512  # steps one step-through answer keeps (about 15 kB each, compact): then New answer
# The step-through's c: the c knob's checks (a finite whole number), its range 1..STEP_C_MAX.
STEP_C = replace(BY_NAME["c"], maximum=STEP_C_MAX)


def step_c(value: Any) -> int:
    """The step-through's c as the page (or an API client) sent it, checked against STEP_C;
    ConfigError with a one-line message naming c (NaN, inf, a string, 65, 2.5, True)."""
    return STEP_C.parse(value)


class Stepper:
    """The step-through state of one visitor (held by its Session, rest_core/ui/session.py,
    which closes it on Clear, expiry and page close). Holds plain data only: the compact events
    taken (at most `max_steps`), the prompt, the settings and how to go on (`job`)."""

    def __init__(self, max_steps: int = MAX_STEPS) -> None:
        self.max_steps = max_steps
        self.events: list[StepEvent] = []
        self.prompt_ids: list[int] = []
        self.config: GenerationConfig | None = None
        self.pos = -1  # the step shown, 0-based; -1 = none yet
        self.message = ""  # the message being answered
        self.stores_note = ""  # why the page picked the answer's stores (store_pick), "" when the visitor chose
        self.answers = 0  # answers started so far: the number of the one under way (a view knows what it shows)
        self.tokenizer: Any = None
        self.stores: dict[str, Any] = {}  # the engine's datastores by name ("where it came from")
        self.job: ModelJob | None = None  # the answer's first call; the next ones add the tokens so far
        self.waiting = 0  # this page's clicks queued or running (step_through.ask_step)
        self.tickets: deque[bool] = deque()  # the page's verdicts on its clicks, for the queue's validator
        self.admitted: deque[bool] = deque()  # per queued click: whether the page admitted it (else a job's admission)
        self._calls: Any = None  # the runtime's ModelCalls
        self._lock = threading.Lock()  # one move at a time
        self.clicks_lock = threading.Lock()  # guards waiting, tickets and admitted (never held over a move)

    def __deepcopy__(self, memo: dict) -> Stepper:
        """A copy with locks of its own (gr.State deep-copies each page's new state); the model
        calls, the tokenizer and the open stores are shared, not the stepper's own."""
        shared = {"_calls", "tokenizer", "stores"}
        copy = Stepper.__new__(Stepper)
        for name, value in vars(self).items():
            if name in ("_lock", "clicks_lock"):
                value = threading.Lock()
            elif name not in shared:
                value = deepcopy(value, memo)
            setattr(copy, name, value)
        return copy

    # -- lifecycle --

    def start(
        self,
        runtime: Runtime,
        message: str,
        store: Any,
        knobs: dict[str, Any],
        c: int,
        private: Mapping[str, Path] | None = None,
        owner: str = "",
    ) -> None:
        """A new answer to `message` (one user turn) with the page's settings, a fixed budget c
        (step mode shows the tree the user asked for, not the auto budget's choice) and the
        datastores `store` (names; `private`: the page's own uploads, name -> folder, of the
        session `owner`). Nothing runs yet: the first `next()` prefills and takes step 1.
        Raises ConfigError / ValueError with a one-line message for bad input."""
        self.close()
        message = clean_text(message).strip()
        if not message:
            raise ValueError("Type a message to step through.")
        config, names = request_config(store, {**knobs, "c": int(c), "budget": "fixed"}, runtime.preset)
        stores = runtime.resolve(names, private, owner)
        engine = runtime.engine(stores)  # on this process's CPU: the tokenizer, the context size
        self.prompt_ids = list(engine.encode([{"role": "user", "content": message}], chat=True))
        if engine.max_positions:
            room = engine.max_positions - len(self.prompt_ids) - config.draft.c - 1
            if room < 8:
                raise ValueError(f"the message is too long for the model's context ({engine.max_positions} tokens)")
            config = replace(config, max_new_tokens=min(config.max_new_tokens, room))
        self.config, self.message = config, message
        self.answers += 1
        self.stores = dict(engine.datastores)
        self.tokenizer = runtime.loaded().tokenizer
        self._calls = runtime.calls
        if owner:
            runtime.claim_cache(stores, owner)  # the engine's kept KV holds this answer: Clear drops it
        self.job = ModelJob(stores=stores, prompt_ids=tuple(self.prompt_ids), config=config, explain=True)

    def close(self) -> None:
        """Forget the answer (nothing on the model to release: it holds nothing between clicks)."""
        self.job = None
        self.events, self.prompt_ids, self.pos, self.config, self.message = [], [], -1, None, ""
        self.stores_note = ""
        self.stores = {}

    # -- moving --

    @property
    def finished(self) -> bool:
        return bool(self.events) and self.events[-1].finished

    @property
    def full(self) -> bool:
        """Whether the answer, unfinished, holds as many steps as the stepper keeps."""
        return len(self.events) >= self.max_steps and not self.finished

    @property
    def started(self) -> bool:
        return self.job is not None or bool(self.events)

    def _take(self, n: int, max_seconds: float = 0.0, lane: str = SHORT) -> bool:
        """One model call for the next `n` steps (0: to the end, or until `max_seconds`), never
        past `max_steps` kept, in the gate's `lane` (LONG: Run to end); True when the time limit
        cut it short."""
        job = self.job
        room = self.max_steps - len(self.events)
        if job is None or self.finished or room <= 0:
            return False
        done = self.token_ids()
        if done:
            job = _going_on(job, done)
        job = replace(job, max_seconds=max_seconds, max_steps=min(n, room) if n else room, lane=lane)
        batch = self._calls.steps(job)
        self.events.extend(_renumbered(batch.events, self.events))
        return batch.cut and not self.finished

    def next(self) -> bool:
        """Show the next step, taking it on the model if needed; False at the end."""
        with self._lock:
            if self.pos + 1 < len(self.events):
                self.pos += 1
                return True
            before = len(self.events)
            self._take(1)
            if len(self.events) > before:
                self.pos += 1
                return True
            return False

    def go(self, step: int) -> bool:
        """Show step `step` (1-based) of those taken (the step slider, a click on a token), never
        touching the model; False when it is already shown or was never taken."""
        with self._lock:
            if not 1 <= step <= len(self.events) or step - 1 == self.pos:
                return False
            self.pos = step - 1
            return True

    def back(self) -> bool:
        with self._lock:
            if self.pos > 0:
                self.pos -= 1
                return True
            return False

    def run_to_end(self, max_seconds: float = 0.0) -> bool:
        """Take every remaining step and show the last; with `max_seconds` (> 0) stop taking
        steps once that long has passed. True when the limit stopped it before the end."""
        with self._lock:
            cut = self._take(0, max_seconds, lane=LONG)  # gives the model to a Send between its steps
            self.pos = len(self.events) - 1
            return cut

    # -- what is shown --

    @property
    def event(self) -> StepEvent | None:
        return self.events[self.pos] if 0 <= self.pos < len(self.events) else None

    def context(self, pos: int | None = None) -> list[int]:
        """Token ids before step `pos` (default: the step shown): the prompt and every token
        emitted before it; the last one is that step's root."""
        pos = self.pos if pos is None else pos
        return self.prompt_ids + [t for e in self.events[:pos] for t in e.tokens]

    def token_ids(self) -> list[int]:
        """Every token emitted by the steps taken so far."""
        return [t for e in self.events for t in e.tokens]


def _going_on(job: ModelJob, done: list[int]) -> ModelJob:
    """The call that goes on after the tokens `done`: they join the prompt, the answer's token
    limit shrinks by as many, and a seeded sampling draws new numbers (seed + tokens so far)."""
    config = job.config
    sampling = config.sampling
    if sampling.seed is not None:
        sampling = replace(sampling, seed=sampling.seed + len(done))
    config = replace(config, max_new_tokens=config.max_new_tokens - len(done), sampling=sampling)
    return replace(job, prompt_ids=job.prompt_ids + tuple(done), config=config)


def _renumbered(new: Sequence[StepEvent], before: Sequence[StepEvent]) -> list[StepEvent]:
    """The events of a call that went on after `before`, numbered and totalled as one answer's:
    steps, tokens and times add to the last event's totals; the prompt and prefill stay the first call's."""
    if not before:
        return list(new)
    last = before[-1]
    t = last.totals
    out = []
    for ev in new:
        n = ev.totals
        totals = replace(
            n,
            prompt_tokens=t.prompt_tokens,
            new_tokens=t.new_tokens + n.new_tokens,
            steps=t.steps + n.steps,
            draft_tokens=t.draft_tokens + n.draft_tokens,
            elapsed_s=t.elapsed_s + n.elapsed_s,
            prefill_ms=t.prefill_ms,
            retrieval_ms=t.retrieval_ms + n.retrieval_ms,
        )
        out.append(replace(ev, step=last.step + 1 + ev.step, totals=totals))
    return out
