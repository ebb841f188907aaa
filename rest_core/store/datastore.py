"""Build, save and open a datastore: a token corpus plus its suffix array (paper section 3.1).

On disk a datastore is one folder:

    meta.json          format version, tokenizer name + fingerprint, sizes, source, build info
    tokens-00000.bin   shard 0: token ids, little-endian uint16 (uint32 past 65,535 ids)
    sa-00000.bin       shard 0: suffix array over tokens-00000.bin, little-endian int32 (int64
                       past 2^31 positions)
    tokens-00001.bin   further shards, if the corpus was too big for one suffix array
    ...
    doc-starts.bin     document index (format 2): n_documents + 1 little-endian int64, where
                       document i starts in the token stream (all shards one after the other);
                       the last entry is n_tokens
    doc-name-offsets.bin  n_documents + 1 little-endian int64: document i's name is
                       doc-names.bin[offsets[i]:offsets[i + 1]]
    doc-names.bin      the names, UTF-8, one after the other (a file path relative to the
                       corpus root, a conversation id, an uploaded file's name); names are for
                       display only and never used as file paths

Every document is followed by the separator id (== the tokenizer's vocabulary size, an id the
tokenizer never produces), so a continuation read after a match stops at the document's end.
A shard holds whole documents (a document longer than a shard is split), and each shard has its
own suffix array; retrieval searches every shard and merges the results.

Opening maps the files with `np.memmap` and reads them once, in chunks, to check that every
token id is at most the separator and every suffix-array entry points inside its shard: the
compiled retrieval loops index with these values, so a damaged file must be refused here, not
found by a crash later. The check is memory-bandwidth bound: 30 ms for the 21.9M-token chat
store with the files in the page cache (about 1.4 ms per million tokens, so ~0.1 s for a
79M-token store); 0.36 s when the files first come off this machine's disk (so about 1.3 s
for the 79M-token store), a cost paid once per process that opens the store. The document
index is checked too (offsets increasing, inside the store, each document start right after a
separator). Stores of format 1 (before the document index) still open; their document lookups
return None and `documents_note` says how to rebuild. Builds write into a temporary folder next to the target and rename
it into place once complete, so an interrupted build leaves nothing that `Datastore.open` accepts.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

FORMAT_VERSION = 2  # 2: adds the document index (doc-*.bin); 1 is still read
READABLE_VERSIONS = (1, 2)
DOC_FILES = {"starts": "doc-starts.bin", "name_offsets": "doc-name-offsets.bin", "names": "doc-names.bin"}
MAX_NAME_BYTES = 512  # longer document names are cut (they are labels, not keys)
META_FILE = "meta.json"
INT32_MAX = 2**31 - 1
SA_INT32_LIMIT = INT32_MAX  # longest shard whose suffix array is stored as int32 (tests lower it)


class DatastoreError(ValueError):
    """A datastore folder is missing, damaged, or does not belong to the given tokenizer."""


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


class DocumentSpan(NamedTuple):
    """A document of the store: its name and its tokens' range [start, end) in the token stream
    (all shards one after the other); `end` is the position of the separator that closes it."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class DocumentIndex:
    """Where each document starts and what it is called (mapped arrays, see the module doc).

    starts: (n + 1,) int64, increasing, starts[0] = 0, starts[n] = the store's token count.
    name_offsets: (n + 1,) int64, non-decreasing into `names`.
    names: (bytes,) uint8, the UTF-8 names one after the other.
    """

    starts: np.ndarray
    name_offsets: np.ndarray
    names: np.ndarray

    def __len__(self) -> int:
        return int(self.starts.shape[0]) - 1

    def name(self, i: int) -> str:
        a, b = int(self.name_offsets[i]), int(self.name_offsets[i + 1])
        return bytes(self.names[a:b]).decode("utf-8", errors="replace")

    def find(self, position: int) -> int:
        """Index of the document holding token `position` (binary search over the starts)."""
        return int(np.searchsorted(self.starts, position, side="right")) - 1

    def span(self, i: int) -> DocumentSpan:
        return DocumentSpan(self.name(i), int(self.starts[i]), int(self.starts[i + 1]) - 1)

    def sizes(self) -> np.ndarray:
        """(n,) tokens per document (without its closing separator)."""
        return np.diff(np.asarray(self.starts)) - 1


