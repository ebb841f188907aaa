"""A background generation run: the engine's step events consumed in a worker thread, so decoding
never waits for the page to render; the handler drains them and can cancel between two steps."""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from rest_core.ui.model_calls import TimeLimit
from rest_core.ui.runtime import trim_memory

log = logging.getLogger("rest.app")


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
