"""Building a datastore: tokenize documents (or take token ids), write the shards, suffix arrays
and document index through `ShardWriter`, and put the store in place atomically.

Builds write into a temporary folder next to the target and rename it into place once
complete, so an interrupted build leaves nothing that `Datastore.open` accepts; `check_target`
makes sure `force` only ever replaces an existing datastore or an empty folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.store.datastore import Datastore
from rest_core.store.format import DOC_FILES, META_FILE, DatastoreError, check_documents_meta, check_meta, read_meta
from rest_core.store.shard_writer import ShardWriter, make_meta, resolve_shard_tokens
from rest_core.store.tokenizer_id import TokenizerId, encode_batch


class BuildCancelled(DatastoreError):
    """A build stopped because its `cancel` event was set; nothing was written."""


@dataclass(frozen=True)
class BuildProgress:
    """Where a build is, for a progress bar: phase "tokenizing" (documents and tokens so far),
    then "suffix array" (shard `shard` of `n_shards` is being sorted), then "done"."""

    phase: str
    documents: int = 0
    tokens: int = 0
    shard: int = 0
    n_shards: int = 0


def _batched(
    documents: Iterable[str | tuple[str, str]], max_docs: int, max_chars: int
) -> Iterator[list[tuple[str | None, str]]]:
    """(name, text) batches; a plain string document has no name (the writer numbers it)."""
    batch: list[tuple[str | None, str]] = []
    chars = 0
    for doc in documents:
        name, text = (None, doc) if isinstance(doc, str) else doc
        batch.append((name, text))
        chars += len(text)
        if len(batch) >= max_docs or chars >= max_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


@dataclass(frozen=True)
class BuildOptions:
    """How a datastore is built, as opposed to what from: one object that goes from the caller
    (the datastore command, an upload, a test) down to meta.json, as transformers passes one
    GenerationConfig. Checked once, here."""

    source: str = ""  # what the store was built from, for meta.json
    shard_tokens: int | None = None  # tokens per shard; None: the default (resolve_shard_tokens)
    force: bool = False  # out_dir may be an existing datastore or an empty folder (check_target)
    tokenizer_name: str | None = None  # the tokenizer's name in meta.json; None: its own
    extra_meta: Mapping[str, Any] | None = None  # more meta.json fields
    extra_meta_fn: Callable[[], dict[str, Any]] | None = None  # ... known once the documents are read
    batch_docs: int = 512  # documents per tokenizer call,
    batch_chars: int = 4_000_000  # or fewer, up to this many characters
    total_documents: int | None = None  # the progress bar's total
    verbose: bool = True  # a progress bar and a line per shard on stderr
    progress: Callable[[BuildProgress], None] | None = None  # after every batch, before every suffix array
    cancel: Any = None  # anything with is_set(): stops the build between batches or shards

    def __post_init__(self) -> None:
        if self.progress is not None and not callable(self.progress):
            raise TypeError("BuildOptions.progress is a callback (BuildProgress -> None); verbose=False hides the bar")
        if self.batch_docs < 1 or self.batch_chars < 1:
            raise ValueError("BuildOptions: batch_docs and batch_chars must be at least 1")


def build_datastore(
    documents: Iterable[str | tuple[str, str]],
    tokenizer: Any,
    out_dir: str | os.PathLike,
    options: BuildOptions | None = None,
    **changes: Any,
) -> Datastore:
    """Tokenize `documents` (no special tokens), write the shards and suffix arrays into
    `out_dir` atomically, and return the opened store. `options` (default BuildOptions()) with
    `changes` (BuildOptions fields by name) says how.

    documents: texts, or (name, text) pairs; the names go into the document index.
    out_dir must not exist unless `force` is set; it is replaced only once the new store is
    complete. `extra_meta_fn` is called after the documents are consumed (for reader statistics
    such as skipped records) and its result is merged into meta.json. `progress` gets a
    BuildProgress after every batch of documents and before every shard's suffix array;
    `cancel` (a threading.Event, or anything with is_set()) stops the build between documents
    or shards with BuildCancelled, leaving nothing behind.
    """
    options = replace(options or BuildOptions(), **changes)
    out = check_target(out_dir, options.force)
    ident = TokenizerId.of(tokenizer, options.tokenizer_name)
    return _write_store(_tokenized(documents, tokenizer, options), out, ident, options, tokenizer)


def _tokenized(
    documents: Iterable[str | tuple[str, str]], tokenizer: Any, options: BuildOptions
) -> Iterator[tuple[str | None, np.ndarray]]:
    """(name, token ids) of every document, tokenized in batches; checks `cancel` before each
    batch and reports progress (bar, `progress`) after it."""
    bar = _tokenizing_bar(options.total_documents) if options.verbose else None
    n_tokens = n_docs = 0
    try:
        for batch in _batched(documents, options.batch_docs, options.batch_chars):
            _check_cancel(options.cancel)  # between batches of documents (uploads use small batches)
            for (name, _), ids in zip(batch, encode_batch(tokenizer, [text for _, text in batch])):
                arr = np.asarray(ids, dtype=np.int64)
                n_tokens += len(arr)
                yield name, arr
            n_docs += len(batch)
            if bar is not None:
                bar.update(len(batch))
                bar.set_postfix_str(f"{n_tokens / 1e6:.1f}M tokens", refresh=False)
            if options.progress is not None:
                options.progress(BuildProgress("tokenizing", documents=n_docs, tokens=n_tokens))
    finally:
        if bar is not None:
            _close_bar(bar)


def _tokenizing_bar(total_documents: int | None) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total_documents, unit="doc", desc="tokenizing", dynamic_ncols=True)


def _close_bar(bar: Any) -> None:
    if bar.total is not None and bar.n < bar.total:
        bar.total = bar.n  # some items held no document (empty files, skipped records)
        bar.refresh()
    bar.close()


def _check_cancel(cancel: Any) -> None:
    if cancel is not None and cancel.is_set():
        raise BuildCancelled("build cancelled")


def build_from_token_ids(
    documents: Iterable[Sequence[int]],
    vocab_size: int,
    out_dir: str | os.PathLike,
    options: BuildOptions | None = None,
    *,
    fingerprint: str = "",
    **changes: Any,
) -> Datastore:
    """Write a datastore from already tokenized documents (no tokenizer involved): `options`
    (default: source "token ids", quiet) with `changes`, as build_datastore takes them."""
    options = replace(options or BuildOptions(source="token ids", verbose=False), **changes)
    out = check_target(out_dir, options.force)
    ident = TokenizerId(options.tokenizer_name or "(token ids)", fingerprint, vocab_size)
    return _write_store(((None, np.asarray(d, dtype=np.int64)) for d in documents), out, ident, options)


def _write_store(
    token_docs: Iterable[tuple[str | None, np.ndarray]],
    out: Path,
    ident: TokenizerId,
    options: BuildOptions,
    tokenizer: Any = None,
) -> Datastore:
    started = time.time()
    tmp = _new_temp_folder(out)
    try:
        writer, shards_meta = _write_shards(token_docs, tmp, ident.vocab_size, options)
        documents_meta = writer.write_document_index()
        _check_cancel(options.cancel)
        extra = dict(options.extra_meta or {})
        if options.extra_meta_fn is not None:
            extra.update(options.extra_meta_fn())
        meta = make_meta(ident, writer, shards_meta, options.source, extra, started)
        meta["documents"] = documents_meta
        _move_into_place(tmp, out, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ds = Datastore.open(out, tokenizer)
    if options.progress is not None:
        options.progress(BuildProgress("done", ds.n_documents, ds.n_tokens, len(ds.shards), len(ds.shards)))
    return ds


def _write_shards(
    token_docs: Iterable[tuple[str | None, np.ndarray]], tmp: Path, vocab_size: int, options: BuildOptions
) -> tuple[ShardWriter, list[dict[str, Any]]]:
    """Every document into shard files in `tmp`, then each shard's suffix array (checking
    `cancel` and reporting progress before each); returns the writer and the shards' meta."""
    writer = ShardWriter(tmp, vocab_size, resolve_shard_tokens(options.shard_tokens))
    for name, ids in token_docs:
        writer.add(ids, name)
    if writer.n_documents == 0:
        raise DatastoreError("no documents to build a datastore from")
    if options.verbose:
        print(f"building suffix arrays for {writer.n_shards} shard(s)", file=sys.stderr, flush=True)

    def on_shard(i: int) -> None:
        _check_cancel(options.cancel)
        if options.progress is not None:
            options.progress(BuildProgress("suffix array", writer.n_documents, writer.n_tokens, i, writer.n_shards))

    shards_meta, _ = writer.finish(verbose=options.verbose, on_shard=on_shard)
    return writer, shards_meta