@dataclass(frozen=True)
class Shard:
    """One slice of the corpus with its own suffix array.

    tokens: (n,) uint16/uint32 token ids, every document followed by the separator.
    sa: (n,) int32/int64, the start positions of all suffixes of `tokens` in sorted order.
    """

    tokens: np.ndarray
    sa: np.ndarray
    n_documents: int = 0

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])

    def __len__(self) -> int:
        return self.n_tokens


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
    def open(cls, path: str | os.PathLike, tokenizer: Any = None, *, check_data: bool = True) -> "Datastore":
        """Map a datastore folder; check its files, sizes and format (and tokenizer, if given),
        and (check_data) that every token id and suffix-array entry is in range, so that
        retrieval can never read outside the store. Raises DatastoreError naming the problem.
        """
        return _open(Path(path), tokenizer, check_data)

    @classmethod
    def from_token_ids(
        cls,
        documents: Iterable[Sequence[int]],
        vocab_size: int,
        *,
        shard_tokens: int | None = None,
        source: str = "token ids",
        names: Sequence[str] | None = None,
    ) -> "Datastore":
        """An in-memory datastore over already tokenized documents (for tests and small corpora);
        document i is called names[i] (default "document i")."""
        writer = _ShardWriter(None, vocab_size, _resolve_shard_tokens(shard_tokens))
        for i, doc in enumerate(documents):
            writer.add(np.asarray(doc, dtype=np.int64), names[i] if names is not None else None)
        shards_meta, shards = writer.finish()
        meta = _make_meta(
            vocab_size=vocab_size,
            tokenizer_name="(token ids)",
            fingerprint="",
            writer=writer,
            shards_meta=shards_meta,
            source=source,
            extra={},
            started=time.time(),
        )
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


# --- tokenizer identity -------------------------------------------------------------------


def tokenizer_vocab_size(tokenizer: Any) -> int:
    """Number of ids the tokenizer can produce (added tokens included): `len(tokenizer)`, or one
    past the largest id in its vocabulary if a tokenizer has holes in its id range."""
    size = int(len(tokenizer))
    vocab = tokenizer.get_vocab()
    if vocab:
        size = max(size, max(vocab.values()) + 1)
    return size


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 over the tokenizer's sorted (token, id) vocabulary: two tokenizers with the same
    fingerprint map text to the same ids, so a datastore built with one is valid for the other."""
    vocab = tokenizer.get_vocab()
    h = hashlib.sha256()
    for token, idx in sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])):
        h.update(f"{idx}\t{token}\n".encode("utf-8", "surrogatepass"))
    return "sha256:" + h.hexdigest()


def tokenizer_display_name(tokenizer: Any) -> str:
    name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    return str(name)


def encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens (BOS/EOS): the fast tokenizers' batch call."""
    out = tokenizer(texts, add_special_tokens=False, return_attention_mask=False)
    return out["input_ids"]


# --- building -----------------------------------------------------------------------------


def token_dtype(separator: int) -> np.dtype:
    """uint16 when every id including the separator fits, else uint32."""
    return np.dtype("<u2") if separator <= np.iinfo(np.uint16).max else np.dtype("<u4")


