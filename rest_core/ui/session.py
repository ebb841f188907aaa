"""Everything one visitor holds, under one owner: the chat (rest_core/ui/chat.py), the corpora it
uploaded (rest_core/ui/corpus.py) and the step-through (rest_core/ui/stepper.py), with the jobs
it has on the model. The app keeps one Session per page in gr.State; Clear, the state's expiry
(--session-ttl), a closed page and an idle uploading visitor all end in `release`, which frees
all of it at once. No Gradio here.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from rest_core.ui.chat import Chat
from rest_core.ui.corpus import Corpora
from rest_core.ui.measures import ForwardTime, Measured
from rest_core.ui.runtime import Runtime, trim_memory
from rest_core.ui.stepper import Stepper


@dataclass
class Session:
    """One visitor (a browser tab, or an API client's session): its chat, its corpora, its
    step-through and its jobs queued or running on the model."""

    chat: Chat = field(default_factory=Chat)
    corpora: Corpora = field(default_factory=Corpora)
    steps: Stepper = field(default_factory=Stepper)
    # Whose conversation an engine's saved KV cache holds (Runtime.forget), whose private stores
    # an engine serves (Runtime.drop_owner); unique per visitor.
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    jobs: list[float] = field(default_factory=list)  # admission times of the jobs queued or running
    client: str = "unknown"  # the address its requests come from (rest_core.ui.fairness.request_address)
    last_used: float = field(default_factory=time.monotonic)  # when a request last used it (touch)
    # The answer Why this c?'s figure describes (why_c.answer_of), None when it shows nothing:
    # once the answer on screen is another, the figure goes (why_c.stale).
    why_c_of: tuple[str, int] | None = None
    # Whether the page picks each message's datastores (store_pick) because the visitor has not
    # chosen any: set by the page's load, ended by a choice (the datastore list, a guided
    # example, a corpus built). An API client's store is always its own choice.
    stores_auto: bool = False
    # The one-token forward of this visitor's last Compare's plain decoding: Why this c? shows its
    # own measurement of that forward beside it (rest_core.ui.measures.same_forward).
    plain_forward: ForwardTime | None = None
    # What that Compare measured (its prompt, speedup, REST's step by part): Why this c? sets its
    # prediction beside it when it describes an answer to the same prompt.
    measured: Measured | None = None

    def admit(self, max_jobs: int, horizon_s: float) -> bool:
        """Admit one more job unless `max_jobs` (0: no limit) are queued or running already. A
        job the queue dropped unrun (cancelled while waiting) never reports back: admissions
        older than `horizon_s` (the longest a job can wait and run) no longer count."""
        now = self.last_used = time.monotonic()
        self.jobs = [t for t in self.jobs if now - t < horizon_s]
        if max_jobs and len(self.jobs) >= max_jobs:
            return False
        self.jobs.append(now)
        return True

    def job_done(self) -> None:
        self.touch()
        if self.jobs:
            self.jobs.pop(0)

    def touch(self) -> None:
        """A request used this visitor's state (its idle time starts again)."""
        self.last_used = time.monotonic()

    def idle_s(self, horizon_s: float, now: float | None = None) -> float:
        """Seconds since a request last used this visitor's state; 0 while it has work under
        way (an answer streaming, a build, a job admitted less than `horizon_s` ago)."""
        now = time.monotonic() if now is None else now
        waiting = bool(self.jobs) and now - self.jobs[-1] < horizon_s
        return 0.0 if self.chat.active or self.corpora.building or waiting else now - self.last_used

    def release(self, runtime: Runtime | None = None) -> None:
        """Forget everything the visitor holds (Clear, expiry, a closed page): the chat and its
        run, the step-through's steps, the corpora (their build stops, their folder goes), and
        the engines' saved KV cache if it holds this visitor's text; memory goes back to the
        system. The same object stays the page's state, empty."""
        self.chat.release()
        self.steps.close()
        self.jobs = []
        self.plain_forward = None
        self.measured = None
        self.corpora.release(runtime, self.key)
        if runtime is not None:
            runtime.forget(self.key)
            trim_memory()