def check_target(out_dir: str | os.PathLike, force: bool) -> Path:
    """The folder a build may write to: one that does not exist yet or, with `force`, an
    existing datastore or an empty folder. Anything else (a plain file, a folder holding other
    files) is refused, so --force can never delete what a typo points it at. Returns the path
    ('.' and '..' made absolute so that the temp folder gets a name beside it)."""
    out = Path(out_dir)
    if out.name in ("", ".", ".."):
        out = Path(os.path.abspath(out))
    if not out.name:
        raise DatastoreError(f"cannot build a datastore at {out_dir}: name a folder to create")
    if not (out.exists() or out.is_symlink()):
        return out
    if not force:
        raise DatastoreError(f"{out} exists (use --force / force=True to replace it)")
    refuse = f"refusing to replace {out} with --force: "
    if not out.is_dir():
        raise DatastoreError(refuse + "it is not a folder (only an existing datastore or an empty folder is replaced)")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return out
    try:
        _, _, _, shards = check_meta(read_meta(out), f"{out}/{META_FILE}")
    except DatastoreError as exc:
        raise DatastoreError(refuse + f"it is not an empty folder nor a datastore ({exc})") from None
    own = {META_FILE} | {name for _, _, t, a, _ in shards for name in (t, a)}
    try:
        docs = check_documents_meta(read_meta(out), f"{out}/{META_FILE}")
    except DatastoreError as exc:
        raise DatastoreError(refuse + f"it is not an empty folder nor a datastore ({exc})") from None
    if docs is not None:
        own |= {docs[k] for k in DOC_FILES}
    foreign = [e for e in entries if e not in own]
    if foreign:
        raise DatastoreError(
            refuse
            + f"it holds {foreign[0]!r}"
            + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + ", which is not part of the datastore; move it away first"
        )
    return out