def default_shard_tokens() -> int:
    """Largest shard we build by default: bounded by int32 suffix-array positions and by memory.

    pydivsufsort sorts the tokens as big-endian bytes (2 or 4 per token) and keeps an int32 or
    int64 entry per byte, so building one shard of n tokens needs roughly 20-40 bytes per token
    at its peak. We budget a quarter of physical memory.
    """
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = 8 * 2**30
    by_memory = max(1 << 20, mem // 4 // 40)
    return int(min(INT32_MAX // 4, by_memory))


def _resolve_shard_tokens(shard_tokens: int | None) -> int:
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


class _ShardWriter:
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
        self, progress: bool = False, on_shard: Callable[[int], None] | None = None
    ) -> tuple[list[dict[str, Any]], list[Shard]]:
        """Close the token files, build every shard's suffix array; return (shards meta, shards).
        `on_shard(i)` is called before shard i is sorted (progress, cancellation)."""
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
            if progress:
                print(f"  shard {i}: suffix array over {size:,} tokens in {sa_seconds:.1f} s", file=sys.stderr, flush=True)
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


def clean_name(name: str) -> bytes:
    """A document name as stored: UTF-8 (undecodable file-name bytes replaced), control
    characters (newlines, escapes) replaced by "?", cut to MAX_NAME_BYTES. Display only."""
    text = "".join("?" if (ord(c) < 32 or 127 <= ord(c) < 160) else c for c in str(name))
    data = text.encode("utf-8", errors="replace")
    if len(data) > MAX_NAME_BYTES:
        data = data[:MAX_NAME_BYTES].decode("utf-8", errors="ignore").encode("utf-8")
    return data


def _tokens_name(i: int) -> str:
    return f"tokens-{i:05d}.bin"


def _sa_name(i: int) -> str:
    return f"sa-{i:05d}.bin"


def _make_meta(
    *,
    vocab_size: int,
    tokenizer_name: str,
    fingerprint: str,
    writer: _ShardWriter,
    shards_meta: list[dict[str, Any]],
    source: str,
    extra: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "tokenizer": {"name": tokenizer_name, "fingerprint": fingerprint},
        "vocab_size": int(vocab_size),
        "separator": writer.separator,
        "dtype": writer.dtype.str,
        "n_documents": writer.n_documents,
        "n_split_documents": writer.n_split_documents,
        "n_tokens": writer.n_tokens,
        "shard_tokens": writer.shard_tokens,
        "shards": shards_meta,
        "source": source,
        "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "build_seconds": round(time.time() - started, 3),
    }
    meta.update(extra)
    return meta


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


def build_datastore(
    documents: Iterable[str | tuple[str, str]],
    tokenizer: Any,
    out_dir: str | os.PathLike,
    *,
    source: str = "",
    shard_tokens: int | None = None,
    force: bool = False,
    tokenizer_name: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    extra_meta_fn: Callable[[], dict[str, Any]] | None = None,
    batch_docs: int = 512,
    batch_chars: int = 4_000_000,
    progress: bool = True,
    total_documents: int | None = None,
    on_progress: Callable[[BuildProgress], None] | None = None,
    cancel: Any = None,
) -> Datastore:
    """Tokenize `documents` (no special tokens), write the shards and suffix arrays into
    `out_dir` atomically, and return the opened store.

    documents: texts, or (name, text) pairs; the names go into the document index.
    out_dir must not exist unless `force` is set; it is replaced only once the new store is
    complete. `extra_meta_fn` is called after the documents are consumed (for reader statistics
    such as skipped records) and its result is merged into meta.json. `on_progress` gets a
    BuildProgress after every batch of documents and before every shard's suffix array;
    `cancel` (a threading.Event, or anything with is_set()) stops the build between documents
    or shards with BuildCancelled, leaving nothing behind.
    """
    out = check_target(out_dir, force)
    vocab_size = tokenizer_vocab_size(tokenizer)
    fingerprint = tokenizer_fingerprint(tokenizer)
    name = tokenizer_name or tokenizer_display_name(tokenizer)

    def token_docs() -> Iterator[np.ndarray]:
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total_documents, unit="doc", desc="tokenizing", dynamic_ncols=True)
        n_tokens = n_docs = 0
        try:
            for batch in _batched(documents, batch_docs, batch_chars):
                _check_cancel(cancel)  # between batches of documents (uploads use small batches)
                for (name, _), ids in zip(batch, encode_batch(tokenizer, [text for _, text in batch])):
                    arr = np.asarray(ids, dtype=np.int64)
                    n_tokens += len(arr)
                    yield name, arr
                n_docs += len(batch)
                if bar is not None:
                    bar.update(len(batch))
                    bar.set_postfix_str(f"{n_tokens / 1e6:.1f}M tokens", refresh=False)
                if on_progress is not None:
                    on_progress(BuildProgress("tokenizing", documents=n_docs, tokens=n_tokens))
        finally:
            if bar is not None:
                if bar.total is not None and bar.n < bar.total:
                    bar.total = bar.n  # some items held no document (empty files, skipped records)
                    bar.refresh()
                bar.close()

    return _write_store(
        token_docs(),
        out,
        vocab_size=vocab_size,
        tokenizer_name=name,
        fingerprint=fingerprint,
        source=source,
        shard_tokens=shard_tokens,
        extra_meta=extra_meta,
        extra_meta_fn=extra_meta_fn,
        progress=progress,
        tokenizer=tokenizer,
        on_progress=on_progress,
        cancel=cancel,
    )


def _check_cancel(cancel: Any) -> None:
    if cancel is not None and cancel.is_set():
        raise BuildCancelled("build cancelled")


def build_from_token_ids(
    documents: Iterable[Sequence[int]],
    vocab_size: int,
    out_dir: str | os.PathLike,
    *,
    source: str = "token ids",
    shard_tokens: int | None = None,
    force: bool = False,
    tokenizer_name: str = "(token ids)",
    fingerprint: str = "",
) -> Datastore:
    """Write a datastore from already tokenized documents (no tokenizer involved)."""
    out = check_target(out_dir, force)
    return _write_store(
        ((None, np.asarray(d, dtype=np.int64)) for d in documents),
        out,
        vocab_size=vocab_size,
        tokenizer_name=tokenizer_name,
        fingerprint=fingerprint,
        source=source,
        shard_tokens=shard_tokens,
        progress=False,
    )


def _write_store(
    token_docs: Iterable[tuple[str | None, np.ndarray]],
    out: Path,
    *,
    vocab_size: int,
    tokenizer_name: str,
    fingerprint: str,
    source: str,
    shard_tokens: int | None,
    extra_meta: dict[str, Any] | None = None,
    extra_meta_fn: Callable[[], dict[str, Any]] | None = None,
    progress: bool = False,
    tokenizer: Any = None,
    on_progress: Callable[[BuildProgress], None] | None = None,
    cancel: Any = None,
) -> Datastore:
    started = time.time()
    limit = _resolve_shard_tokens(shard_tokens)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_folders(out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        writer = _ShardWriter(tmp, vocab_size, limit)
        for name, ids in token_docs:
            writer.add(ids, name)
        if writer.n_documents == 0:
            raise DatastoreError("no documents to build a datastore from")
        if progress:
            print(f"building suffix arrays for {writer.n_shards} shard(s)", file=sys.stderr, flush=True)

        def on_shard(i: int) -> None:
            _check_cancel(cancel)
            if on_progress is not None:
                on_progress(BuildProgress("suffix array", writer.n_documents, writer.n_tokens, i, writer.n_shards))

        shards_meta, _ = writer.finish(progress=progress, on_shard=on_shard)
        documents_meta = writer.write_document_index()
        _check_cancel(cancel)
        extra = dict(extra_meta or {})
        if extra_meta_fn is not None:
            extra.update(extra_meta_fn())
        meta = _make_meta(
            vocab_size=vocab_size,
            tokenizer_name=tokenizer_name,
            fingerprint=fingerprint,
            writer=writer,
            shards_meta=shards_meta,
            source=source,
            extra=extra,
            started=started,
        )
        meta["documents"] = documents_meta
        # meta.json last: a folder without it is never a datastore.
        _write_json_synced(tmp / META_FILE, meta)
        _fsync_dir(tmp)
        if out.exists() or out.is_symlink():
            check_target(out, force=True)  # again: the folder may have changed during the build
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ds = Datastore.open(out, tokenizer)
    if on_progress is not None:
        on_progress(BuildProgress("done", ds.n_documents, ds.n_tokens, len(ds.shards), len(ds.shards)))
    return ds


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
        _, _, _, shards = _check_meta(read_meta(out), f"{out}/{META_FILE}")
    except DatastoreError as exc:
        raise DatastoreError(refuse + f"it is not an empty folder nor a datastore ({exc})") from None
    own = {META_FILE} | {name for _, _, t, a, _ in shards for name in (t, a)}
    try:
        docs = _check_documents_meta(read_meta(out), f"{out}/{META_FILE}")
    except DatastoreError as exc:
        raise DatastoreError(refuse + f"it is not an empty folder nor a datastore ({exc})") from None
    if docs is not None:
        own |= {docs[k] for k in DOC_FILES}
    foreign = [e for e in entries if e not in own]
    if foreign:
        raise DatastoreError(
            refuse + f"it holds {foreign[0]!r}" + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + ", which is not part of the datastore; move it away first"
        )
    return out


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


# --- opening ------------------------------------------------------------------------------

_REQUIRED_KEYS = ("format_version", "tokenizer", "vocab_size", "separator", "dtype", "n_documents", "n_tokens", "shards")


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """meta.json of a datastore folder, with a DatastoreError if it is missing or unreadable."""
    path = Path(path)
    if not path.exists():
        raise DatastoreError(f"no datastore at {path}: the folder does not exist")
    if not path.is_dir():
        raise DatastoreError(f"no datastore at {path}: not a folder")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise DatastoreError(f"no datastore at {path}: {META_FILE} is missing (not a datastore, or an interrupted build)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatastoreError(f"{meta_path} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise DatastoreError(f"{meta_path}: expected a JSON object")
    return meta


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


def _open(path: Path, tokenizer: Any, check_data: bool = True) -> Datastore:
    meta = read_meta(path)
    dtype, separator, n_tokens, shards_meta = _check_meta(meta, f"{path}/{META_FILE}")
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
    return Datastore(path=path, meta=meta, shards=shards, documents=documents)


def _meta_int(value: Any, what: str, minimum: int = 0) -> int:
    # JSON integers only: a bool, a float or a numeric string in meta.json is damage, not data.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DatastoreError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_meta(meta: dict[str, Any], where: str) -> tuple[np.dtype, int, int, list[tuple[int, int, str, str, np.dtype]]]:
    """Types and consistency of meta.json (no data read). Returns (token dtype, separator,
    n_tokens, per shard (n_tokens, n_documents, tokens file, sa file, sa dtype))."""
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise DatastoreError(
            f"{where}: unknown datastore format version {version!r} (this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}); rebuild it"
        )
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise DatastoreError(f"{where}: missing keys {', '.join(missing)}")
    tok = meta["tokenizer"]
    if not isinstance(tok, dict) or not all(isinstance(tok.get(k, ""), str) for k in ("name", "fingerprint")):
        raise DatastoreError(f"{where}: 'tokenizer' must be an object with string 'name' and 'fingerprint', got {tok!r:.80}")
    vocab_size = _meta_int(meta["vocab_size"], f"{where}: vocab_size", 1)
    separator = _meta_int(meta["separator"], f"{where}: separator", 1)
    n_tokens = _meta_int(meta["n_tokens"], f"{where}: n_tokens")
    _meta_int(meta["n_documents"], f"{where}: n_documents")
    if separator != vocab_size:
        raise DatastoreError(f"{where}: separator {separator} differs from vocab size {vocab_size}")
    try:
        dtype = np.dtype(meta["dtype"]) if isinstance(meta["dtype"], str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype not in (np.dtype("<u2"), np.dtype("<u4")) or dtype != token_dtype(separator):
        raise DatastoreError(f"{where}: token dtype {meta['dtype']!r} does not fit separator {separator}")
    if not isinstance(meta["shards"], list) or not meta["shards"]:
        raise DatastoreError(f"{where}: 'shards' must be a non-empty list")
    shards = []
    for i, sm in enumerate(meta["shards"]):
        what = f"{where}: shard {i}"
        if not isinstance(sm, dict) or any(k not in sm for k in ("n_tokens", "tokens", "sa")):
            raise DatastoreError(f"{what} entry is malformed (needs n_tokens, tokens, sa)")
        n = _meta_int(sm["n_tokens"], f"{what} n_tokens")
        n_docs = _meta_int(sm.get("n_documents", 0), f"{what} n_documents")
        names = [_plain_name(sm[k], f"{what} {k}") for k in ("tokens", "sa")]
        try:
            sa_dtype = np.dtype(sm.get("sa_dtype", "<i4")) if isinstance(sm.get("sa_dtype", "<i4"), str) else None
        except TypeError:
            sa_dtype = None
        if sa_dtype not in (np.dtype("<i4"), np.dtype("<i8")):
            raise DatastoreError(f"{what} has unsupported suffix-array dtype {sm.get('sa_dtype')!r}")
        if n > INT32_MAX and sa_dtype.itemsize < 8:
            raise DatastoreError(f"{what} has {n:,} tokens, too many for a {sa_dtype} suffix array")
        shards.append((n, n_docs, names[0], names[1], sa_dtype))
    return dtype, separator, n_tokens, shards


def _check_documents_meta(meta: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The document index entry of meta.json: None for a format-1 store (it has none), else
    {starts, name_offsets, names: plain file names, names_bytes: int}."""
    if meta.get("format_version") == 1:
        return None
    docs = meta.get("documents")
    if not isinstance(docs, dict) or any(k not in docs for k in (*DOC_FILES, "names_bytes")):
        raise DatastoreError(f"{where}: 'documents' must be an object with {', '.join(DOC_FILES)} and names_bytes")
    out: dict[str, Any] = {k: _plain_name(docs[k], f"{where}: documents {k}") for k in DOC_FILES}
    out["names_bytes"] = _meta_int(docs["names_bytes"], f"{where}: documents names_bytes")
    return out


def _open_documents(path: Path, meta: dict[str, Any], shards: list[Shard], check_data: bool) -> DocumentIndex | None:
    """Map and check the document index. The names are never used as paths; the offsets must
    be increasing and inside the store, so a lookup can never read outside it."""
    docs = _check_documents_meta(meta, f"{path}/{META_FILE}")
    if docs is None:
        return None
    n_docs, n_tokens = int(meta["n_documents"]), int(meta["n_tokens"])
    i8 = np.dtype("<i8")
    starts = _map(_inside(path, docs["starts"], "document starts"), i8, n_docs + 1, "document starts")
    offsets = _map(_inside(path, docs["name_offsets"], "document name offsets"), i8, n_docs + 1, "document name offsets")
    names = _map(_inside(path, docs["names"], "document names"), np.dtype(np.uint8), docs["names_bytes"], "document names")
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
                raise DatastoreError(f"{where}: a document start is not at a document boundary; the store is damaged, rebuild it")
    return DocumentIndex(starts=starts, name_offsets=offsets, names=names)


def _plain_name(name: Any, what: str) -> str:
    """A shard file is named by a plain file name: no folder part, so meta.json can never point
    the store at a file elsewhere on disk."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise DatastoreError(f"{what} must be a plain file name inside the store folder, got {name!r}")
    return name


def _inside(folder: Path, name: str, what: str) -> Path:
    """folder/name, refused if a link takes it out of the folder."""
    file = folder / name
    if file.is_symlink() and file.resolve().parent != folder.resolve():
        raise DatastoreError(f"{what}: {file} links outside the store folder")
    return file


CHECK_CHUNK = 1 << 22  # entries per pass of the data check: bounded memory on a mapped store


def check_shard_data(tokens: np.ndarray, sa: np.ndarray, separator: int, where: str = "shard") -> None:
    """Every token id is in [0, separator] and every suffix-array entry in [0, n): the bounds the
    retrieval kernels rely on. One vectorised pass in chunks, so a mapped store is read once
    without holding more than a chunk in anonymous memory. Raises DatastoreError."""
    n = int(tokens.shape[0])
    for a in range(0, n, CHECK_CHUNK):
        t = np.asarray(tokens[a : a + CHECK_CHUNK])
        top = int(t.max())
        if top > separator:
            j = a + int(np.argmax(t > separator))
            raise DatastoreError(
                f"{where}: token id {top} at position {j} is outside the vocabulary (ids 0..{separator - 1}, "
                f"separator {separator}); the store is damaged, rebuild it"
            )
        s = np.asarray(sa[a : a + CHECK_CHUNK])
        lo, hi = int(s.min()), int(s.max())
        if lo < 0 or hi >= n:
            j = a + int(np.argmax((s < 0) | (s >= n)))
            raise DatastoreError(
                f"{where}: suffix-array entry {j} is {int(s[j - a])}, outside the store's {n:,} positions; "
                f"the store is damaged, rebuild it"
            )


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


def check_tokenizer(meta: dict[str, Any], tokenizer: Any, where: str = "datastore") -> None:
    """Refuse a datastore built with a different tokenizer: its drafts would be garbage."""
    stored = meta.get("tokenizer", {}) or {}
    stored_name = stored.get("name", "?")
    stored_fp = stored.get("fingerprint", "")
    vocab_size = tokenizer_vocab_size(tokenizer)
    if int(meta["vocab_size"]) != vocab_size:
        raise DatastoreError(
            f"{where} was built for tokenizer {stored_name!r} with {int(meta['vocab_size']):,} ids, "
            f"but the model's tokenizer {tokenizer_display_name(tokenizer)!r} has {vocab_size:,}: rebuild the datastore for this model"
        )
    fp = tokenizer_fingerprint(tokenizer)
    if stored_fp != fp:
        raise DatastoreError(
            f"{where} was built for tokenizer {stored_name!r} (fingerprint {str(stored_fp)[:19]}...), "
            f"which differs from the model's tokenizer {tokenizer_display_name(tokenizer)!r} "
            f"(fingerprint {fp[:19]}...): rebuild the datastore for this model"
        )
