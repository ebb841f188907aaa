"""The context itself (prompt, history and the tokens generated so far) as a draft source."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rest_core.config import RetrievalConfig
from rest_core.drafting.source import PAD, SHOWN_POSITIONS, Retrieved
from rest_core.sources import SOURCE_CONTEXT


class ContextSource:
    """The context itself (prompt, history and the tokens generated so far) as a draft source.

    Finds the longest suffix of the context (length in [n_min, n_max]) that also occurs earlier
    in it, and returns the m tokens after each earlier occurrence, most recent first (at most
    max_matches of them). An index from every n-gram (n <= n_max) to the positions where it
    ends is kept up to date as tokens arrive, so a step costs O(n_max) per new token plus the
    continuations it returns, not a rescan of the context.
    """

    bit = SOURCE_CONTEXT
    name = "context"

    def __init__(self, cfg: RetrievalConfig | None = None, weight: float = 1.0) -> None:
        self.cfg = cfg or RetrievalConfig()
        self.weight = float(weight)
        self.reset(())

    def __len__(self) -> int:
        return self._len

    def reset(self, context_ids: Sequence[int] | np.ndarray) -> None:
        """Forget the last context and index `context_ids`."""
        self._ids: list[int] = []
        self._buf = np.empty(256, dtype=np.int64)  # the same ids, for vectorized gathers
        self._len = 0
        # n-gram (as a tuple, n <= n_max) -> end positions p (ids[p - n:p] == n-gram), ascending
        self._ends: dict[tuple[int, ...], list[int]] = {}
        self.extend(context_ids)

    def extend(self, new_ids: Sequence[int] | np.ndarray) -> None:
        """Append tokens to the indexed context."""
        new = [int(t) for t in np.asarray(new_ids, dtype=np.int64).reshape(-1)]
        if not new:
            return
        need = self._len + len(new)
        if need > self._buf.shape[0]:
            grown = np.empty(max(need, 2 * self._buf.shape[0]), dtype=np.int64)
            grown[: self._len] = self._buf[: self._len]
            self._buf = grown
        self._buf[self._len : need] = new
        ids, ends, n_max = self._ids, self._ends, self.cfg.n_max
        start = len(ids)
        ids.extend(new)
        if len(new) <= n_max:  # a decoding step: index the few new tokens one by one
            for end in range(start + 1, need + 1):
                window = tuple(ids[max(0, end - n_max) : end])
                for n in range(1, len(window) + 1):
                    key = window[-n:]
                    found = ends.get(key)
                    if found is None:
                        ends[key] = [end]
                    else:
                        found.append(end)
        else:  # a prompt: one n at a time, `zip` over shifted slices makes the keys in C
            for n in range(1, n_max + 1):
                first = max(start + 1, n)  # the first end position e (ids[e - n:e]) to index
                if first > need:
                    break
                shifted = [ids[first - n + i : need - n + i + 1] for i in range(n)]
                for end, key in enumerate(zip(*shifted), first):
                    found = ends.get(key)
                    if found is None:
                        ends[key] = [end]
                    else:
                        found.append(end)
        self._len = need

    def retrieve(self) -> Retrieved:
        cfg = self.cfg
        size = self._len
        window = tuple(self._ids[max(0, size - cfg.n_max) :])
        best_n, best_ends = 0, None
        # Longest n whose suffix also ends before `size`; monotone in n, so binary search.
        a, b = cfg.n_min, min(cfg.n_max, size - 1)
        while a <= b:
            n = (a + b) >> 1
            ends = self._ends.get(window[-n:])
            if ends is not None and len(ends) >= 2:  # ends[-1] == size is the suffix itself
                best_n, best_ends = n, ends
                a = n + 1
            else:
                b = n - 1
        if best_ends is None:
            return Retrieved.empty(self.bit, cfg.m, self.weight)
        earlier = best_ends[:-1]
        picked = np.array(earlier[::-1][: cfg.max_matches], dtype=np.int64)  # most recent first
        idx = picked[:, None] + np.arange(cfg.m, dtype=np.int64)  # (k, m)
        conts = np.where(idx < size, self._buf[np.minimum(idx, size - 1)], PAD)
        starts = tuple(int(e) - best_n for e in picked[:SHOWN_POSITIONS])  # where each match starts
        return Retrieved(self.bit, best_n, window[-best_n:], len(earlier), conts, self.weight, starts)
