"""A vLLM server kept serving: started in the background, watched while it serves, ended whole (its
process group) when it dies, restarted a bounded number of times, then given up on. Standard
library only; the app's vLLM backend (rest_core/ui/vllm_calls.py) reads `state` to tell a
visitor what the engine is waiting for and where an answer goes meanwhile.

    starting --ready--> ready --dies--> restarting --ready--> ready ... --dies, no restart left--> gave up

A server that fails to start counts as one that died. A server given by url (not started here)
is only waited for: it is never restarted or stopped.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rest_core.serve.client import ServerError, VllmServer, get_json

log = logging.getLogger("rest.serve")

STARTING, READY, RESTARTING, GAVE_UP = "starting", "ready", "restarting", "gave up"


@dataclass(frozen=True)
class State:
    """Where the server stands: `name` (one of the four above), what a start is waiting for
    (`waiting`), why the last server ended (`reason`), since when (time.monotonic) and how many
    restarts so far."""

    name: str
    waiting: str = ""
    reason: str = ""
    since: float = 0.0
    restarts: int = 0


class Supervisor:
    """Runs `server` in a thread of its own: start, wait until it answers, watch it (its process
    every `poll_s`, its /health every few seconds: `health_s` without an answer counts as dead),
    and after it ends, end its whole group and start it again, at most `restarts` times.
    `on_ready` runs each time a server is up, before answers go to it."""

    def __init__(
        self,
        server: VllmServer,
        start_timeout: float = 900.0,
        restarts: int = 2,
        poll_s: float = 0.5,
        health_s: float = 60.0,
        on_ready: Callable[[], Any] | None = None,
    ) -> None:
        self.server = server
        self.start_timeout = start_timeout
        self.restarts = restarts
        self.poll_s = poll_s
        self.health_s = health_s
        self.on_ready = on_ready
        self._state = State(STARTING, "the start to begin", since=time.monotonic())
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._starting = threading.Lock()  # a start and `stop` never overlap
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> State:
        return self._state

    def _set(self, name: str, waiting: str = "", reason: str = "", restarts: int | None = None) -> None:
        with self._changed:
            old = self._state
            n = old.restarts if restarts is None else restarts
            self._state = State(name, waiting, reason or old.reason, time.monotonic(), n)
            self._changed.notify_all()

    def wait_change(self, timeout: float) -> State:
        """The state once it changes, or after `timeout` seconds."""
        with self._changed:
            old = self._state
            self._changed.wait_for(lambda: self._state is not old, timeout)
            return self._state

    def serving(self) -> bool:
        """Whether a request sent now can be answered: ready, and its process still runs."""
        return self._state.name == READY and self.server.running()

    def start(self, before: Callable[[], Any] | None = None) -> threading.Thread:
        """Start the server in a thread of its own; `before` runs first in that thread."""
        self._thread = threading.Thread(target=self._run, args=(before,), name="vllm-server", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self) -> None:
        """End the server (its whole group) and its watch; no restart after this."""
        with self._starting:
            self._closing.set()
        self.server.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    # -- the thread ------------------------------------------------------------------------

    def _run(self, before: Callable[[], Any] | None) -> None:
        if before is not None:
            self._set(STARTING, "the default datastores' first build")
            try:
                before()
            except Exception:  # noqa: BLE001 - the server starts without them
                log.exception("before starting the vLLM server")
        deaths = 0
        while True:
            why = self._serve_once(STARTING if deaths == 0 else RESTARTING)
            if self._closing.is_set():
                return
            deaths += 1
            # Answers stop going to it first; then what is left of it goes: its engine core and
            # workers outlive the server's own process.
            if self.server.given or deaths > self.restarts:
                log.error("%s; gave up on it after %d restarts", why, deaths - 1)
                given_up = "" if self.server.given else f"; {self.restarts} restarts did not keep it up"
                self._set(GAVE_UP, reason=why + given_up)
                self.server.stop()
                return
            log.error("%s; restarting it (%d of %d)", why, deaths, self.restarts)
            self._set(RESTARTING, "what is left of the server to end", reason=why, restarts=deaths)
            self.server.stop()

    def _serve_once(self, name: str) -> str:
        """Start the server, wait until it answers, watch it; why it ended."""
        with self._starting:
            if self._closing.is_set():
                return "closing"
            try:
                self.server.start()
            except (OSError, ValueError) as exc:
                return f"the vLLM server could not be started: {exc}"
        self._set(name, "the vLLM server to load the model and answer on its port")
        try:
            self.server.wait_ready(self.start_timeout)
        except ServerError as exc:
            log.error("%s", exc)
            return self._start_failure(str(exc))
        if self.on_ready is not None:
            self.on_ready()
        print(f"vLLM server ready at {self.server.url} ({self.server.model_name})", flush=True)
        self._set(READY)
        return self._watch()

    def _start_failure(self, error: str) -> str:
        """A start's failure in one line: how it ended and the last line of its output."""
        head = self.server.exited() or error.split(":", 1)[0]
        lines = [x.strip() for x in self.server.output_tail().splitlines() if x.strip()]
        return f"{head}: {lines[-1]}"[:300] if lines else head

    def _watch(self) -> str:
        """Until the server ends (its process exits, or /health goes unanswered for health_s);
        why it ended. A server given by url is watched by nothing but its answers."""
        last_ok = next_check = time.monotonic()
        while not self._closing.wait(self.poll_s):
            ended = self.server.exited()
            if ended:
                return ended
            now = time.monotonic()
            if self.server.given or now < next_check:
                continue
            next_check = now + min(5.0, self.health_s / 4)
            try:
                get_json(self.server.url, "/health", timeout=min(5.0, self.health_s / 4))
                last_ok = now
            except (OSError, ServerError, ValueError, http.client.HTTPException):
                if now - last_ok > self.health_s:
                    return f"the vLLM server stopped answering (nothing from /health for {self.health_s:.0f} s)"
        return "closing"
