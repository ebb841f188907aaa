"""Everything the app runs on the model, as calls that keep nothing between them. No Gradio here.

On a Hugging Face ZeroGPU Space a function decorated with `spaces.GPU` runs in a process forked
for the call: its arguments and its results (each yield of a generator) are pickled, the GPU is
released when it returns, and nothing it leaves behind is there for the next call. So every use
of the model goes through the functions below, anywhere the app runs: each takes plain data (a
`ModelJob`: which runtime, the datastores, the prompt's token ids, the settings) and returns or
yields plain data (step events, whose tries are numpy arrays; a cost curve; a prompt lookup
run), never a tensor on the device, a generator or a KV cache. A caller that wants to go on
from where a call stopped (the step-through's next step) sends the tokens so far in the next
job's prompt. `ModelCalls` holds them decorated once (with spaces.GPU on a Space, else as they are).

A call finds its runtime (the model, its engines, the lock) by key among the live ones: in a
forked process that is the parent's copy, model included; elsewhere the same object.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from rest_core.bench.prompt_lookup import PLD_K, LookupRun, run_prompt_lookup
from rest_core.budget.cost_curve import CostCurve
from rest_core.config import GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.ui.trie_view import compact_event

log = logging.getLogger("rest.app")

_HOSTS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()  # key -> a live Runtime


def register(host: Any) -> str:
    """A key that finds `host` (a rest_core.ui.runtime.Runtime) from inside a call."""
    key = uuid.uuid4().hex
    _HOSTS[key] = host
    return key


def _host(key: str) -> Any:
    host = _HOSTS.get(key)
    if host is None:
        raise RuntimeError("the app's runtime is gone (the server restarted?): reload the page")
    return host


@dataclass(frozen=True)
class ModelJob:
    """One call's work, as plain data: the runtime's key (`host`), the datastores (a StoreSet:
    names and folders), the prompt's token ids, the settings and the seconds it may take on the
    model (0: no limit)."""

    host: str
    stores: Any
    prompt_ids: tuple[int, ...]
    config: GenerationConfig
    max_seconds: float = 0.0


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


def _timed_steps(job: ModelJob, n: int, rows: bool, keep: Callable[[StepEvent], Any]) -> Iterator[Any]:
    """Up to `n` steps of `job` (0: to the end), holding the model's lock; after max_seconds on
    the model (counted from when the lock was taken) a TimeLimit ends them."""
    host = _host(job.host)
    engine = host.engine(job.stores)
    with host.lock:
        deadline = time.monotonic() + job.max_seconds if job.max_seconds > 0 else None
        steps = engine.generate(list(job.prompt_ids), job.config, row_tokens=rows)
        try:
            for taken, ev in enumerate(steps, start=1):
                yield keep(ev)
                if ev.finished or taken == n:
                    return
                if deadline is not None and time.monotonic() > deadline:
                    yield TimeLimit()
                    return
        finally:
            steps.close()  # the engine keeps the KV for a call that goes on from here (same process only)


def answer_stream(job: ModelJob) -> Iterator[StepEvent | TimeLimit]:
    """Send: the answer's steps as they come (compact events: the trie the page draws), then a
    TimeLimit if max_seconds stopped it."""
    yield from _timed_steps(job, 0, rows=False, keep=compact_event)


def take_steps(job: ModelJob, n: int) -> Steps:
    """The step-through: the next `n` steps (0: to the end) of an answer whose prompt (and the
    tokens so far) is job.prompt_ids, with the model's token at every verified row."""
    events, cut = [], False
    for item in _timed_steps(job, n, rows=True, keep=lambda ev: ev):
        if isinstance(item, TimeLimit):
            cut = True
        else:
            events.append(item)
    return Steps(tuple(events), cut)


@dataclass(frozen=True)
class Compared:
    """One lane of Compare: "rest" or "ar" with its events (and whether the limit cut it), or
    "lookup" with transformers' prompt lookup run (None when the model cannot run it)."""

    method: str
    events: tuple[StepEvent, ...] = ()
    cut: bool = False
    lookup: LookupRun | None = None


def compare_runs(job: ModelJob) -> Iterator[Compared]:
    """Compare: REST, plain decoding and prompt lookup on job's prompt, one after the other,
    each for at most job.max_seconds; one Compared per method as it ends."""
    for method in ("rest", "ar"):
        lane = replace(job, config=job.config.with_method(method))
        items = list(_timed_steps(lane, 0, rows=False, keep=compact_event))
        events = tuple(e for e in items if not isinstance(e, TimeLimit))
        yield Compared(method, events, cut=len(events) < len(items))
    yield Compared("lookup", lookup=_prompt_lookup(job))


def _prompt_lookup(job: ModelJob) -> LookupRun | None:
    """transformers' prompt lookup decoding on the same prompt and settings, holding the model;
    None when the engine's model cannot run it (the comparison then shows the other two)."""
    host = _host(job.host)
    engine = host.engine(job.stores)
    model = getattr(engine, "model", None)
    if not callable(getattr(model, "generate", None)):
        return None
    try:
        with host.lock:
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


def forward_cost(host: str, stores: Any, max_q: int, max_seconds: float) -> CostCurve:
    """Why this c?: the measured forward-cost curve for 1..max_q tokens, within max_seconds."""
    runtime = _host(host)
    engine = runtime.engine(stores)
    with runtime.lock:
        return engine.forward_cost(max_q, max_seconds=max_seconds)


class ModelCalls:
    """The calls above as the app makes them: each wrapped once by `gpu` (spaces.GPU on a
    ZeroGPU Space; None: called as they are), and counted while they run (`busy`)."""

    def __init__(self, gpu: Callable[[Callable], Callable] | None = None) -> None:
        wrap = gpu or (lambda fn: fn)
        self._answer = wrap(answer_stream)
        self._steps = wrap(take_steps)
        self._compare = wrap(compare_runs)
        self._cost = wrap(forward_cost)
        self._running = 0
        self._count = threading.Lock()

    @property
    def busy(self) -> bool:
        """Whether a call is running on the model now (from this process)."""
        return self._running > 0

    def _enter(self, delta: int) -> None:
        with self._count:
            self._running += delta

    def _call(self, fn: Callable, *args: Any) -> Any:
        self._enter(1)
        try:
            return fn(*args)
        finally:
            self._enter(-1)

    def _stream(self, fn: Callable, *args: Any) -> Iterator[Any]:
        self._enter(1)
        try:
            yield from fn(*args)
        finally:
            self._enter(-1)

    def answer(self, job: ModelJob) -> Iterator[StepEvent | TimeLimit]:
        return self._stream(self._answer, job)

    def steps(self, job: ModelJob, n: int) -> Steps:
        return self._call(self._steps, job, n)

    def compare(self, job: ModelJob) -> Iterator[Compared]:
        return self._stream(self._compare, job)

    def cost(self, host: str, stores: Any, max_q: int, max_seconds: float) -> CostCurve:
        return self._call(self._cost, host, stores, max_q, max_seconds)
