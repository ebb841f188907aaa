"""Tokenizer identity: which ids a tokenizer produces, a fingerprint of its vocabulary, its
name for display, and the check that refuses a datastore built with another tokenizer; plus the
batch encoding a build uses (no special tokens)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from rest_core.store.format import DatastoreError


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


@dataclass(frozen=True)
class TokenizerId:
    """What meta.json records of the tokenizer a store was built with."""

    name: str
    fingerprint: str
    vocab_size: int

    @classmethod
    def of(cls, tokenizer: Any, name: str | None = None) -> TokenizerId:
        """`tokenizer`'s identity, under `name` if given (else its own)."""
        return cls(
            name or tokenizer_display_name(tokenizer), tokenizer_fingerprint(tokenizer), tokenizer_vocab_size(tokenizer)
        )


def encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens (BOS/EOS): the fast tokenizers' batch call."""
    out = tokenizer(texts, add_special_tokens=False, return_attention_mask=False)
    return out["input_ids"]


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
