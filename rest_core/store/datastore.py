"""An opened datastore: `Datastore.open` maps a datastore folder (layout: rest_core.store.format)
with `np.memmap`, checks meta.json, the files' sizes, the data (every token id and suffix-array
entry in range) and the document index (offsets increasing, inside the store, each document
start right after a separator), so that retrieval can never read outside the store. What the
data check costs: datastores/README.md.

Stores of format 1 (before the document index) still open; their document lookups return None
and `documents_note` says how to rebuild. `find_datastores` lists the stores under a folder.
Building is in rest_core.store.build; `Datastore.from_token_ids` builds a small store in memory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.store.format import (
    META_FILE,
    DatastoreError,
    DocumentIndex,
    DocumentSpan,
    Shard,
    check_documents_meta,
    check_meta,
    check_shard_data,
    read_meta,
)
from rest_core.store.shard_writer import ShardWriter, make_meta, resolve_shard_tokens
from rest_core.store.tokenizer_id import TokenizerId, check_tokenizer

# --- opening: what Datastore.open calls ---------------------------------------------------


def _map(file: Path, dtype: np.dtype, n: int, what: str) -> np.ndarray:
    if not file.is_file():
        raise DatastoreError(f"{what}: file {file} is missing")
    expected = n * dtype.itemsize
    actual = file.stat().st_size
    if actual != expected:
        state = "truncated" if actual < expected else "too long"
        raise DatastoreError(
            f"{what}: {file} is {state} ({actual:,} bytes, expected {expected:,} for {n:,} entries of {dtype})"
        )
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(file, dtype=dtype, mode="r", shape=(n,))


def _inside(folder: Path, name: str, what: str) -> Path:
    """folder/name, refused if a link takes it out of the folder."""
    file = folder / name
    if file.is_symlink() and file.resolve().parent != folder.resolve():
        raise DatastoreError(f"{what}: {file} links outside the store folder")
    return file


def _open_documents(path: Path, meta: dict[str, Any], shards: list[Shard], check_data: bool) -> DocumentIndex | None:
    """Map and check the document index. The names are never used as paths; the offsets must
    be increasing and inside the store, so a lookup can never read outside it."""
    docs = check_documents_meta(meta, f"{path}/{META_FILE}")
    if docs is None:
        return None
    n_docs, n_tokens = int(meta["n_documents"]), int(meta["n_tokens"])
    i8 = np.dtype("<i8")
    starts = _map(_inside(path, docs["starts"], "document starts"), i8, n_docs + 1, "document starts")
    offsets = _map(
        _inside(path, docs["name_offsets"], "document name offsets"), i8, n_docs + 1, "document name offsets"
    )
    names = _map(
        _inside(path, docs["names"], "document names"), np.dtype(np.uint8), docs["names_bytes"], "document names"
    )
    where = f"{path}: document index"
    # Small (8 bytes per document): read whole, checked with a few vectorised passes.
    s, o = np.asarray(starts), np.asarray(offsets)
    if s[0] != 0 or s[-1] != n_tokens or np.any(np.diff(s) <= 0):
        raise DatastoreError(
            f"{where}: document starts must increase from 0 to the store's {n_tokens:,} tokens; the store is damaged, rebuild it"
        )
    if o[0] != 0 or o[-1] != docs["names_bytes"] or np.any(np.diff(o) < 0):
        raise DatastoreError(
            f"{where}: name offsets must not decrease and must end at the names' {docs['names_bytes']:,} bytes; "
            f"the store is damaged, rebuild it"
        )
    if check_data and n_docs > 1:
        # Every document but the first starts right after a separator (the previous one's end).
        bounds = np.concatenate([[0], np.cumsum([sh.n_tokens for sh in shards])])
        before = s[1:-1] - 1
        shard_of = np.searchsorted(bounds, before, side="right") - 1
        for i, shard in enumerate(shards):
            local = before[shard_of == i] - bounds[i]
            if len(local) and np.any(np.asarray(shard.tokens[local]) != int(meta["separator"])):
                raise DatastoreError(
                    f"{where}: a document start is not at a document boundary; the store is damaged, rebuild it"
                )
    return DocumentIndex(starts=starts, name_offsets=offsets, names=names)


@dataclass
class Datastore:
    """An opened datastore: shards plus metadata. Use `Datastore.open` or `build_datastore`."""

    path: Path | None
    meta: dict[str, Any]
    shards: list[Shard] = field(default_factory=list)
    documents: DocumentIndex | None = None  # None: a store built before the index (format 1)

    @property
    def separator(self) -> int:
        return int(self.meta["separator"])

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def n_tokens(self) -> int:
        return int(self.meta["n_tokens"])

    @property
    def n_documents(self) -> int:
        return int(self.meta["n_documents"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    @property
    def tokenizer_name(self) -> str:
        return str(self.meta.get("tokenizer", {}).get("name", "?"))

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "in memory"
        return (
            f"Datastore({where}: {self.n_tokens:,} tokens, {self.n_documents:,} documents, "
            f"{len(self.shards)} shard(s), tokenizer {self.tokenizer_name})"
        )

    @classmethod
    def open(cls, path: str | os.PathLike, tokenizer: Any = None, *, check_data: bool = True) -> Datastore:
        """Map a datastore folder; check its files, sizes and format (and tokenizer, if given),
        and (check_data) that every token id and suffix-array entry is in range, so that
        retrieval can never read outside the store. Raises DatastoreError naming the problem.
        """
        path = Path(path)
        meta = read_meta(path)
        dtype, separator, n_tokens, shards_meta = check_meta(meta, f"{path}/{META_FILE}")
        if tokenizer is not None:
            check_tokenizer(meta, tokenizer, where=str(path))

        shards: list[Shard] = []
        total = 0
        for i, (n, n_docs, tok_name, sa_name, sa_dtype) in enumerate(shards_meta):
            tokens = _map(_inside(path, tok_name, f"shard {i} tokens"), dtype, n, f"shard {i} tokens")
            sa = _map(_inside(path, sa_name, f"shard {i} suffix array"), sa_dtype, n, f"shard {i} suffix array")
            if check_data:
                check_shard_data(tokens, sa, separator, where=f"{path}: shard {i}")
            shards.append(Shard(tokens=tokens, sa=sa, n_documents=n_docs))
            total += n
        if total != n_tokens:
            raise DatastoreError(f"{path}: shards hold {total:,} tokens but meta.json says {n_tokens:,}")
        documents = _open_documents(path, meta, shards, check_data)
        return cls(path=path, meta=meta, shards=shards, documents=documents)

    @classmethod
    def from_token_ids(
        cls,
        documents: Iterable[Sequence[int]],
        vocab_size: int,
        *,
        shard_tokens: int | None = None,
        source: str = "token ids",
        names: Sequence[str] | None = None,
    ) -> Datastore:
        """An in-memory datastore over already tokenized documents (for tests and small corpora);
        document i is called names[i] (default "document i")."""
        writer = ShardWriter(None, vocab_size, resolve_shard_tokens(shard_tokens))
        for i, doc in enumerate(documents):
            writer.add(np.asarray(doc, dtype=np.int64), names[i] if names is not None else None)
        shards_meta, shards = writer.finish()
        meta = make_meta(TokenizerId("(token ids)", "", vocab_size), writer, shards_meta, source, {}, time.time())
        return cls(path=None, meta=meta, shards=shards, documents=writer.document_index())

    @property
    def documents_note(self) -> str | None:
        """Why document lookups return None for this store (and how to fix it); None if they work."""
        if self.documents is not None:
            return None
        where = str(self.path) if self.path else "DIR"
        src = self.meta.get("source_spec")
        src = src if isinstance(src, str) and src else "SRC"
        return (
            f"{where} has no document index (built before format 2): rebuild it with "
            f"`python -m rest_core datastore build --source {src} --out {where} --force` to see which document a match comes from"
        )

    def shard_offsets(self) -> np.ndarray:
        """(n_shards + 1,) int64: where each shard starts in the token stream, then n_tokens."""
        return np.concatenate([[0], np.cumsum([s.n_tokens for s in self.shards], dtype=np.int64)]).astype(np.int64)

    def stream_position(self, shard: int, position: int) -> int:
        """A shard-local position (as retrieval reports it) -> its position in the token stream."""
        return int(self.shard_offsets()[shard]) + int(position)

    def document_at(self, position: int) -> DocumentSpan | None:
        """The document holding token `position` of the token stream: (name, start, end), with
        the document's tokens at [start, end). None for a store without a document index (see
        `documents_note`). IndexError for a position outside the store."""
        position = int(position)
        if not 0 <= position < self.n_tokens:
            raise IndexError(f"position {position} is outside the store's {self.n_tokens:,} tokens")
        if self.documents is None:
            return None
        return self.documents.span(self.documents.find(position))

    def context_around(self, position: int, before: int, after: int) -> np.ndarray:
        """Token ids around `position` of the token stream: up to `before` tokens before it and
        `after` tokens from it on, never past its document's start or end (so no separator
        unless a document was split across shards). Without a document index, the window stops
        at separators instead. Returns (k,) int64; the token at `position` is at index
        `position - max(start, position - before)`."""
        position, before, after = int(position), max(0, int(before)), max(0, int(after))
        span = self.document_at(position)
        if span is not None:
            lo, hi = max(span.start, position - before), min(span.end, position + after)
            return self._read(lo, max(lo, hi))
        window = self._read(max(0, position - before), min(self.n_tokens, position + after))
        at = position - max(0, position - before)
        seps = np.flatnonzero(window == self.separator)
        lo = int(seps[seps < at].max()) + 1 if np.any(seps < at) else 0
        hi = int(seps[seps >= at].min()) if np.any(seps >= at) else len(window)
        return window[lo:hi]

    def _read(self, lo: int, hi: int) -> np.ndarray:
        """Tokens [lo, hi) of the token stream, across shard boundaries."""
        offsets = self.shard_offsets()
        parts = []
        for i, shard in enumerate(self.shards):
            a, b = max(lo, int(offsets[i])), min(hi, int(offsets[i + 1]))
            if a < b:
                parts.append(np.asarray(shard.tokens[a - offsets[i] : b - offsets[i]], dtype=np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def disk_bytes(self) -> int:
        """Total size of the datastore's files on disk (0 for an in-memory store)."""
        if self.path is None:
            return 0
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())

    def verify(self, sample: int = 2000, seed: int = 0) -> None:
        """Deeper checks than `open` (reads data): separator placement, id range, and the
        sortedness of a random sample of adjacent suffix-array entries. Raises DatastoreError."""
        rng = np.random.default_rng(seed)
        sep = self.separator
        for i, shard in enumerate(self.shards):
            n = shard.n_tokens
            if n == 0:
                continue
            if int(shard.tokens[-1]) != sep:
                raise DatastoreError(f"shard {i}: does not end with the separator {sep}")
            if int(shard.tokens.max()) > sep:
                raise DatastoreError(f"shard {i}: token ids above the separator {sep}")
            n_sep = int(np.count_nonzero(shard.tokens == sep))
            if shard.n_documents and n_sep < shard.n_documents:
                raise DatastoreError(f"shard {i}: {n_sep} separators for {shard.n_documents} documents")
            if int(shard.sa.min()) < 0 or int(shard.sa.max()) >= n:
                raise DatastoreError(f"shard {i}: suffix array entries out of range")
            if n > 1:
                if n - 1 <= sample:
                    entries = np.arange(n - 1)
                else:
                    entries = np.sort(rng.choice(n - 1, size=sample, replace=False))
                for j in entries:
                    a, b = int(shard.sa[j]), int(shard.sa[j + 1])
                    if not _suffix_less(shard.tokens, a, b):
                        raise DatastoreError(f"shard {i}: suffix array not sorted at entry {j}")


