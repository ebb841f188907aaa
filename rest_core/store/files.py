"""What a user brings: files, folders and `.zip` archives, read under `ReadLimits` (an upload in
the app, and the command line's folder and zip sources).

A zip is read in memory, member by member, never extracted, and its member paths are only
names: unsafe paths, links and encrypted members are skipped and counted, and a zip bomb (too
many members, too many bytes, an extreme expansion ratio) is refused.
"""

from __future__ import annotations

import fnmatch
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rest_core.store.corpora import (
    BENCHMARK_NAME_PATTERNS,
    Corpus,
    CorpusError,
    Document,
    ReadStats,
    decode_text,
    list_source_files,
    read_regular_file,
    unread_reason,
)
from rest_core.store.json_records import json_stream_records, jsonl_values, record_documents


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on what `read_files` reads; a source past them is refused with one line.

    max_bytes: total bytes read (files plus zip members, uncompressed); None: no bound.
    max_files: files plus zip members looked at; None: no bound.
    max_ratio: a zip member over `ratio_min_bytes` that claims to expand more than this many
    times its compressed size is refused as a zip bomb (text compresses ~3-10x).
    """

    max_bytes: int | None = 20_000_000
    max_files: int | None = 2_000
    max_ratio: float = 100.0
    ratio_min_bytes: int = 1 << 20


UPLOAD_LIMITS = ReadLimits()  # a page upload: sized for a free CPU Space
# The command line reads the operator's own files, but a zip is still bounded (a bomb is a bomb).
CLI_LIMITS = ReadLimits(max_bytes=4 * 2**30, max_files=1_000_000)

ZIP_SUFFIXES = (".zip",)
_S_IFMT, _S_IFLNK = 0o170000, 0o120000


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


class _Allowance:
    """What one read has taken so far of its ReadLimits: counts the bytes and files read and
    raises CorpusError when one limit is passed."""

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.bytes = 0
        self.files = 0

    def remaining(self) -> int | None:
        return None if self.limits.max_bytes is None else self.limits.max_bytes - self.bytes

    def add_file(self) -> None:
        self.files += 1
        if self.limits.max_files is not None and self.files > self.limits.max_files:
            raise CorpusError(f"too many files: more than {self.limits.max_files:,} (files and zip members)")

    def add_bytes(self, n: int, what: str) -> None:
        self.bytes += n
        if self.limits.max_bytes is not None and self.bytes > self.limits.max_bytes:
            raise CorpusError(f"too much text: {what} takes the total past the {_mb(self.limits.max_bytes)} limit")


def _unsafe_member(name: str) -> bool:
    """A zip member path that would leave the folder if it were ever extracted: absolute
    (/x, \\x, C:x), with a '..' part, or with a NUL. We never extract, but we refuse to carry
    such a name around as if it were a path."""
    if not name or "\0" in name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return True
    return any(part == ".." for part in name.replace("\\", "/").split("/"))


def file_documents(
    name: str, data: bytes, stats: ReadStats, *, text_field: str = "text", assistant_only: bool = True
) -> Iterator[Document]:
    """The documents in one file's bytes, by its name: .jsonl/.ndjson JSON Lines and .json JSON
    records (ShareGPT conversations or {text_field: ...}); anything else is one text document if
    it is text (`decode_text`: UTF-8, or UTF-16/UTF-32 with a byte order mark). Binary files and
    files that do not decode are skipped and counted."""
    stats.files += 1
    stats.bytes_read += len(data)
    lower = name.lower()
    if lower.endswith(".gz"):
        stats.skip("compressed file (unpack it first)")
        return
    if lower.endswith((".jsonl", ".ndjson")):
        for line, record in jsonl_values(data.splitlines(), stats):
            yield from record_documents(
                record, stats, text_field=text_field, assistant_only=assistant_only, name=f"{name}:{line}"
            )
        return
    text = decode_text(data, stats)
    if text is None:
        return
    if lower.endswith(".json"):
        records = json_stream_records(io.StringIO(text), stats)
        for i, record in enumerate(records, 1):
            yield from record_documents(
                record, stats, text_field=text_field, assistant_only=assistant_only, name=f"{name}#{i}"
            )
        return
    stats.records += 1
    yield Document(name, text)


def _zip_documents(
    name: str, path: Path, stats: ReadStats, allowance: _Allowance, pattern: str | None, **record_args: Any
) -> Iterator[Document]:
    """The documents of a zip archive's members, read in memory (never extracted), each named by
    its path inside the archive. Unsafe paths, links and encrypted members are skipped and
    counted; a bomb (too many members, too many bytes, an extreme ratio) is refused."""
    import zipfile

    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CorpusError(f"{name}: not a readable zip archive ({exc})") from None
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            allowance.add_file()
            if not _member_wanted(info, pattern, stats):
                continue
            _refuse_bomb(name, info, allowance.limits)
            data = _read_member(zf, info, allowance, stats)
            if data is None:
                continue
            allowance.add_bytes(len(data), f"{name}: {info.filename}")
            yield from file_documents(info.filename, data, stats, **record_args)


def _member_wanted(info: Any, pattern: str | None, stats: ReadStats) -> bool:
    """Whether to read a zip member (a `zipfile.ZipInfo`): unsafe paths, links, hidden files and
    encrypted members are skipped and counted; one whose name misses `pattern` is passed over."""
    member = info.filename
    parts = member.replace("\\", "/").split("/")
    if _unsafe_member(member):
        stats.skip("unsafe path in zip")
        return False
    if (info.external_attr >> 16) & _S_IFMT == _S_IFLNK:
        stats.skip("link in zip")
        return False
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        stats.skip("hidden file")
        return False
    if pattern and not fnmatch.fnmatch(parts[-1], pattern):
        return False
    if info.flag_bits & 0x1:
        stats.skip("encrypted file")
        return False
    return True


def _refuse_bomb(name: str, info: Any, limits: ReadLimits) -> None:
    """Raise CorpusError for a member of zip `name` that claims an extreme expansion ratio."""
    if info.file_size > limits.ratio_min_bytes and info.file_size > limits.max_ratio * max(info.compress_size, 1):
        raise CorpusError(
            f"{name}: refused as a zip bomb: {info.filename} expands {info.file_size / max(info.compress_size, 1):.0f} "
            f"times (limit {limits.max_ratio:.0f})"
        )


def _read_member(zf: Any, info: Any, allowance: _Allowance, stats: ReadStats) -> bytes | None:
    """A zip member's bytes, at most one byte past the allowance; None (skipped and counted) when
    the member is damaged."""
    import zipfile

    remaining = allowance.remaining()
    try:
        with zf.open(info) as f:
            # Never trust the declared size: read at most one byte past the allowance.
            return f.read() if remaining is None else f.read(max(remaining, 0) + 1)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        RuntimeError,
        ValueError,
        NotImplementedError,
    ):
        stats.skip("damaged zip member")
        return None
    except Exception as exc:  # zlib.error and friends: a damaged member, not our bug
        if type(exc).__module__ in ("zlib", "bz2", "lzma", "_lzma", "_bz2"):
            stats.skip("damaged zip member")
            return None
        raise


def _declared_bytes(path: Path) -> int:
    """What a file will cost to read: its size, or for a zip the sum of its members' declared
    sizes (read from the central directory; the actual reads are bounded again)."""
    import zipfile

    if unread_reason(path) is not None:
        return 0  # skipped when read, never opened
    if path.name.lower().endswith(ZIP_SUFFIXES):
        try:
            with zipfile.ZipFile(path) as zf:
                return sum(i.file_size for i in zf.infolist())
        except (zipfile.BadZipFile, OSError):
            return path.stat().st_size
    return path.stat().st_size


def _items(paths: list[Path], names: list[str], pattern: str | None) -> list[tuple[str, Path]]:
    """(display name, file) for each file given and each file listed under a folder given (named
    relative to it); CorpusError for a link, a FIFO, socket or device, or a missing path."""
    items: list[tuple[str, Path]] = []
    for p, name in zip(paths, names):
        if p.is_symlink() and not p.is_dir():
            raise CorpusError(f"{name}: a link, not a file")
        if p.is_dir():
            files = list_source_files([p], pattern or "*", exclude_names=BENCHMARK_NAME_PATTERNS)
            items += [(f.relative_to(p).as_posix(), f) for f in files]
        elif p.is_file():
            items.append((name, p))
        elif p.exists():  # a FIFO, socket or device: never opened
            raise CorpusError(f"{name}: not a regular file or folder")
        else:
            raise CorpusError(f"not found: {name}")
    return items


def read_files(
    paths: Sequence[str | os.PathLike],
    *,
    names: Sequence[str] | None = None,
    limits: ReadLimits = UPLOAD_LIMITS,
    pattern: str | None = None,
    text_field: str = "text",
    assistant_only: bool = True,
) -> Corpus:
    """What a user brings: files (each read by `file_documents`), folders (every file under
    them, hidden ones and __pycache__ left out; `pattern` narrows it; FIFOs, sockets, devices
    and links to nothing skipped and counted, never opened) and .zip archives (their members,
    read in memory). `names` are the display names of `paths` (e.g. an upload's original file
    names; default: the file names). Raises CorpusError at once for nothing to read, a missing
    path, a FIFO, socket or device, or more than `limits` allow by the declared sizes; while
    reading, for a zip bomb or sizes that lied."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise CorpusError("nothing to read: no files given")
    names = list(names) if names is not None else [p.name for p in paths]
    if len(names) != len(paths):
        raise CorpusError(f"{len(names)} names for {len(paths)} files")
    items = _items(paths, names, pattern)
    if limits.max_files is not None and len(items) > limits.max_files:
        raise CorpusError(f"too many files: {len(items):,}, the limit is {limits.max_files:,}")
    declared = sum(_declared_bytes(p) for _, p in items)
    if limits.max_bytes is not None and declared > limits.max_bytes:
        raise CorpusError(f"too much text: {_mb(declared)} to read, the limit is {_mb(limits.max_bytes)}")
    record_args = {"text_field": text_field, "assistant_only": assistant_only}

    def read(stats: ReadStats) -> Iterator[Document]:
        allowance = _Allowance(limits)
        for name, p in items:
            reason = unread_reason(p)
            if reason is not None:  # a FIFO, socket or device in a folder: never opened
                stats.skip(reason)
                continue
            if name.lower().endswith(ZIP_SUFFIXES):
                yield from _zip_documents(name, p, stats, allowance, pattern, **record_args)
                continue
            allowance.add_file()
            data = read_regular_file(p, stats)
            if data is None:
                continue
            allowance.add_bytes(len(data), name)
            yield from file_documents(name, data, stats, **record_args)

    shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    corpus = Corpus(f"{shown} ({len(items)} file(s), {_mb(declared)})", read, total=None)
    corpus.info = {"kind": "files", "names": names, "n_files": len(items), "bytes": declared}
    corpus.paths = [p for _, p in items]
    return corpus
