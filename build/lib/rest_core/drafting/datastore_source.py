"""The paper's draft source: continuations of the longest context suffix in a datastore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rest_core.config import RetrievalConfig
from rest_core.drafting.source import SHOWN_POSITIONS, Retrieved
from rest_core.drafting.suffix_search import plain_array, search_shards
from rest_core.sources import SOURCE_DATASTORE


class DatastoreSource:
    """The paper's draft source: continuations of the longest context suffix in a datastore.

    `datastore` is anything with `.shards` (each with `.tokens` and `.sa`) and `.separator`,
    e.g. `rest_core.store.datastore.Datastore`. Only the last n_max context tokens can match, so only
    they are kept. Several stores draft together as several sources, each with its own bit and
    name (rest_core.sources.SourceTable); one store alone is bit 1, "datastore".
    """

    bit = SOURCE_DATASTORE
    name = "datastore"
    N_POSITIONS = SHOWN_POSITIONS

    def __init__(
        self,
        datastore: Any,
        cfg: RetrievalConfig | None = None,
        weight: float = 1.0,
        *,
        bit: int = SOURCE_DATASTORE,
        name: str = "datastore",
    ) -> None:
        self.datastore = datastore
        self.cfg = cfg or RetrievalConfig()
        self.weight = float(weight)
        self.bit, self.name = int(bit), name
        self.separator = int(datastore.separator)
        self._shards = [(plain_array(s.tokens), plain_array(s.sa)) for s in datastore.shards]
        self._tail = np.empty(0, dtype=np.int64)

    def reset(self, context_ids: Sequence[int] | np.ndarray) -> None:
        self._tail = np.empty(0, dtype=np.int64)
        self.extend(context_ids)

    def extend(self, new_ids: Sequence[int] | np.ndarray) -> None:
        new = np.asarray(new_ids, dtype=np.int64).reshape(-1)
        self._tail = np.concatenate((self._tail, new))[-self.cfg.n_max :]

    def retrieve(self) -> Retrieved:
        ctx = self._tail
        starts = np.empty(self.N_POSITIONS, dtype=np.int64)
        n, count, conts = search_shards(self._shards, ctx, self.cfg, self.separator, starts)
        suffix = tuple(int(t) for t in ctx[ctx.shape[0] - n :]) if n else ()
        positions = tuple(int(p) for p in starts if p >= 0)
        return Retrieved(self.bit, n, suffix, count, conts, self.weight, positions)
