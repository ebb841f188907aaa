"""Build a datastore from what a user brings (uploaded files, a zip of a folder, pasted text):
the library half of the app's "Your corpus" panel. No Gradio here.

    summary = build_from_files(paths, out_dir, tokenizer, names=original_names,
                               progress=callback, cancel=threading.Event())
    summary.line()   # "3 documents, 1,234 tokens from 2 files in 0.4 s; skipped: 1 binary file"

Reading is bounded by `ReadLimits` (20 MB of text and 2,000 files by default); zips are read in
memory and never extracted (see `rest_core.store.files.read_files`). Every refusal is a ValueError
(CorpusError or DatastoreError) with a one-line message for the page; a cancelled build raises
BuildCancelled and leaves nothing behind.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rest_core.store.build import BuildOptions, BuildProgress, build_datastore
from rest_core.store.corpora import CorpusError, Document
from rest_core.store.files import UPLOAD_LIMITS, ReadLimits, read_files
from rest_core.store.format import DatastoreError

PASTED_NAME = "pasted text"
SA_SHARE = 0.1  # share of the progress bar given to the suffix-array phase (it is short)


@dataclass(frozen=True)
class UploadProgress:
    """One progress report: phase "reading" (documents and tokens so far; bytes of the upload
    read, of bytes_total), then "suffix array", then "done"."""

    phase: str
    documents: int = 0
    tokens: int = 0
    bytes_read: int = 0
    bytes_total: int = 0

    @property
    def fraction(self) -> float:
        """0..1 for a progress bar: reading by bytes, then the suffix array."""
        if self.phase == "done":
            return 1.0
        if self.phase == "suffix array":
            return 1.0 - SA_SHARE
        return (1.0 - SA_SHARE) * min(1.0, self.bytes_read / self.bytes_total) if self.bytes_total else 0.0

    def describe(self) -> str:
        if self.phase == "suffix array":
            return f"indexing {self.tokens:,} tokens (suffix array)"
        if self.phase == "done":
            return f"done: {self.documents:,} documents, {self.tokens:,} tokens"
        return f"reading: {self.documents:,} documents, {self.tokens:,} tokens"


# An upload's build: quiet, in small batches (progress and cancellation every ~0.1 s).
UPLOAD_BUILD = BuildOptions(verbose=False, batch_chars=256_000)


@dataclass(frozen=True)
class BuildSummary:
    """What an upload build read and skipped (skipped: count per reason)."""

    path: Path
    files: int
    documents: int
    tokens: int
    seconds: float
    skipped: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        return (
            f"{self.documents:,} documents, {self.tokens:,} tokens from {self.files:,} file(s) in {self.seconds:.1f} s"
            + (f"; skipped: {skipped}" if skipped else "")
        )


def build_from_files(
    paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    tokenizer: Any,
    *,
    names: Sequence[str] | None = None,
    pasted: str = "",
    limits: ReadLimits = UPLOAD_LIMITS,
    progress: Callable[[UploadProgress], None] | None = None,
    options: BuildOptions = UPLOAD_BUILD,
    **changes: Any,
) -> BuildSummary:
    """Build a datastore at `out_dir` (which must not exist) from uploaded files and/or pasted
    text, with `tokenizer`.

    paths: the uploaded files (.txt, .md, .py and other text, .jsonl, ShareGPT .json, .zip), or
    folders; names: their display names (an upload's original file names; default the file
    names); pasted: text typed into the page, one document. progress gets an UploadProgress
    after every few documents and at each phase. `options` with `changes` (BuildOptions fields
    by name, e.g. cancel: a threading.Event that stops the build between documents) say how; the
    upload sets the source, its reader's meta and the progress callback. Raises CorpusError / DatastoreError (ValueErrors, one line) for an empty
    or oversized upload, a zip bomb, or nothing usable in it; BuildCancelled when cancelled.
    """
    started = time.perf_counter()
    upload = _Upload.read(paths, names, pasted, limits)
    if progress is not None:
        progress(UploadProgress("reading", bytes_total=upload.bytes_total))
    try:
        how = replace(
            options,
            source=f"upload: {upload.description}",
            extra_meta_fn=upload.meta,
            progress=upload.reporter(progress),
            **changes,
        )
        ds = build_datastore(upload.documents(), tokenizer, out_dir, how)
    except DatastoreError as exc:
        if "no documents" in str(exc):
            detail = ", ".join(f"{n} {why}" for why, n in sorted(upload.skipped.items()))
            raise DatastoreError("no usable text in the upload" + (f" (skipped: {detail})" if detail else "")) from None
        raise
    return BuildSummary(
        path=Path(ds.path) if ds.path else Path(out_dir),
        files=upload.corpus.stats.files if upload.corpus is not None else 0,
        documents=ds.n_documents,
        tokens=ds.n_tokens - ds.n_documents,  # without the separators
        seconds=time.perf_counter() - started,
        skipped=upload.skipped,
    )


@dataclass
class _Upload:
    """What one upload brings: pasted text (one document) and the files read under the limits."""

    pasted: str
    corpus: Any  # a corpora.Corpus over the files, or None

    @classmethod
    def read(
        cls, paths: Sequence[str | os.PathLike], names: Sequence[str] | None, pasted: str, limits: ReadLimits
    ) -> _Upload:
        pasted = pasted if isinstance(pasted, str) and pasted.strip() else ""
        if not paths and not pasted:
            raise CorpusError("nothing to build from: upload files or paste some text")
        pasted_bytes = len(pasted.encode("utf-8", errors="replace"))
        if limits.max_bytes is not None and pasted_bytes > limits.max_bytes:
            raise CorpusError(
                f"too much text: {pasted_bytes / 1e6:.1f} MB pasted, the limit is {limits.max_bytes / 1e6:.1f} MB"
            )
        room = replace(limits, max_bytes=None if limits.max_bytes is None else limits.max_bytes - pasted_bytes)
        return cls(pasted, read_files(paths, names=names, limits=room) if paths else None)

    @property
    def pasted_bytes(self) -> int:
        return len(self.pasted.encode("utf-8", errors="replace"))

    @property
    def bytes_total(self) -> int:
        return self.pasted_bytes + (self.corpus.info["bytes"] if self.corpus is not None else 0)

    @property
    def description(self) -> str:
        return " + ".join(
            ([PASTED_NAME] if self.pasted else []) + ([self.corpus.description] if self.corpus is not None else [])
        )

    @property
    def skipped(self) -> dict[str, int]:
        return dict(self.corpus.stats.skipped) if self.corpus is not None else {}

    def documents(self) -> Iterator[Document]:
        if self.pasted:
            yield Document(PASTED_NAME, self.pasted)
        if self.corpus is not None:
            yield from self.corpus.documents()

    def reporter(self, progress: Callable[[UploadProgress], None] | None) -> Callable[[BuildProgress], None]:
        """The build's progress callback, as UploadProgress with bytes read so far."""

        def report(p: BuildProgress) -> None:
            if progress is None:
                return
            read = self.pasted_bytes + (self.corpus.stats.bytes_read if self.corpus is not None else 0)
            progress(
                UploadProgress(
                    "reading" if p.phase == "tokenizing" else p.phase, p.documents, p.tokens, read, self.bytes_total
                )
            )

        return report

    def meta(self) -> dict[str, Any]:
        meta = self.corpus.meta() if self.corpus is not None else {"source_info": {}, "read_stats": {}}
        meta["source_spec"] = "upload"
        meta["skipped_records"] = self.corpus.stats.n_skipped if self.corpus is not None else 0
        meta["pasted_bytes"] = self.pasted_bytes
        return meta
