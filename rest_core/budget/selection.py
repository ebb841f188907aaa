"""Cost-optimal draft selection: the connected subtree that maximises expected tokens per
millisecond, given each node's path probability and the measured forward cost.

A step that verifies the root and the n nodes S emits 1 + (accepted drafts) tokens; the
accepted path is a chain, so its expected length is the sum of the path probabilities p over S.
The rate to maximise over subtrees S hanging off the root (|S| <= c) is

    (1 + sum_{i in S} p_i) / (overhead_ms + cost(1 + |S|)).

For a fixed size n the denominator is fixed, so the best S of size n has the largest sum of p.
Since p never grows from parent to child, the n nodes with the largest p (ties broken by BFS
index, which puts parents first) form a connected subtree: every chosen node's parent has p at
least as large and a smaller index, so it ranks earlier and is chosen too. No connected subtree
of size n can beat the sum of the n largest values, so the top-n are optimal for each n, and the
best subtree overall is the top-n for the n with the best rate. Nothing is drafted (n = 0) when
no node pays for its share of the forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rest_core.drafting.trie import Trie, select_top_c, subtree

if TYPE_CHECKING:
    from rest_core.budget.acceptance import AcceptanceModel, SourceMatch

Cost = Callable[[np.ndarray], np.ndarray]  # tokens in the forward (q,) -> milliseconds (q,)


@dataclass(frozen=True)
class Selection:
    idx: np.ndarray  # (n,) sorted indices of the chosen nodes (a connected subtree)
    expected_accepted: float  # sum of their path probabilities
    rate: float  # expected tokens per millisecond of the chosen draft


def rank_order(p: np.ndarray) -> np.ndarray:
    """Node indices by p descending, ties by index (parents before children in BFS order)."""
    return np.lexsort((np.arange(p.shape[0]), -p))


def select(
    p: np.ndarray, c: int, cost: Cost, overhead_ms: float = 0.0, at_least: int = 0, *, roots: int = 1
) -> Selection:
    """The rate-maximising subtree of at most c nodes (`p`: path probabilities, BFS order,
    p[child] <= p[parent]), and of at least `at_least` nodes where there are that many (the
    auto budget's exploration step: the best draft of one node or more even if none pays).

    roots: the tokens the forward verifies besides the draft, each of which yields one token
    (1: one request's last token; a batch of B requests verified together: B, with `p` the
    forest of every request's draft, `rest_core.budget.chain.batch_lengths`). The rate is then
    (roots + sum of p) / (overhead_ms + cost(roots + n))."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    p = np.asarray(p, dtype=np.float64)
    n_max = min(int(c), p.shape[0])
    n_min = min(max(int(at_least), 0), n_max)
    if n_max == 0:
        return Selection(np.empty(0, np.int64), 0.0, roots / float(overhead_ms + cost(np.array([roots]))[0]))
    if n_max < p.shape[0]:
        # Only the n_max best can be chosen: cut to them before sorting (tries can be large).
        cut = np.argpartition(-p, n_max - 1)[:n_max]
        threshold = p[cut].min()
        cand = np.flatnonzero(p >= threshold)  # every tie at the threshold, to break ties by index
        order = cand[rank_order(p[cand])][:n_max]
    else:
        order = rank_order(p)
    gain = np.concatenate(([0.0], np.cumsum(p[order])))  # expected accepted drafts, n = 0..n_max
    sizes = np.arange(n_max + 1)
    rate = (roots + gain) / (overhead_ms + cost(sizes + roots))
    best = n_min + int(np.argmax(rate[n_min:]))  # the smallest n among equals: never pay for nothing
    return Selection(np.sort(order[:best]), float(gain[best]), float(rate[best]))


POOL_MIN = 32  # candidate nodes scored per step at least (see `choose_draft`)


def choose_draft(
    trie: Trie,
    matches: Sequence[SourceMatch],
    model: AcceptanceModel,
    c: int,
    cost: Cost,
    overhead_ms: float = 0.0,
    at_least: int = 0,
) -> tuple[Selection, np.ndarray]:
    """The cost-optimal draft of at most c (and at least `at_least`, see `select`) nodes of
    `trie` under the acceptance model, and the path probability of each chosen node (in the
    order of `Selection.idx`, indices into trie).

    Tries reach tens of thousands of nodes; only a pool of the heaviest max(4c, POOL_MIN) nodes
    (a connected subtree, by `select_top_c`) is scored, which keeps a step's selection well
    under a millisecond. A likely node outside the pool would need a lighter weight than
    4c others, which the model rarely rates above them.
    """
    from rest_core.budget.acceptance import node_features

    if len(trie) == 0 or c <= 0:
        return select(np.empty(0), 0, cost, overhead_ms), np.empty(0)
    pool_idx = select_top_c(trie, max(4 * c, POOL_MIN))
    pool = subtree(trie, pool_idx)
    feats = node_features(trie, matches, pool_idx)
    p = model.path_of(pool.parents, feats)
    chosen = select(p, c, cost, overhead_ms, at_least)
    return Selection(pool_idx[chosen.idx], chosen.expected_accepted, chosen.rate), p[chosen.idx]
