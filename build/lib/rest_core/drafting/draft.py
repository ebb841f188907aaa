"""One step's draft: merge what the sources retrieved into one weighted trie, choose the nodes
to verify, and lay them out for the verification forward.

`build_draft` is the one path from retrieved continuations to a verifiable draft: the engine,
`bench-retrieval`, the kernel warm-up and the test stand-in engine all use it, so they draft
from the same weighted trie.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rest_core.config import RetrievalConfig
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.source import Retrieved
from rest_core.drafting.suffix_search import search_shards
from rest_core.drafting.tree import TreeLayout, layout
from rest_core.drafting.trie import Trie, build_trie, select_top_c, subtree
from rest_core.sources import SOURCE_DATASTORE

Selector = Callable[[Trie, int], np.ndarray]  # (trie, c) -> sorted node indices forming a subtree
# (candidate nodes, what each source retrieved, c_max) -> (sorted node indices forming a
# subtree, each one's predicted path probability): the auto budget's choice of nodes
Planner = Callable[[Trie, Sequence[Retrieved], int], tuple[np.ndarray, np.ndarray]]

_NO_NODES = np.empty(0, np.int64)
_NO_PREDICTION = np.empty(0, np.float64)
# The layout of an empty draft: the root alone (a plain decoding step).
_ROOT_ONLY = TreeLayout(
    tokens=_NO_NODES,
    mask=np.ones((1, 1), bool),
    positions=np.zeros(1, np.int64),
    parents=np.full(1, -1, np.int64),
    children={},
)


@dataclass(frozen=True)
class Draft:
    """The draft of one step. With no nodes the step is a plain decoding step."""

    trie: Trie | None  # every source's continuations merged; None when nothing was retrieved
    idx: np.ndarray  # (N,) sorted indices into `trie` of the drafted nodes
    nodes: Trie | None  # the drafted subtree (BFS order), verified after the root; None if N = 0
    c: int  # the node budget c this step used (at most c nodes drafted)
    tree: TreeLayout  # mask, positions and child table of [root] + nodes
    # (N,) each node's predicted chance that the model's path runs through it (auto budget
    # only; empty otherwise)
    predicted: np.ndarray = field(default_factory=lambda: _NO_PREDICTION)

    def __len__(self) -> int:
        return int(self.idx.shape[0])

    @property
    def q(self) -> int:
        """Tokens in the verification forward: the root and every node."""
        return 1 + len(self)


def weigh(retrieved: Sequence[Retrieved]) -> list[Retrieved]:
    """Each source's weight spread over its continuations (sources without any left out): the
    trie's weights are then a weighted mixture of the sources' next-token statistics, so a
    source that found 5000 occurrences does not outvote one that found 3 by count alone."""
    return [replace(r, weight=r.weight / r.continuations.shape[0]) for r in retrieved if r.continuations.shape[0]]


def make_draft(
    trie: Trie | None, idx: np.ndarray | Sequence[int], c: int, predicted: np.ndarray = _NO_PREDICTION
) -> Draft:
    """The draft of the nodes `idx` of `trie` (a connected subtree), laid out for verification."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if trie is None or idx.size == 0:
        return Draft(trie, _NO_NODES, None, c, _ROOT_ONLY)
    nodes = subtree(trie, idx)
    return Draft(trie, idx, nodes, c, layout(nodes), predicted)


def build_draft(
    retrieved: Sequence[Retrieved],
    c: int,
    *,
    max_depth: int | None = None,
    plan: Planner | None = None,
    selector: Selector = select_top_c,
) -> Draft:
    """Merge, weigh, choose and lay out one step's draft.

    retrieved: one result per enabled source (none: plain decoding, budget 0). c: the node
    budget (top-c by `selector`), or its maximum when `plan` chooses the nodes per step (the
    auto budget; `selector` is then unused). max_depth: never draft deeper (the tokens still
    wanted, the model's context left).
    """
    if not retrieved:
        return make_draft(None, _NO_NODES, 0)
    parts = weigh(retrieved)
    trie = build_trie(parts) if parts else None
    if trie is None or len(trie) == 0:
        return make_draft(None, _NO_NODES, c)
    pool, pool_idx = trie, None
    if max_depth is not None and int(trie.depths.max()) > max_depth:
        pool_idx = np.flatnonzero(trie.depths <= max_depth)
        pool = subtree(trie, pool_idx)
    predicted = _NO_PREDICTION
    if plan is not None:
        idx, predicted = plan(pool, retrieved, c)
        c = int(idx.shape[0])
    else:
        idx = selector(pool, c) if len(pool) else _NO_NODES
    if pool_idx is not None:
        idx = pool_idx[idx]
    return make_draft(trie, idx, c, predicted)


def warm_up() -> Draft:
    """Compile (first run on a machine) or load (later runs) the compiled kernels of retrieval,
    trie and tree on tiny inputs, so that the first real decoding step does not pay for it.
    An app may call this at start-up, e.g. in a background thread. Returns the tiny draft."""
    cfg = RetrievalConfig(n_max=4, m=3, max_matches=2)
    for dtype in (np.uint16, np.uint32):
        tokens = np.array([1, 2, 3, 1, 2, 4, 9], dtype=dtype)
        sa = np.array([0, 3, 1, 4, 2, 5, 6], dtype=np.int32)  # suffix array of `tokens`
        for sa_dtype in (np.int32, np.int64):
            search_shards([(tokens, sa.astype(sa_dtype))], np.array([1, 2]), cfg, 9)
    stored = Retrieved(SOURCE_DATASTORE, 1, (2,), 2, np.array([[3, 1, -1], [4, -1, -1]], dtype=np.int64))
    context = ContextSource(cfg)
    context.reset([1, 2, 1, 2])
    return build_draft([stored, context.retrieve()], 3)
