"""Datastores opened once and shared: one open `Datastore` per folder and tokenizer vocabulary.

Opening a store maps its files and checks every token id and suffix-array entry (seconds for a
large store), so whoever drafts from the same folder more than once keeps it open here: the app's
runtime (one cache for its engines), vLLM's worker process (one cache for all the proposers it
builds). `as_datastore` is the engine's entry: a store given as a folder is opened, an open one
is used as it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rest_core.store.datastore import Datastore
from rest_core.store.tokenizer_id import tokenizer_fingerprint


class OpenStores:
    """Open datastores by (folder, tokenizer fingerprint): a folder is opened, and checked against
    the tokenizer, the first time it is asked for with that vocabulary; later asks share it."""

    def __init__(self) -> None:
        self._open: dict[tuple[Path, str], Datastore] = {}
        # Fingerprints of the tokenizers seen (hashing a vocabulary costs tens of milliseconds):
        # the tokenizer is held, so its id() is not reused by another while listed.
        self._fingerprints: list[tuple[Any, str]] = []

    def open(self, path: str | os.PathLike, tokenizer: Any = None) -> Datastore:
        """The datastore at `path`, checked against `tokenizer` when one is given."""
        key = (Path(path).resolve(), self._fingerprint(tokenizer))
        if key not in self._open:
            self._open[key] = Datastore.open(path, tokenizer)
        return self._open[key]

    def forget_under(self, folder: str | os.PathLike) -> None:
        """Drop the stores inside `folder` (a session's uploads, about to be deleted)."""
        root = Path(folder).resolve()
        for key in [k for k in self._open if root in k[0].parents]:
            del self._open[key]

    def __len__(self) -> int:
        return len(self._open)

    def _fingerprint(self, tokenizer: Any) -> str:
        if tokenizer is None:
            return ""
        for held, fp in self._fingerprints:
            if held is tokenizer:
                return fp
        fp = tokenizer_fingerprint(tokenizer)
        self._fingerprints.append((tokenizer, fp))
        return fp


def as_datastore(store: Any, tokenizer: Any = None) -> Any:
    """A datastore, opened (and checked against the tokenizer) when given as a folder; anything
    else (an open `Datastore`, a test's stand-in) as it is."""
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        return Datastore.open(store, tokenizer)
    return store