def _suffix_less(tokens: np.ndarray, a: int, b: int, chunk: int = 64) -> bool:
    """tokens[a:] < tokens[b:] lexicographically (a != b)."""
    n = tokens.shape[0]
    while True:
        x = np.asarray(tokens[a : a + chunk])
        y = np.asarray(tokens[b : b + chunk])
        k = min(len(x), len(y))
        diff = np.nonzero(x[:k] != y[:k])[0]
        if len(diff):
            return bool(x[diff[0]] < y[diff[0]])
        if len(x) < chunk or len(y) < chunk:
            return len(x) < len(y)  # the shorter suffix is a prefix of the longer one
        a, b = a + chunk, b + chunk
        if a >= n or b >= n:
            return a >= n


def find_datastores(root: str | os.PathLike = "datastores") -> dict[str, dict[str, Any]]:
    """Name -> meta of every folder under `root` that opens as a datastore (for pickers in a UI).
    Folders that do not open (temp folders, damaged stores) are left out."""
    found: dict[str, dict[str, Any]] = {}
    root = Path(root)
    if not root.is_dir():
        return found
    for p in sorted(root.iterdir()):
        if p.is_dir() and not p.name.startswith("."):
            try:
                found[p.name] = Datastore.open(p, check_data=False).meta
            except DatastoreError:
                continue
    return found
