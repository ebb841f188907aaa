"""A background generation run: the engine's step events consumed in a worker thread, so decoding
never waits for the page to render; the handler drains them and can cancel between two steps."""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from rest_core.config import GenerationConfig
from rest_core.ui.runtime import trim_memory

log = logging.getLogger("rest.app")


class Run:
    """Consumes the engine's step events in a worker thread, so decoding never waits for the page
    to render; the handler drains `events` and can cancel between two steps. `lock` is held while
    the engine runs (one model, one generation at a time).

    `keep` maps each event to what is queued (the app keeps compact events: a step's whole trie
    is tens of thousands of nodes at K=5000); `max_seconds` (> 0) stops the generation after that
    long on the model, counted from when it got the lock: `timed_out` then says so."""

    def __init__(
        self,
        engine: Any,
        prompt_ids: list[int],
        config: GenerationConfig,
        lock: threading.Lock,
        keep: Callable[[Any], Any] | None = None,
        max_seconds: float = 0.0,
    ) -> None:
        self.events: queue.Queue[Any] = queue.Queue()
        self._cancel = threading.Event()
        self.done = threading.Event()
        self.timed_out = False
        self._keep = keep or (lambda ev: ev)
        self._max_seconds = max_seconds
        self._thread = threading.Thread(
            target=self._work, args=(engine, prompt_ids, config, lock), daemon=True, name="rest-run"
        )
        self._thread.start()

    def _work(self, engine: Any, prompt_ids: list[int], config: GenerationConfig, lock: threading.Lock) -> None:
        try:
            with lock:
                deadline = time.monotonic() + self._max_seconds if self._max_seconds > 0 else None
                steps = engine.generate(prompt_ids, config)
                try:
                    for ev in steps:
                        self.events.put(self._keep(ev))
                        del ev  # the full event (and its trie) is not held while the next step runs
                        if self._cancel.is_set():
                            break
                        if deadline is not None and time.monotonic() > deadline:
                            self.timed_out = True
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

    def collect(self) -> list[Any]:
        """All the run's events (blocking); a failure in the engine is raised here."""
        events: list[Any] = []
        while True:
            got, ended = self.drain(timeout=0.5)
            for ev in got:
                if isinstance(ev, Exception):
                    raise RuntimeError(f"generation failed: {ev}")
                events.append(ev)
            if ended:
                return events
