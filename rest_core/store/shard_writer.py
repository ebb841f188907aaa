"""Writing a datastore's shards: token files (or arrays in memory), one suffix array per shard,
the document index, and the contents of meta.json (see rest_core.store.format for the layout).
`build_datastore` (rest_core.store.build) and `Datastore.from_token_ids` both write through
`ShardWriter`."""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.store.format import (
    DOC_FILES,
    FORMAT_VERSION,
    INT32_MAX,
    DatastoreError,
    DocumentIndex,
    Shard,
    clean_name,
    token_dtype,
)
from rest_core.store.tokenizer_id import TokenizerId

SA_INT32_LIMIT = INT32_MAX  # longest shard whose suffix array is stored as int32 (tests lower it)


def default_shard_tokens() -> int:
    """Largest shard we build by default: bounded by int32 suffix-array positions and by memory.

    pydivsufsort sorts the tokens as big-endian bytes (2 or 4 per token) and keeps an int32 or
    int64 entry per byte, so building one shard of n tokens needs roughly 20-40 bytes per token
    at its peak. We allow a quarter of physical memory.
    """
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = 8 * 2**30
    by_memory = max(1 << 20, mem // 4 // 40)
    return int(min(INT32_MAX // 4, by_memory))


def resolve_shard_tokens(shard_tokens: int | None) -> int:
    if shard_tokens is None:
        return default_shard_tokens()
    if shard_tokens < 2:
        raise DatastoreError(f"shard_tokens must be >= 2 (a token and a separator), got {shard_tokens}")
    return int(shard_tokens)


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Suffix array of a token array: int32 when positions fit, else int64.

    pydivsufsort handles integer arrays by sorting them as fixed-width big-endian bytes, which
    gives the same order as comparing token ids (checked against `sorted` in the tests).
    """
    from pydivsufsort import divsufsort

    n = int(tokens.shape[0])
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    sa = divsufsort(np.ascontiguousarray(tokens))
    out_dtype = np.int32 if n <= SA_INT32_LIMIT else np.int64
    return np.ascontiguousarray(sa, dtype=out_dtype)


class ShardWriter:
    """Appends documents (token ids + separator) to shard files, or to memory if folder is None."""

    def __init__(self, folder: Path | None, vocab_size: int, shard_tokens: int) -> None:
        self.folder = folder
        self.separator = int(vocab_size)
        self.dtype = token_dtype(self.separator)
        self.shard_tokens = shard_tokens
        self.n_documents = 0
        self.n_split_documents = 0
        self.n_tokens = 0
        self._sizes: list[int] = []  # tokens per shard
        self._docs: list[int] = []  # documents started per shard
        self._file = None
        self._memory: list[list[np.ndarray]] = []
        # Document index: start of each document in the token stream, its name's end in the blob.
        self._doc_starts = array("q", [0])
        self._name_ends = array("q", [0])
        self._names = bytearray()

    @property
    def n_shards(self) -> int:
        return len(self._sizes)

    def _new_shard(self) -> None:
        self._close_file()
        self._sizes.append(0)
        self._docs.append(0)
        if self.folder is not None:
            self._file = open(self.folder / _tokens_name(len(self._sizes) - 1), "wb")
        else:
            self._memory.append([])

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def _write(self, piece: np.ndarray) -> None:
        if self._file is not None:
            self._file.write(piece.tobytes())
        else:
            self._memory[-1].append(piece)
        self._sizes[-1] += len(piece)
        self.n_tokens += len(piece)

    def add(self, ids: np.ndarray, name: str | None = None) -> None:
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.separator):
            raise DatastoreError(f"token id out of range [0, {self.separator}) in document {self.n_documents}")
        self._names += clean_name(name if name is not None else f"document {self.n_documents}")
        self._name_ends.append(len(self._names))
        ids = ids.astype(self.dtype)
        sep = np.array([self.separator], dtype=self.dtype)
        max_piece = self.shard_tokens - 1
        if len(ids) > max_piece:
            self.n_split_documents += 1
        first = True
        start = 0
        while first or start < len(ids):
            piece = ids[start : start + max_piece]
            need = len(piece) + 1
            if not self._sizes or self._sizes[-1] + need > self.shard_tokens:
                self._new_shard()
            self._write(np.concatenate([piece, sep]))
            if first:
                self._docs[-1] += 1
            start += max_piece
            first = False
        self.n_documents += 1
        # A split document's pieces follow each other in the stream (a new shard starts only
        # when a piece does not fit), so the document still spans [its start, the next start).
        self._doc_starts.append(self.n_tokens)

    def document_index(self) -> DocumentIndex:
        return DocumentIndex(
            starts=np.frombuffer(self._doc_starts, dtype=np.int64).copy(),
            name_offsets=np.frombuffer(self._name_ends, dtype=np.int64).copy(),
            names=np.frombuffer(bytes(self._names), dtype=np.uint8),
        )

    def write_document_index(self) -> dict[str, Any]:
        """Write the doc-*.bin files; returns their meta.json entry."""
        assert self.folder is not None
        index = self.document_index()
        for key, arr in (("starts", index.starts), ("name_offsets", index.name_offsets), ("names", index.names)):
            with open(self.folder / DOC_FILES[key], "wb") as f:
                f.write(arr.astype("<i8" if key != "names" else np.uint8, copy=False).tobytes())
                f.flush()
                os.fsync(f.fileno())
        return {**DOC_FILES, "names_bytes": len(self._names)}

    def finish(
        self, verbose: bool = False, on_shard: Callable[[int], None] | None = None
    ) -> tuple[list[dict[str, Any]], list[Shard]]:
        """Close the token files, build every shard's suffix array; return (shards meta, shards).
        `on_shard(i)` is called before shard i is sorted (progress, cancellation); `verbose`: a
        line per shard on stderr."""
        self._close_file()
        shards_meta: list[dict[str, Any]] = []
        shards: list[Shard] = []
        for i, (size, docs) in enumerate(zip(self._sizes, self._docs)):
            if on_shard is not None:
                on_shard(i)
            if self.folder is not None:
                tokens = np.fromfile(self.folder / _tokens_name(i), dtype=self.dtype)
            else:
                tokens = np.concatenate(self._memory[i]) if self._memory[i] else np.zeros(0, self.dtype)
            assert len(tokens) == size
            t0 = time.perf_counter()
            sa = suffix_array(tokens)
            sa_seconds = time.perf_counter() - t0
            if verbose:
                print(
                    f"  shard {i}: suffix array over {size:,} tokens in {sa_seconds:.1f} s", file=sys.stderr, flush=True
                )
            entry = {
                "n_tokens": size,
                "n_documents": docs,
                "tokens": _tokens_name(i),
                "sa": _sa_name(i),
                "sa_dtype": np.dtype(sa.dtype).newbyteorder("<").str,
                "sa_seconds": round(sa_seconds, 3),
            }
            if self.folder is not None:
                with open(self.folder / entry["sa"], "wb") as f:
                    f.write(sa.astype(entry["sa_dtype"], copy=False).tobytes())
                    f.flush()
                    os.fsync(f.fileno())
                del tokens, sa
            else:
                shards.append(Shard(tokens=tokens, sa=sa, n_documents=docs))
            shards_meta.append(entry)
        self._memory = []
        return shards_meta, shards


def _tokens_name(i: int) -> str:
    return f"tokens-{i:05d}.bin"


def _sa_name(i: int) -> str:
    return f"sa-{i:05d}.bin"


def make_meta(
    tokenizer: TokenizerId,
    writer: ShardWriter,
    shards_meta: list[dict[str, Any]],
    source: str,
    extra: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """meta.json's contents for the shards `writer` wrote (started at time.time() `started`)."""
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "tokenizer": {"name": tokenizer.name, "fingerprint": tokenizer.fingerprint},
        "vocab_size": int(tokenizer.vocab_size),
        "separator": writer.separator,
        "dtype": writer.dtype.str,
        "n_documents": writer.n_documents,
        "n_split_documents": writer.n_split_documents,
        "n_tokens": writer.n_tokens,
        "shard_tokens": writer.shard_tokens,
        "shards": shards_meta,
        "source": source,
        "built_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "build_seconds": round(time.time() - started, 3),
    }
    meta.update(extra)
    return meta
