"""A background generation run: the engine's step events consumed in a worker thread, so decoding
never waits for the page to render; the handler drains them and can cancel between two steps."""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from rest_core.ui.model_calls import TimeLimit
from rest_core.ui.runtime import trim_memory

log = logging.getLogger("rest.app")

_LIVE: weakref.WeakSet[Run] = weakref.WeakSet()  # every run whose worker has not ended


class Run:
    """Consumes a generation's step events in a worker thread, so decoding never waits for the
    page to render; the handler drains `events` and can cancel between two steps.

    `steps(job)` starts the generation and returns its events (rest_core.ui.model_calls: the
    model call holds the lock and keeps to its time limit, then yields a TimeLimit: `timed_out`
    then says so). Cancelling closes it at the next event."""

    def __init__(self, steps: Callable[[Any], Iterable[Any]], job: Any) -> None:
        self.events: queue.Queue[Any] = queue.Queue()
        self._cancel = threading.Event()
        self.done = threading.Event()
        self.timed_out = False
        # The handler's context variables go along: spaces.GPU reads the request (whose quota
        # the call uses) from one, and the call starts in this thread.
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._work, steps, job), daemon=True, name="rest-run")
        _LIVE.add(self)
        self._thread.start()

    def _work(self, start: Callable[[Any], Iterable[Any]], job: Any) -> None:
        try:
            steps = start(job)
            try:
                for ev in steps:
                    if isinstance(ev, TimeLimit):
                        self.timed_out = True
                        break
                    self.events.put(ev)
                    del ev  # the event (and its trie) is not held while the next step runs
                    if self._cancel.is_set():
                        break
            finally:
                close = getattr(steps, "close", None)
                if close:
                    close()
        except Exception as exc:  # noqa: BLE001 - reported to the page as a message
            log.error("generation failed:\n%s", traceback.format_exc())
            self.events.put(exc)
        finally:
            self.done.set()
            _LIVE.discard(self)
            self.events.put(None)
            trim_memory(collect=False)  # the steps' tries were freed in this thread's heap

    def cancel(self) -> None:
        self._cancel.set()

    def drain(self, timeout: float) -> tuple[list[Any], bool]:
        """Events that arrived (waiting up to `timeout` for the first); True once the run ended."""
        out: list[Any] = []
        ended = False
        try:
            item = self.events.get(timeout=timeout)
            while True:
                if item is None:
                    ended = True
                    break
                out.append(item)
                item = self.events.get_nowait()
        except queue.Empty:
            pass
        return out, ended


def stop_all(timeout: float) -> int:
    """Cancel every run still working and wait (at most `timeout` s in all) for their workers to
    end their step: the process exits (SIGTERM) only once no thread is inside the model, since a
    worker still in torch when the interpreter finalizes aborts it ("terminate called without an
    active exception", exit code -6). Returns how many runs had not ended in time."""
    runs = list(_LIVE)
    for run in runs:
        run.cancel()
    end = time.monotonic() + timeout
    for run in runs:
        run.done.wait(max(0.0, end - time.monotonic()))
    return sum(not run.done.is_set() for run in runs)
