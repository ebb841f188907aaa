"""Your corpus: one visitor's uploaded files and pasted text -> datastores of its own ("Corpora"),
built in the background with the model's tokenizer and followed by the page (`build_corpus`).
No Gradio here: the build yields `CorpusStep`s that app.py maps onto its components."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rest_core.ui import style
from rest_core.ui.runtime import Runtime, selected_names
from rest_core.ui.upload_jobs import UploadJob, UploadRefused, store_name

log = logging.getLogger("rest.app")


@dataclass
class Corpora:
    """One visitor's corpora: its own datastores (name -> folder; no other visitor sees them),
    the build in progress, how many it published and its raw uploads not built yet. Held by the
    visitor's Session (rest_core/ui/session.py), which releases it."""

    uploads: dict[str, Path] = field(default_factory=dict)
    build: UploadJob | None = None  # the upload build in progress (or just ended)
    published: int = 0  # stores this visitor published (--publish-uploads): they count to its limit
    raw: set[str] = field(default_factory=set)  # its raw uploads not built yet (runtime.uploads.raw)

    @property
    def building(self) -> bool:
        return self.build is not None and not self.build.done.is_set()

    def release(self, runtime: Runtime | None, owner: str) -> None:
        """Stop the build (it removes what it wrote), forget the stores and delete the raw
        uploads and the visitor's uploads folder (`owner`: the visitor's key)."""
        build, self.build = self.build, None
        if build is not None:  # the user left: their build stops (and removes what it wrote)
            build.stop()
        self.uploads = {}
        raw, self.raw = self.raw, set()
        if runtime is not None:
            runtime.uploads.raw.remove(raw)
            runtime.drop_owner(owner)  # engines over this visitor's stores, and their folder

    def store_choices(self, runtime: Runtime) -> list[str]:
        """The datastores this visitor may choose: everyone's, then its own."""
        public = runtime.store_names()
        return public + [n for n in self.uploads if n not in public]

    def start_upload(
        self,
        runtime: Runtime,
        owner: str,
        paths: Sequence[str],
        names: Sequence[str],
        pasted: str,
        name: str = "",
    ) -> UploadJob:
        """Start building a datastore from uploaded files and pasted text in the background (with
        the model's tokenizer), or refuse with UploadRefused (one line for the page)."""
        if self.build is not None and not self.build.done.is_set():
            raise UploadRefused("a corpus of yours is being built already: wait for it to finish")
        if not paths and not (pasted or "").strip():
            raise UploadRefused("nothing to build from: upload files or paste some text")
        limit = runtime.settings.max_stores_per_session
        if limit and len(self.uploads) + self.published >= limit:
            raise UploadRefused(
                f"you have {limit} corpora already, the most one session may build: press Clear to remove them"
            )
        final = store_name(name, self.store_choices(runtime) + list(runtime.published()))
        tokenizer = runtime.build_tokenizer()
        self.build = runtime.uploads.start(owner, final, paths, names, pasted, tokenizer, busy=runtime.lock.locked)
        self.raw -= set(paths)  # the build deletes them once read
        return self.build

    def finish_upload(self, runtime: Runtime) -> str:
        """A finished build joins this visitor's stores (or everyone's, when published);
        returns its one-line summary. Raises UploadRefused with the build's error."""
        job = self.build
        if job is None or not job.done.is_set():
            raise UploadRefused("no corpus build has finished")
        self.build = None
        if job.error is not None or job.summary is None:
            raise UploadRefused(job.error or "the build failed")
        if job.public:
            (job.folder / "name.txt").write_text(job.name, encoding="utf-8")
            self.published += 1
        else:
            self.uploads[job.name] = job.folder
        return job.summary.line()


def progress_html(job: UploadJob) -> str:
    """The build's status line: a bar, then documents and tokens read, or the suffix array."""
    p = job.progress
    fraction = p.fraction if p is not None else 0.0
    text = p.describe() if p is not None else "starting"
    bar = f'<progress max="1" value="{fraction:.3f}"></progress>'
    return style.status_html(f"{bar} Building <b>{style.esc(job.name)}</b>: {style.esc(text)}…", elem_id=STATUS_ID)


STATUS_ID = "corpus-msg"


@dataclass(frozen=True)
class CorpusStep:
    """What a corpus build shows now: its status line and, once built, the datastore selection
    with the new store added (None: the selection stays). `used`: the build has read (and
    deleted) the uploaded files, so the file input is emptied."""

    status: str
    selected: list[str] | None = None
    used: bool = False


def file_paths(files: Any) -> list[str]:
    """The paths of what the page's file input holds (paths, or objects with a `name`)."""
    return [f if isinstance(f, str) else getattr(f, "name", str(f)) for f in (files or [])]


def build_corpus(
    runtime: Runtime, corpora: Corpora, owner: str, files: Any, pasted: str, name: str, current: Any
) -> Iterator[CorpusStep]:
    """Build a datastore from the uploaded files and pasted text in the background, following its
    progress (polled: the build runs in its own thread, chat goes on); every refusal a message.
    `owner`: the visitor's key."""

    def status(message: str, kind: str = "info") -> str:
        return style.status_html(message, kind, elem_id=STATUS_ID)

    paths = file_paths(files)
    corpora.raw.update(paths)  # until the build takes them: Clear or expiry deletes them
    names = [style.clean_text(Path(p).name) for p in paths]  # shown in the page: valid text only
    try:
        job = corpora.start_upload(runtime, owner, paths, names, style.clean_text(pasted), style.clean_text(name))
    except ValueError as exc:  # a refusal: a message, never a traceback
        yield CorpusStep(status(style.esc(str(exc)), "warn"))
        return
    except Exception as exc:  # noqa: BLE001 - the model (its tokenizer) failed to load
        log.error("upload failed to start", exc_info=True)
        yield CorpusStep(status(style.esc(f"the build could not start: {exc}"), "err"))
        return
    while not job.done.wait(0.4):
        if corpora.build is not job:  # released (Clear, the page closed): it was cancelled
            return
        yield CorpusStep(progress_html(job))
    if corpora.build is not job:
        return
    try:
        line = corpora.finish_upload(runtime)
    except ValueError as exc:
        yield CorpusStep(status(style.esc(f"Nothing built: {exc}"), "warn"), used=bool(paths))
        return
    where = "everyone's datastores (published)" if job.public else "your datastores (private to this page)"
    msg = f"Built <b>{style.esc(job.name)}</b>, added to {where} and selected: {style.esc(line)}."
    yield CorpusStep(status(msg, "info"), [*selected_names(current), job.name])
