"""The app's vLLM backend (`app.py --backend vllm`): chat answers and Compare served by a vLLM
server with the REST proposer, so that concurrent sessions are batched in one engine instead of
queued for the native one. No Gradio here.

`VllmCalls` is the app's `ModelCalls` with two calls replaced: `answer` and `compare` stream
from vLLM; the step-through and Why this c? (`steps`, `cost`) stay on the native engine, which
draws every step's whole trie. An answer that drafts from a store the server does not serve (a
session's own upload) runs on the native engine too.

An answer from vLLM arrives as token ids; which of them came from accepted drafts, and from
which source, is read from the proposer's draft log (`rest_core.serve.records`), flushed by the
proposer before vLLM sends the tokens it explains. Each engine step becomes a `StepEvent` whose
draft is the chain vLLM verified (vLLM verifies chains, not trees), so the chat highlights
accepted drafts per step exactly as it does for the native engine.

The server this app starts may take minutes to come up and may die (the out-of-memory killer):
an answer sent while it starts waits for it, with a status line saying what it waits for
(`Notice`); one it cuts ends with an error saying so; while it restarts (rest_core.serve.
supervisor: its whole process group ended, at most a few restarts), and after the app gave up
on it, answers run on the native engine with a line saying why.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.decode.events import StepEvent, StepTimings, Totals
from rest_core.drafting.trie import Trie
from rest_core.serve.client import Chunk, ServerError, VllmServer, stop_orphan_server, stream_completion
from rest_core.serve.records import DraftLog, Step, answer_steps, request_prefix
from rest_core.serve.settings import request_xargs
from rest_core.serve.supervisor import GAVE_UP, RESTARTING, STARTING, State, Supervisor
from rest_core.ui.model_calls import Compared, ModelCalls, ModelJob, Notice, TimeLimit
from rest_core.ui.upload_jobs import LOCK_NAME, hold_lock, remove_stale_roots

log = logging.getLogger("rest.app")

WORKDIR_PREFIX = "rest-vllm-"  # <temp dir>/rest-vllm-<pid>-<random>: the server this app started, its log
FINISH = {"stop": "eos", "length": "length"}  # vLLM's finish reasons, as StepEvent names them


class VllmBackend:
    """The app's vLLM server and its draft log, shared by every session. The server runs under a
    Supervisor (rest_core.serve.supervisor): started in the background (after `before`, e.g. the
    default stores' first build), restarted up to `restarts` times if it dies, then given up on;
    `state` says where it stands, and VllmCalls sends answers elsewhere while it is not ready."""

    def __init__(
        self, server: VllmServer, stores: Sequence[str] | None, start_timeout: float = 900.0, restarts: int = 2
    ) -> None:
        self.server = server
        # the store names the server drafts from; None: not known (a server given by url)
        self.stores = tuple(stores) if stores is not None else None
        self.start_timeout = start_timeout
        self.supervisor = Supervisor(server, start_timeout, restarts, on_ready=self._new_log)
        self._started = False
        self._lock = threading.Lock()
        self._log: DraftLog | None = None
        self.owner_lock: Any = None  # the lock on the server's folder, held while this process runs

    def start(self, before: Callable[[], Any] | None = None) -> threading.Thread:
        """Start the server in a thread of its own, which then watches it until `stop`; `before`
        runs first in that thread."""
        self._started = True
        return self.supervisor.start(before)

    def _new_log(self) -> None:
        """Each server (a restarted one too) writes a draft log of its own."""
        with self._lock:
            self._log = DraftLog(self.server.log) if self.server.log is not None else None

    @property
    def state(self) -> State:
        return self.supervisor.state

    def wait(self, timeout: float | None = None) -> None:
        """Until the server is up; ServerError if it was given up on, is still starting after
        `timeout` (default: start_timeout) or was never started."""
        if not self._started:
            raise ServerError("the vLLM backend was not started")
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        state = self.state
        while state.name in (STARTING, RESTARTING) and time.monotonic() < deadline:
            state = self.supervisor.wait_change(max(0.0, min(1.0, deadline - time.monotonic())))
        if state.name == GAVE_UP:
            raise ServerError(state.reason)
        if state.name == STARTING:
            raise ServerError("the vLLM server is still starting: try again in a minute")
        if not self.ready:
            raise ServerError(f"the vLLM server is restarting ({state.reason or 'it stopped'})")

    @property
    def ready(self) -> bool:
        return self.supervisor.serving()

    def serves(self, stores: Any) -> bool:
        """Whether an answer drafting from `stores` (a StoreSet) goes to the server: never for a
        session's own upload (the server cannot see it), else if the server has them all (a
        server given by url: its stores are not known, so every public choice goes to it)."""
        if stores is None:
            return True
        if stores.owner:
            return False
        return self.stores is None or all(n in self.stores for n in stores.names)

    # -- the draft log, shared by every answer --------------------------------------------

    def watch(self, prefix: str) -> None:
        with self._lock:
            if self._log is not None:
                self._log.watch(prefix)

    def records(self, prefix: str) -> list:
        with self._lock:
            if self._log is None:
                return []
            self._log.poll()
            return self._log.records(prefix)

    def forget(self, prefix: str) -> None:
        with self._lock:
            if self._log is not None:
                self._log.forget(prefix)
                self._log.trim()  # only when no answer is reading it

    def stop(self) -> None:
        self.supervisor.stop()


def request_body(model: str, job: ModelJob, off: bool) -> dict[str, Any]:
    """The completion request of `job`: its prompt ids, length and sampling; the drafts from the
    job's stores (which the server serves: VllmBackend.serves) and its context if its settings
    use it, or none (`off`, or method "ar")."""
    cfg, s = job.config, job.config.sampling
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(job.prompt_ids),
        "max_tokens": cfg.max_new_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "skip_special_tokens": False,
    }
    if s.top_k:
        body["top_k"] = s.top_k
    if s.seed is not None:
        body["seed"] = s.seed
    names = list(job.stores.names) if job.stores is not None else []
    off = off or cfg.method == "ar"
    # No drafts from the server's earlier answers: the page shows every drafted chain, and those
    # answers are other visitors' (a session's own earlier answers are in its context anyway).
    body["vllm_xargs"] = request_xargs(names, off=off, context=cfg.draft.use_context, answers=None)
    return body


def chain_trie(tokens: Sequence[int], bits: Sequence[int], p: Sequence[float]) -> Trie:
    """A drafted chain as a Trie: each node the child of the one before."""
    n = len(tokens)
    weights = np.asarray(p, np.float64) if len(p) == n else np.linspace(1.0, 0.5, n)
    return Trie(
        tokens=np.asarray(tokens, np.int64),
        parents=np.arange(-1, n - 1, dtype=np.int64),
        depths=np.arange(1, n + 1, dtype=np.int64),
        weights=np.minimum.accumulate(np.clip(weights, 1e-6, None)),
        sources=np.asarray(bits, np.uint8),
    )


def step_event(
    index: int, step: Step, tokens: Sequence[int], totals: Totals, ms: float, method: str, finish: str | None
) -> StepEvent:
    """One vLLM engine step as the engine's StepEvent: the verified chain as its draft (and its
    trie: the part the page draws), the accepted prefix, the tokens with their sources."""
    rec = step.record
    chain = chain_trie(rec.drafted, rec.bits, rec.p) if rec is not None and rec.drafted else None
    emitted = tuple(int(t) for t in tokens[step.start : step.end])
    return StepEvent(
        step=index,
        method="ar" if method == "ar" else "rest",
        matches=(),
        trie=chain,
        draft_idx=tuple(range(len(chain))) if chain is not None else (),
        draft=chain,
        accepted=tuple(range(step.accepted)),
        tokens=emitted,
        token_sources=tuple(step.bits) + (0,) * (len(emitted) - step.accepted),
        c=len(chain) if chain is not None else 0,
        timings=StepTimings(forward_ms=ms, total_ms=ms),
        totals=totals,
        finished=finish is not None,
        finish_reason=FINISH.get(finish) if finish is not None else None,  # type: ignore[arg-type]
    )


def vllm_answer(backend: VllmBackend, job: ModelJob, off: bool = False) -> Iterator[StepEvent | TimeLimit]:
    """The answer to `job` from the vLLM server, one StepEvent per engine step as its tokens
    arrive, then a TimeLimit if job.max_seconds (counted from the request) stopped it. The server
    must be up (VllmBackend.wait); a server that cuts the answer raises a ServerError saying so."""
    backend.wait(0)
    server = backend.server
    body = request_body(server.model_name, job, off)
    method = "ar" if (off or job.config.method == "ar") else "rest"
    prompt_len = len(job.prompt_ids)
    start = time.perf_counter()
    deadline = start + job.max_seconds if job.max_seconds > 0 else None
    tokens: list[int] = []
    done = steps_out = accepted_total = 0
    first = last = None
    prefix = None
    stream = stream_completion(server.url, body, timeout=max(job.max_seconds, 60.0) + 60.0)
    try:
        for chunk in _cut_said(stream, tokens):
            if prefix is None:
                prefix = request_prefix(chunk.stream_id)
                backend.watch(prefix)
            now = time.perf_counter()
            first = first if first is not None else now
            tokens.extend(chunk.token_ids)
            finish = chunk.finish_reason
            fresh = answer_steps(backend.records(prefix), prompt_len, tokens, begin=done)
            ms = 1000.0 * (now - (last if last is not None else start)) / max(len(fresh), 1)
            last = now
            for k, st in enumerate(fresh):
                steps_out += 1
                accepted_total += st.accepted
                totals = Totals(
                    prompt_tokens=prompt_len,
                    new_tokens=st.end,
                    steps=steps_out,
                    draft_tokens=accepted_total,
                    elapsed_s=now - first,
                    prefill_ms=1000.0 * (first - start),
                    retrieval_ms=0.0,
                )
                ending = finish if (k == len(fresh) - 1 and finish is not None) else None
                yield step_event(steps_out - 1, st, tokens, totals, ms, method, ending)
                done = st.end
            if finish is not None:
                return
            if deadline is not None and now > deadline:
                yield TimeLimit()
                return
    finally:
        stream.close()
        if prefix is not None:
            backend.forget(prefix)


def _cut_said(stream: Iterator[Chunk], tokens: list[int]) -> Iterator[Chunk]:
    """`stream`, whose failure after the first tokens says that it cut the answer, and where."""
    try:
        yield from stream
    except ServerError as exc:
        if not tokens:
            raise
        raise ServerError(f"the answer was cut after {len(tokens)} tokens: {exc}") from None


class VllmCalls(ModelCalls):
    """ModelCalls whose chat answers and Compare run on the vLLM server (see the module's text)."""

    def __init__(self, backend: VllmBackend, gpu: Callable[[Callable], Callable] | None = None) -> None:
        super().__init__(gpu)
        self.backend = backend

    def answer(self, job: ModelJob) -> Iterator[StepEvent | TimeLimit | Notice]:
        if not self.backend.serves(job.stores):
            return super().answer(job)  # a store the server does not have: the native engine drafts from it
        return self._routed(job)

    def _routed(self, job: ModelJob) -> Iterator[StepEvent | TimeLimit | Notice]:
        """The answer from vLLM once its server is up (saying what it waits for meanwhile, for
        at most start_timeout), or from the native engine while the server restarts or after the
        app gave up on it (saying so). A server that dies mid-answer cuts it: the error says so."""
        deadline = time.monotonic() + self.backend.start_timeout
        state = self.backend.state
        while state.name == STARTING and time.monotonic() < deadline:
            yield Notice(starting_line(state))
            state = self.backend.supervisor.wait_change(max(0.0, min(1.0, deadline - time.monotonic())))
        if not self.backend.ready:
            yield Notice(native_line(state, self.backend.supervisor.restarts), "warn")
            yield from super().answer(job)
            return
        yield Notice("")
        sent = False
        try:
            for item in vllm_answer(self.backend, job):
                sent = True
                yield item
        except ServerError as exc:
            if sent or self.backend.ready or self.backend.server.given:
                raise ServerError(f"{exc}. {after_cut(self.backend)}") from None
            # refused before its first token by a server that has just died: the native engine
            yield Notice(native_line(self.backend.state, self.backend.supervisor.restarts), "warn")
            yield from super().answer(job)

    def compare(self, job: ModelJob) -> Iterator[Compared]:
        if not self.backend.serves(job.stores) or not self.backend.ready:
            return super().compare(job)  # on the native engine while vLLM's server is not up
        return self._compare_on_vllm(job)

    def _compare_on_vllm(self, job: ModelJob) -> Iterator[Compared]:
        """REST and plain decoding on the same vLLM engine (the proposer drafts nothing for the
        second: `rest_off`), each for at most job.max_seconds; no prompt lookup lane."""
        for method, off in (("rest", False), ("ar", True)):
            items = list(vllm_answer(self.backend, job, off=off))
            events = tuple(e for e in items if isinstance(e, StepEvent))
            yield Compared(method, events, cut=len(events) < len(items))
        yield Compared("lookup", lookup=None)


def starting_line(state: State) -> str:
    """The status line of an answer waiting for the server's first start."""
    waited = time.monotonic() - state.since
    return (
        f"Starting the serving engine (vLLM): waiting for {state.waiting} ({waited:.0f} s so far). "
        "Your answer starts as soon as it is up."
    )


def native_line(state: State, most: int) -> str:
    """The status line of an answer the native engine runs because vLLM's server is not up
    (`most`: the restarts the app tries)."""
    if state.name == GAVE_UP:
        return f"The serving engine (vLLM) is off ({state.reason}): answers run on the native engine, one at a time."
    if state.name == STARTING:
        return "The serving engine (vLLM) is still starting: this answer runs on the native engine, one at a time."
    why = f" ({state.reason})" if state.reason else ""
    return (
        f"The serving engine (vLLM) stopped{why} and is restarting (restart {max(state.restarts, 1)} of at most "
        f"{most}): this answer runs on the native engine meanwhile, one at a time."
    )


def after_cut(backend: VllmBackend) -> str:
    """What a visitor whose answer the server cut can do."""
    if backend.server.given:
        return f"The vLLM server at {backend.server.url} did not finish it: send again when it is back"
    return "The app restarts the serving engine (or answers on the native engine meanwhile): send again"


def make_backend(settings: Any, before: Callable[[], Any] | None = None) -> VllmBackend:
    """The backend for the app's settings (rest_core.ui.settings.Settings): the server at
    settings.vllm_url, or one this app starts (on 127.0.0.1, its draft log in a temporary folder
    of its own, removed by `close_backend`) over the default stores built by then."""
    import tempfile

    from rest_core.ui.runtime import DEFAULT_STORES, is_store

    if settings.vllm_url:
        server = VllmServer(url=settings.vllm_url)
        backend = VllmBackend(server, None)  # its stores are not known here: answers draft as it is set up
    else:
        # Named after this process and locked while it runs, so that the next start can stop
        # the server and remove the folder if this process is killed before its exit could.
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
        server = VllmServer(model=settings.model, workdir=workdir, max_seqs=settings.vllm_max_seqs)
        backend = VllmBackend(server, ())
        backend.owner_lock = hold_lock(workdir / LOCK_NAME)

    def prepare() -> None:
        if before is not None:
            before()
        if settings.vllm_url:
            return
        folder = Path(settings.datastores)
        built = {n: folder / n for n in DEFAULT_STORES if is_store(folder / n)}
        server.stores, server.method = built, ("hybrid" if built else "context")
        backend.stores = tuple(built)

    backend.start(prepare)
    return backend


def remove_stale_workdirs(parent: Path | None = None) -> list[Path]:
    """The folders (and still running servers) of app instances killed before their exit
    could stop and remove them."""
    return remove_stale_roots(parent, prefix=WORKDIR_PREFIX, before=stop_orphan_server)


def close_backend(backend: VllmBackend) -> None:
    """Stop the server this app started and remove its folder (a temporary folder it made)."""
    import shutil

    backend.stop()
    workdir = backend.server.workdir
    if workdir is not None and workdir.name.startswith(WORKDIR_PREFIX):
        shutil.rmtree(workdir, ignore_errors=True)


def backend_note(backend: VllmBackend) -> str:
    """The page's line about who answers (HTML)."""
    return (
        '<div class="backend-note">Chat answers and Compare are served by <b>vLLM</b>, batched with every other '
        "visitor's, with REST drafting chains from the server's datastores and the conversation. The draft "
        "knobs (c, n_max, ...) apply to <i>Step through</i>, to Why this c? and to your own uploaded corpora, "
        "which the native engine runs. While the vLLM server starts or restarts, the status line says so "
        "(answers wait for its first start, and run on the native engine during a restart).</div>"
    )