# --- the temporary folder and the rename into place -----------------------------------------


def _new_temp_folder(out: Path) -> Path:
    """An empty folder next to `out` for a build to write into (named after this process, so
    that a later build can tell a dead build's folder from a running one's)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_folders(out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def _move_into_place(tmp: Path, out: Path, meta: dict[str, Any]) -> None:
    """Finish the build in `tmp` with its meta.json and rename it to `out`."""
    # meta.json last: a folder without it is never a datastore.
    _write_json_synced(tmp / META_FILE, meta)
    _fsync_dir(tmp)
    if out.exists() or out.is_symlink():
        check_target(out, force=True)  # again: the folder may have changed during the build
    _replace_dir(tmp, out)


def _write_json_synced(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _replace_dir(tmp: Path, out: Path) -> None:
    """Move the finished build into place; an existing target is removed only after that."""
    old = None
    if out.exists() or out.is_symlink():
        old = out.parent / f".{out.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        if old is not None:
            os.rename(old, out)
        raise
    _fsync_dir(out.parent)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


def _remove_stale_temp_folders(out: Path) -> None:
    """Temp folders of builds whose process is gone (killed mid-build)."""
    for p in out.parent.glob(f".{out.name}.tmp-*"):
        try:
            pid = int(p.name.split(".tmp-")[1].split("-")[0])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid() or not _pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
