"""Everything the app runs on the model, as calls that keep nothing between them. No Gradio here.

On a Hugging Face ZeroGPU Space a function decorated with `spaces.GPU` runs in a process forked
for the call: its arguments and its results (each yield of a generator) are pickled, the GPU is
released when it returns, and nothing it leaves behind is there for the next call. So every use
of the model goes through the functions below, anywhere the app runs: each takes plain data (a
`ModelJob`: the datastores, the prompt's token ids, the settings, the time limit) and returns or
yields plain data (compact step events, whose tries are numpy arrays; a cost curve; a prompt
lookup run), never a tensor on the device, a generator or a KV cache. A caller that wants to go
on from where a call stopped (the step-through's next step) sends the tokens so far in the next
job's prompt.

`ModelCalls` holds them decorated once (with spaces.GPU on a Space, else as they are), each bound
to the `Models` it runs on (the app's Runtime: the model, its engines, the lock). The binding is
a closure, which the forked process inherits with the parent's memory (model included): only the
job crosses as data.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rest_core.bench.prompt_lookup import PLD_K, LookupRun, run_prompt_lookup
from rest_core.budget.cost_curve import CostCurve
from rest_core.config import GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.ui.fairness import LONG, SHORT, ModelGate
from rest_core.ui.tree_layout import compact_event

log = logging.getLogger("rest.app")


class Models(Protocol):
    """What a model call runs on: the engine over a set of stores, and the model's gate (a lock
    whose short lane goes first, rest_core.ui.fairness.ModelGate)."""

    lock: ModelGate

    def engine(self, stores: Any) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class ModelJob:
    """One call's work, as plain data: the datastores (a StoreSet: names and folders), the
    prompt's token ids, the settings, the seconds it may take on the model (0: no limit), at
    most how many steps (0: to the end) and whether each step carries the step-through's extras
    (`explain`: every verified row's token, the continuations behind the heaviest nodes)."""

    stores: Any
    prompt_ids: tuple[int, ...]
    config: GenerationConfig
    max_seconds: float = 0.0
    max_steps: int = 0
    explain: bool = False
    inspect: bool = False  # the chat inspector's feeds (Engine.generate's inspect)
    lane: str = SHORT  # LONG (Run to end, Compare): gives the model to waiting short jobs between steps


@dataclass(frozen=True)
class TimeLimit:
    """Yielded last by a stream that the job's max_seconds stopped before its end."""


@dataclass(frozen=True)
class Notice:
    """Yielded by a stream for the page's status line while it waits or after a change of engine
    (e.g. vLLM's server starting): `text` from now on, "" to clear it; `kind` as status_html's."""

    text: str
    kind: str = "info"


@dataclass(frozen=True)
class Steps:
    """Some steps of an answer: their events and whether the time limit stopped them early."""

    events: tuple[StepEvent, ...]
    cut: bool = False


def answer_stream(models: Models, job: ModelJob) -> Iterator[StepEvent | TimeLimit]:
    """An answer's steps as they come, holding the model: compact events (the trie the page
    draws, rest_core.ui.tree_layout.compact_event), at most job.max_steps of them; after
    job.max_seconds on the model (counted from when it was taken, pauses left out) a TimeLimit
    ends them. A LONG job lets the short jobs waiting for the model (a Send) in between two of its
    steps, so they wait for one step of it, not all of it."""
    engine = models.engine(job.stores)
    with models.lock.hold(job.lane):
        deadline = time.monotonic() + job.max_seconds if job.max_seconds > 0 else None
        steps = engine.generate(list(job.prompt_ids), job.config, explain=job.explain, inspect=job.inspect)
        try:
            for taken, ev in enumerate(steps, start=1):
                yield compact_event(ev)
                if ev.finished or taken == job.max_steps:
                    return
                if deadline is not None and time.monotonic() > deadline:
                    yield TimeLimit()
                    return
                paused = models.lock.let_short_in(job.lane)  # the generator's state is its own meanwhile
                if deadline is not None:
                    deadline += paused
        finally:
            steps.close()  # the engine keeps the KV for a call that goes on from here (same process only)


def take_steps(models: Models, job: ModelJob) -> Steps:
    """The step-through: the next job.max_steps steps (0: to the end) of an answer whose prompt
    (and the tokens so far) is job.prompt_ids, in one call."""
    items = list(answer_stream(models, job))
    events = tuple(e for e in items if not isinstance(e, TimeLimit))
    return Steps(events, cut=len(events) < len(items))


@dataclass(frozen=True)
class Compared:
    """One lane of Compare: "rest" or "ar" with its events (and whether the limit cut it), or
    "lookup" with transformers' prompt lookup run (None when the model cannot run it)."""

    method: str
    events: tuple[StepEvent, ...] = ()
    cut: bool = False
    lookup: LookupRun | None = None


def compare_runs(models: Models, job: ModelJob) -> Iterator[Compared]:
    """Compare: REST, plain decoding and prompt lookup on job's prompt, one after the other,
    each for at most job.max_seconds; one Compared per method as it ends."""
    for method in ("rest", "ar"):
        lane = take_steps(models, replace(job, config=job.config.with_method(method)))
        yield Compared(method, lane.events, cut=lane.cut)
    yield Compared("lookup", lookup=_prompt_lookup(models, job))


def _prompt_lookup(models: Models, job: ModelJob) -> LookupRun | None:
    """transformers' prompt lookup decoding on the same prompt and settings, holding the model;
    None when the engine's model cannot run it (the comparison then shows the other two)."""
    engine = models.engine(job.stores)
    model = getattr(engine, "model", None)
    if not callable(getattr(model, "generate", None)):
        return None
    try:
        with models.lock.hold(job.lane):  # one generate call: it cannot pause between steps
            return run_prompt_lookup(
                model,
                list(job.prompt_ids),
                max_new_tokens=job.config.max_new_tokens,
                stop_ids=engine.stop_ids,
                sampling=job.config.sampling,
                k=PLD_K,
                max_seconds=job.max_seconds,
            )
    except Exception:  # noqa: BLE001 - an extra lane: its failure must not cost the comparison
        log.error("prompt lookup failed:\n%s", traceback.format_exc())
        return None


# Why this c?'s curve: the fastest of this many runs per size, so one busy moment on a shared
# machine does not make a size read slow (the page says "fastest of N runs" beside it)
COST_REPS = 4


def forward_cost(models: Models, stores: Any, max_q: int, max_seconds: float) -> CostCurve:
    """Why this c?: the measured forward-cost curve for 1..max_q tokens, within max_seconds (a
    long job: after its first measurement an engine keeps the curve, and later calls are instant)."""
    engine = models.engine(stores)
    with models.lock.hold(LONG):
        return engine.forward_cost(max_q, max_seconds=max_seconds, reps=COST_REPS)


class ModelCalls:
    """The calls above as the app makes them: each bound to the `Models` it runs on (`use`),
    wrapped once by `gpu` (spaces.GPU on a ZeroGPU Space; None: called as they are), and
    counted while they run (`busy`)."""

    def __init__(self, gpu: Callable[[Callable], Callable] | None = None) -> None:
        self._wrap = gpu or (lambda fn: fn)
        self._models: Models | None = None
        self._answer = self._bound(answer_stream)
        self._steps = self._bound(take_steps)
        self._compare = self._bound(compare_runs)
        self._cost = self._bound(forward_cost)
        self._running = 0
        self._count = threading.Lock()

    def use(self, models: Models) -> None:
        """Run every call on `models` (the app's Runtime, which makes its calls with it)."""
        self._models = models

    def _bound(self, fn: Callable) -> Callable:
        """`fn` with its first argument, the Models, filled in at call time; named as `fn` is
        (spaces.GPU knows a call by its function's name), a generator function where it is one."""
        if inspect.isgeneratorfunction(fn):

            def call(*args: Any) -> Any:
                yield from fn(self._models, *args)

        else:

            def call(*args: Any) -> Any:
                return fn(self._models, *args)

        return self._wrap(functools.update_wrapper(call, fn))

    @property
    def busy(self) -> bool:
        """Whether a call is running on the model now (from this process)."""
        return self._running > 0

    def _enter(self, delta: int) -> None:
        with self._count:
            self._running += delta

    def answer(self, job: ModelJob) -> Iterator[StepEvent | TimeLimit]:
        """Send: the answer's steps as they come, then a TimeLimit if the time limit stopped it."""
        self._enter(1)
        try:
            yield from self._answer(job)
        finally:
            self._enter(-1)

    def steps(self, job: ModelJob) -> Steps:
        """The step-through's next steps, in one call."""
        self._enter(1)
        try:
            return self._steps(job)
        finally:
            self._enter(-1)

    def compare(self, job: ModelJob) -> Iterator[Compared]:
        """Compare's three runs, one lane as each ends."""
        self._enter(1)
        try:
            yield from self._compare(job)
        finally:
            self._enter(-1)

    def cost(self, stores: Any, max_q: int, max_seconds: float) -> CostCurve:
        """Why this c?'s measured forward cost."""
        self._enter(1)
        try:
            return self._cost(stores, max_q, max_seconds)
        finally:
            self._enter(-1)
