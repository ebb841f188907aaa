"""Sharing the one model fairly between visitors we do not know. No Gradio here.

- `client_address`: who a request comes from, for limits that a new session per request must not
  escape (every `gradio_client.Client` is a new session).
- `ClientJobs`: how many jobs each client has queued or running, all its sessions together.
- `ModelGate`: the model's lock, taken by short jobs (Send, Next step) before the next chunk of
  a long one (Run to end, Compare, Why this c?), so a Send waits for at most one chunk.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

SHORT, LONG = "short", "long"  # the gate's lanes: short jobs go first
QUEUE_SIZE = 32  # requests waiting for the model, all sessions together


def job_horizon(max_seconds: float, queue_size: int = QUEUE_SIZE) -> float:
    """The longest a job can wait in a queue of `queue_size` and then run (seconds), given the
    server's time limit per request: admissions older than this no longer count (a job the queue
    dropped unrun never reports back)."""
    return (queue_size + 1) * max_seconds + 60 if max_seconds else 3600.0


def client_address(headers: Mapping[str, str] | None, peer: str | None, trusted_proxies: int = 0) -> str:
    """The visitor's address. With no trusted proxy, the connection's own peer. Behind
    `trusted_proxies` proxies (a Hugging Face Space: 1), the address the outermost of them saw:
    each proxy appends the address it was reached from to X-Forwarded-For, so the entry that many
    places from the right was written by a proxy we trust, and anything left of it is whatever
    the client sent (and may be forged)."""
    if trusted_proxies > 0 and headers is not None:
        forwarded = next((v for k, v in headers.items() if k.lower() == "x-forwarded-for"), "")
        hops = [h.strip() for h in forwarded.split(",") if h.strip()]
        if hops:
            return hops[-min(trusted_proxies, len(hops))]
    return peer or "unknown"


def request_address(request: Any, trusted_proxies: int = 0) -> str:
    """client_address of a gr.Request (or anything with .headers and .client.host); "unknown"
    for a call made without one (a test, a direct call)."""
    if request is None:
        return "unknown"
    client = getattr(request, "client", None)
    return client_address(getattr(request, "headers", None), getattr(client, "host", None), trusted_proxies)


class ClientJobs:
    """Jobs queued or running per client address, over all its sessions. A job the queue drops
    unrun never reports back, so an admission older than `horizon_s` (the longest a job can
    wait and run) no longer counts. Thread-safe."""

    def __init__(self, limit: int, horizon_s: float) -> None:
        self.limit = limit  # 0: no limit
        self.horizon_s = horizon_s
        self._jobs: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _live(self, client: str, now: float) -> list[float]:
        jobs = [t for t in self._jobs.get(client, []) if now - t < self.horizon_s]
        if jobs:
            self._jobs[client] = jobs
        else:
            self._jobs.pop(client, None)  # a client that left holds no entry
        return jobs

    def admit(self, client: str) -> bool:
        """Count one more job for `client`, unless it has `limit` queued or running already."""
        now = time.monotonic()
        with self._lock:
            jobs = self._live(client, now)
            if self.limit and len(jobs) >= self.limit:
                return False
            self._jobs[client] = [*jobs, now]
            return True

    def done(self, client: str) -> None:
        """One of `client`'s admitted jobs ended (finished, failed or cancelled)."""
        with self._lock:
            jobs = self._jobs.get(client)
            if jobs:
                jobs.pop(0)
                if not jobs:
                    del self._jobs[client]

    def count(self, client: str) -> int:
        with self._lock:
            return len(self._live(client, time.monotonic()))

    def clients(self) -> int:
        """Clients holding a job now (memory is bounded by the queue, not by who ever came)."""
        with self._lock:
            now = time.monotonic()
            return sum(1 for c in list(self._jobs) if self._live(c, now))


class ModelGate:
    """The model's lock with two lanes: whoever waits in SHORT gets the model before anyone in
    LONG, first come first served within a lane. A long job takes the gate once per chunk (a
    few seconds of steps) and gives it back between chunks, so a short job waits for at most
    the chunk under way. Thread-safe; the holder must not take it again (not reentrant)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._tickets = itertools.count()
        self._waiting: dict[str, list[int]] = {SHORT: [], LONG: []}
        self._shut = False

    def _next(self) -> int | None:
        for lane in (SHORT, LONG):
            if self._waiting[lane]:
                return self._waiting[lane][0]
        return None

    def acquire(self, lane: str = SHORT) -> float:
        """Take the model; waits while it is held or an earlier or higher-lane job waits.
        Returns the seconds waited."""
        if lane not in self._waiting:
            raise ValueError(f"unknown lane {lane!r}")
        t0 = time.monotonic()
        with self._cond:
            ticket = next(self._tickets)
            self._waiting[lane].append(ticket)
            try:
                while self._held or self._shut or self._next() != ticket:
                    self._cond.wait()
            finally:
                self._waiting[lane].remove(ticket)
            self._held = True
        return time.monotonic() - t0

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    @contextmanager
    def hold(self, lane: str = SHORT) -> Iterator[None]:
        """Hold the model for the block (acquire, then release however it ends)."""
        self.acquire(lane)
        try:
            yield
        finally:
            self.release()

    def let_short_in(self, lane: str) -> float:
        """Called by the holder between two steps: a LONG holder gives the model to the short
        jobs waiting now and takes it back after them (and after long jobs that waited
        before it). Returns the seconds it was without the model (0: nobody was let in)."""
        if lane != LONG or not self.waiting(SHORT):
            return 0.0
        self.release()
        return self.acquire(LONG)

    def shut(self, timeout: float) -> bool:
        """The process is exiting: nobody takes the model again, and this waits (at most
        `timeout` s) for the holder to give it back, so that no thread is inside the model when
        the interpreter finalizes. True when the model is free."""
        end = time.monotonic() + timeout
        with self._cond:
            self._shut = True
            while self._held and time.monotonic() < end:
                self._cond.wait(max(0.0, end - time.monotonic()))
            return not self._held

    def waiting(self, lane: str | None = None) -> int:
        """Jobs waiting for the model (in one lane, or both)."""
        with self._cond:
            return sum(len(v) for k, v in self._waiting.items() if lane in (None, k))

    def locked(self) -> bool:
        """Whether a job holds the model now (as threading.Lock.locked)."""
        return self._held
