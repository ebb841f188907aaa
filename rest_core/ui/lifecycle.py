"""The visitors' state over its life: which Session each open page holds (a closed page frees
its Session at once), the uploading visitors swept once idle for the session TTL, and each
visitor's jobs on the model (one queue shared by all, `max_jobs` per visitor). No Gradio here.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any

from rest_core.ui.fairness import job_horizon, request_address
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import Session

log = logging.getLogger("rest.app")

BUSY = "Your previous request is still queued or running: wait for it to finish (or Stop it)."
CLIENT_BUSY = (
    "Requests from your address (other tabs or scripts) already hold {n} places in the model's queue: "
    "wait for one of them to finish."
)


def as_session(value: Any) -> Session:
    """The page's session state, used now; a fresh Session where the state was lost (or an API
    call sent none)."""
    if not isinstance(value, Session):
        return Session()
    value.touch()
    return value


class NotCopied:
    """A callable that copies and deep copies return as it is.

    Gradio deep-copies the page config on every page load (GET / and /config), and the config
    holds the session state's delete callback: a bound method there would drag its object, and
    through it the runtime (model, engines, datastores), into every copy: seconds and gigabytes
    per page load."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __copy__(self) -> NotCopied:
        return self

    def __deepcopy__(self, memo: dict) -> NotCopied:
        return self


class OpenPages:
    """Which Session each open page holds (weakly), so that closing a page frees its data at once
    (Gradio would keep a closed page's state for an hour); and the sessions that upload corpora,
    freed once idle for the session TTL whatever endpoints they used (Gradio's state TTL counts
    from the last update of the state, and a client of /build_corpus alone never updates it)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._open: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()  # page -> its Session
        self._uploading: dict[str, Session] = {}  # key -> a session that built (or builds) corpora
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None

    def release(self, session: Session) -> Session:
        """Clear, the session state's expiry, a closed page and idleness: free everything the
        visitor holds (Session.release: chat, step-through, corpora, saved KV cache); the same
        object stays the page's state, empty."""
        with self._lock:
            self._uploading.pop(session.key, None)
        drop_jobs(self.runtime, session)
        session.release(self.runtime)
        return session

    def expired(self, value: Any) -> None:
        """The page state's delete callback (its time to live ran out): free the Session it held."""
        if isinstance(value, Session):
            self.release(value)

    def uploading(self, session: Session) -> None:
        """`session` builds a corpus: freed once idle for the session TTL (`sweep`, from a
        thread started with the first one)."""
        ttl = self.runtime.settings.session_ttl
        if not ttl:
            return
        with self._lock:
            self._uploading[session.key] = session
            if self._sweeper is None:
                self._sweeper = _start_sweeper(self, period_s=min(max(ttl / 4, 0.2), 30.0))

    def sweep(self, now: float | None = None) -> list[Session]:
        """Release the uploading sessions idle for longer than the session TTL; returns them."""
        s = self.runtime.settings
        horizon = job_horizon(s.max_seconds)
        with self._lock:
            idle = [x for x in self._uploading.values() if s.session_ttl and x.idle_s(horizon, now) > s.session_ttl]
        for session in idle:
            log.info("session idle for over %g s: its uploads are deleted", s.session_ttl)
            self.release(session)
        return idle

    def opened(self, page: str | None, session: Session) -> None:
        if page:
            self._open[page] = session

    def closed(self, page: str | None, held: Any = None) -> None:
        """The page closed: free the Session its load saw and `held`, the one the page's state
        holds now (they differ when two events at page load each created the state)."""
        seen = self._open.pop(page, None) if page else None
        freed = [s for s in {id(x): x for x in (seen, held) if isinstance(x, Session)}.values()]
        log.info("page closed (%s): %s", page, f"released {len(freed)}" if freed else "no session held")
        for session in freed:
            self.release(session)


def _start_sweeper(pages: OpenPages, period_s: float) -> threading.Thread:
    """A daemon thread that sweeps `pages` every `period_s` seconds while they exist."""
    ref = weakref.ref(pages)

    def loop() -> None:
        while (held := ref()) is not None:
            try:
                held.sweep()
            except Exception:  # noqa: BLE001 - the next sweep tries again
                log.error("session sweep failed:\n%s", traceback.format_exc())
            del held
            time.sleep(period_s)

    thread = threading.Thread(target=loop, daemon=True, name="session-sweeper")
    thread.start()
    return thread


def admit_job(runtime: Runtime, session: Session, request: Any = None) -> str:
    """Whether `session` may queue one more job on the model (Send, Compare, a step, Run to end,
    Why this c?): "" if so, else why not. At most the server's max_jobs queued or running per
    session (Session.admit), and client_jobs per client address over all its sessions
    (fairness.ClientJobs: a script that opens a session per request cannot fill the queue that
    every visitor shares). Asked when a request is queued, so a refused one takes no place in it."""
    s = runtime.settings
    if not session.admit(s.max_jobs, job_horizon(s.max_seconds)):
        return BUSY
    if request is not None:
        session.client = request_address(request, s.trusted_proxies)
    if not runtime.clients.admit(session.client):
        session.jobs.pop()  # the admission just made
        return CLIENT_BUSY.format(n=s.client_jobs)
    return ""


def job_done(runtime: Runtime, session: Session) -> None:
    """An admitted job ended (finished, failed or cancelled): it counts no more, for its session
    nor for its client (a job that Stop or Clear already dropped is not counted twice)."""
    if session.jobs:
        runtime.clients.done(session.client)
    session.job_done()


def drop_jobs(runtime: Runtime, session: Session) -> None:
    """Stop, Clear, expiry, a closed page: the session's queued jobs are cancelled, so they count
    no more for its client either."""
    for _ in session.jobs:
        runtime.clients.done(session.client)
    session.jobs = []
