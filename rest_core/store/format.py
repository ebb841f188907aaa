"""The on-disk format of a datastore: a token corpus plus its suffix array (paper section 3.1).

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

This module holds the format's constants, the mapped views of its files (`Shard`,
`DocumentIndex`), the reading and checking of meta.json, and the data check that
`Datastore.open` (rest_core.store.datastore) runs on every shard: every token id is at most the
separator and every suffix-array entry points inside its shard. The compiled retrieval loops
index with these values, so a damaged file must be refused when the store is opened, not found
by a crash later. The check reads the data once, in chunks; it is memory-bandwidth bound, a cost
paid once per process that opens the store (measured: datastores/README.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

FORMAT_VERSION = 2  # 2: adds the document index (doc-*.bin); 1 is still read
READABLE_VERSIONS = (1, 2)
DOC_FILES = {"starts": "doc-starts.bin", "name_offsets": "doc-name-offsets.bin", "names": "doc-names.bin"}
MAX_NAME_BYTES = 512  # longer document names are cut (they are labels, not keys)
META_FILE = "meta.json"
INT32_MAX = 2**31 - 1


class DatastoreError(ValueError):
    """A datastore folder is missing, damaged, or does not belong to the given tokenizer."""


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


def token_dtype(separator: int) -> np.dtype:
    """uint16 when every id including the separator fits, else uint32."""
    return np.dtype("<u2") if separator <= np.iinfo(np.uint16).max else np.dtype("<u4")


def store_size_estimate(tokens: int, documents: int, separator: int) -> int:
    """About the bytes a store of `tokens` tokens in `documents` documents takes on disk (for a
    disk budget): every token and every document's separator once in the token files
    (token_dtype) and once in the suffix array (int32; int64 past INT32_MAX), a document index
    entry and a typical name (64 bytes) per document, and meta.json (~16 KB at most)."""
    n = tokens + documents
    per_token = token_dtype(separator).itemsize + (4 if n <= INT32_MAX else 8)
    return n * per_token + documents * (16 + 64) + 16_384


def clean_name(name: str) -> bytes:
    """A document name as stored: UTF-8 (undecodable file-name bytes replaced), control
    characters (newlines, escapes) replaced by "?", cut to MAX_NAME_BYTES. Display only."""
    text = "".join("?" if (ord(c) < 32 or 127 <= ord(c) < 160) else c for c in str(name))
    data = text.encode("utf-8", errors="replace")
    if len(data) > MAX_NAME_BYTES:
        data = data[:MAX_NAME_BYTES].decode("utf-8", errors="ignore").encode("utf-8")
    return data


# --- meta.json ----------------------------------------------------------------------------

_REQUIRED_KEYS = (
    "format_version",
    "tokenizer",
    "vocab_size",
    "separator",
    "dtype",
    "n_documents",
    "n_tokens",
    "shards",
)


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """meta.json of a datastore folder, with a DatastoreError if it is missing or unreadable."""
    path = Path(path)
    if not path.exists():
        raise DatastoreError(f"no datastore at {path}: the folder does not exist")
    if not path.is_dir():
        raise DatastoreError(f"no datastore at {path}: not a folder")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise DatastoreError(
            f"no datastore at {path}: {META_FILE} is missing (not a datastore, or an interrupted build)"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatastoreError(f"{meta_path} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise DatastoreError(f"{meta_path}: expected a JSON object")
    return meta


def _meta_int(value: Any, what: str, minimum: int = 0) -> int:
    # JSON integers only: a bool, a float or a numeric string in meta.json is damage, not data.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DatastoreError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def check_meta(
    meta: dict[str, Any], where: str
) -> tuple[np.dtype, int, int, list[tuple[int, int, str, str, np.dtype]]]:
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
        raise DatastoreError(
            f"{where}: 'tokenizer' must be an object with string 'name' and 'fingerprint', got {tok!r:.80}"
        )
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


def check_documents_meta(meta: dict[str, Any], where: str) -> dict[str, Any] | None:
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


def _plain_name(name: Any, what: str) -> str:
    """A shard file is named by a plain file name: no folder part, so meta.json can never point
    the store at a file elsewhere on disk."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise DatastoreError(f"{what} must be a plain file name inside the store folder, got {name!r}")
    return name


# --- the data check -------------------------------------------------------------------------

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
