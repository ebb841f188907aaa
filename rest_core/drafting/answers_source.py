"""The answers a server has already finished, as a draft source (what SuffixDecoding keeps in its
global tree): a model tends to say again what it said before ("This function takes a list of
... as input. It returns ..."), across requests that share neither prompt nor datastore text.

`AnswerHistory` keeps the finished answers as one bounded token stream, newest last, a separator
(PAD) between answers; when it is full, the oldest whole answers go. A lookup finds the longest
suffix of a request's context (n_min..n_max tokens) that occurs in the stream and returns the m
tokens after each occurrence, most recent first (at most max_matches), cut at the end of that
answer. It is an exact scan, vectorized: one comparison over the stream for the context's last
token, then one per further suffix token over the occurrences still matching (a few tens of
microseconds for 64k tokens). Memory is the stream itself (4 bytes a token), grown as answers
come (doubling, up to the capacity): a namespace that holds one short answer costs a few KB, not
its capacity; nothing is indexed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from rest_core.config import RetrievalConfig
from rest_core.drafting.source import PAD, SHOWN_POSITIONS, Retrieved

FIRST_TOKENS = 1024  # a new history's room; it doubles as answers come, up to its capacity


class AnswerHistory:
    """Finished answers, at most `capacity` tokens of them (separators included), newest last."""

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError(f"an answer history holds at least 2 tokens, got capacity {capacity}")
        self.capacity = int(capacity)
        self._tokens = np.full(min(self.capacity, FIRST_TOKENS), PAD, dtype=np.int32)
        self._size = 0
        self.answers = 0  # answers added so far (evicted ones included)

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """The memory its stream holds (room included)."""
        return int(self._tokens.nbytes)

    @property
    def tokens(self) -> np.ndarray:
        """The stream (a view): answers separated by PAD."""
        return self._tokens[: self._size]

    def add(self, answer: Sequence[int] | np.ndarray) -> None:
        """Append one answer (its generated tokens; PAD-free), dropping the oldest answers whole
        to make room. An answer longer than the whole history keeps its last tokens."""
        new = np.asarray(answer, dtype=np.int64).reshape(-1)
        new = new[new >= 0][-(self.capacity - 1) :]
        if new.size == 0:
            return
        need = new.size + 1  # the answer and its separator
        if self._size + need > self.capacity:
            keep_from = self._size + need - self.capacity  # drop at least this many old tokens
            seps = np.flatnonzero(self._tokens[keep_from : self._size] == PAD)
            start = keep_from + int(seps[0]) + 1 if seps.size else self._size  # the next whole answer on
            kept = self._size - start
            self._tokens[:kept] = self._tokens[start : self._size]
            self._size = kept
        if self._size + need > self._tokens.size:  # grow (the eviction above kept it within capacity)
            grown = np.full(min(self.capacity, max(self._size + need, 2 * self._tokens.size)), PAD, dtype=np.int32)
            grown[: self._size] = self._tokens[: self._size]
            self._tokens = grown
        self._tokens[self._size : self._size + new.size] = new
        self._tokens[self._size + new.size] = PAD
        self._size += need
        self.answers += 1

    def retrieve(self, tail: Sequence[int] | np.ndarray, cfg: RetrievalConfig, bit: int, weight: float) -> Retrieved:
        """What the history holds after the longest suffix of `tail` (a request's last tokens)."""
        tail = np.asarray(tail, dtype=np.int64).reshape(-1)[-cfg.n_max :]
        h = self.tokens
        if tail.size < cfg.n_min or h.size < 2 or tail[-1] < 0:
            return Retrieved.empty(bit, cfg.m, weight)
        # ends: one past each occurrence of the last token that has a token after it
        ends = np.flatnonzero(h[:-1] == tail[-1]) + 1
        ends = ends[h[ends] != PAD]  # an answer's last token: nothing to draft after it
        length = np.ones(ends.size, dtype=np.int64)
        live = np.arange(ends.size)
        for j in range(1, tail.size):  # extend every match one token further back while it holds
            at = ends[live] - 1 - j
            ok = at >= 0
            ok[ok] = h[at[ok]] == tail[-1 - j]
            live = live[ok]
            if live.size == 0:
                break
            length[live] += 1
        best = int(length.max()) if length.size else 0
        if best < cfg.n_min:
            return Retrieved.empty(bit, cfg.m, weight)
        found = ends[length == best][::-1]  # most recent first
        picked = found[: cfg.max_matches]
        idx = picked[:, None] + np.arange(cfg.m, dtype=np.int64)
        conts = np.where(idx < h.size, h[np.minimum(idx, h.size - 1)], PAD).astype(np.int64)
        conts[np.cumsum(conts == PAD, axis=1) > 0] = PAD  # nothing past the end of an answer
        suffix = tuple(int(t) for t in tail[tail.size - best :])
        starts = tuple(int(e) - best for e in picked[:SHOWN_POSITIONS])
        return Retrieved(int(bit), best, suffix, int(found.size), conts, float(weight), starts)


class AnswerNamespaces:
    """One `AnswerHistory` per namespace (e.g. a tenant, a benchmark pass), at most `most` of
    them: the least recently used goes first."""

    def __init__(self, capacity: int, most: int) -> None:
        self.capacity, self.most = int(capacity), int(most)
        self._histories: OrderedDict[str, AnswerHistory] = OrderedDict()

    def __len__(self) -> int:
        return len(self._histories)

    def names(self) -> list[str]:
        """The namespaces kept, least recently used first."""
        return list(self._histories)

    def get(self, name: str) -> AnswerHistory | None:
        return self._histories.get(name)

    def add(self, name: str, answer: Sequence[int] | np.ndarray) -> None:
        history = self._histories.pop(name, None) or AnswerHistory(self.capacity)
        self._histories[name] = history  # the most recently used last
        while len(self._histories) > self.most:
            self._histories.popitem(last=False)
        history.add(answer)

    def totals(self) -> dict[str, int]:
        h = self._histories.values()
        return {
            "namespaces": len(h),
            "tokens": sum(len(x) for x in h),
            "answers": sum(x.answers for x in h),
            "bytes": sum(x.nbytes for x in h),
        }
