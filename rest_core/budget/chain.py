"""Chain drafts for engines that verify one chain per request (vLLM 0.32 has no tree
verification), and the length of every request's chain when a whole batch is verified in one
forward.

`chain_draft` / `chain_drafts`: one request's sources merged into the engine's own weighted trie
and draft tree (`rest_core.drafting.draft.build_draft`), each node scored by the acceptance model
(`rest_core.budget.acceptance`: p = the chance that the model's path runs through the node), and
the chain that follows the likeliest child from the root down to a leaf (at most k deep). Each
prefix of that chain is then the likeliest next token given the one before, which is what the
batch rule below cuts it to.

`batch_lengths`: a batched verify step over T tokens (T = sum over the batch's B requests of
1 + draft length) costs C(T) and yields B + (accepted drafts) tokens, whose expectation is the
sum of the drafted tokens' p. Each request's p never grows along its chain, so the requests'
chains form a forest in which taking tokens in order of p (ties: shallower first) always takes a
prefix of every chain: for each total n the n likeliest tokens are the best n, and the best rate

    (B + sum of the chosen p) / (overhead_ms + C(B + n))

over n is exact (the argument of `rest_core.budget.selection`, which this reuses with roots = B).
Where the forward's cost grows faster than acceptance pays (a full batch on a CPU), it drafts
little or nothing; where it is flat (one request on a GPU), the whole chains.
Pure numpy; what it predicts only chooses what to draft, never what is emitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rest_core._jit import jit
from rest_core.budget.acceptance import AcceptanceModel, NodeFeatures, SourceMatch, node_features, path_probabilities
from rest_core.budget.selection import POOL_MIN, Cost, select
from rest_core.drafting.draft import build_draft
from rest_core.drafting.source import Retrieved

_NO_IDS = np.empty(0, np.int64)


@dataclass(frozen=True)
class ChainDraft:
    """One request's chain: its tokens, each one's predicted chance of being accepted (its path
    probability: the chance the model emits every token up to and including it), and who
    proposed it. Empty when nothing matched."""

    tokens: np.ndarray = field(default_factory=lambda: _NO_IDS)  # (L,) int64
    p: np.ndarray = field(default_factory=lambda: np.empty(0))  # (L,) float64, non-increasing
    sources: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))  # (L,) source bitmasks
    features: NodeFeatures | None = None  # of the L nodes: what the acceptance model learns from
    matches: tuple[SourceMatch, ...] = ()  # what each source found this step

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def cut(self, n: int) -> ChainDraft:
        """The first n tokens."""
        n = max(0, min(int(n), len(self)))
        if n == len(self):
            return self
        feats = self.features.take(np.arange(n)) if self.features is not None else None
        return ChainDraft(self.tokens[:n], self.p[:n], self.sources[:n], feats, self.matches)


@jit
def likeliest_path(parents: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Node indices from the root down to a leaf, taking the child with the largest p at each
    node (ties: the smaller index). `parents` in BFS order (non-decreasing, -1 = the root), so
    each node's children are one contiguous block."""
    n = parents.shape[0]
    path = np.empty(n, np.int64)
    length = 0
    node = -1
    lo = 0
    while True:
        while lo < n and parents[lo] < node:
            lo += 1
        best = -1
        i = lo
        while i < n and parents[i] == node:
            if best < 0 or p[i] > p[best]:
                best = i
            i += 1
        if best < 0:
            return path[:length]
        path[length] = best
        length += 1
        node = best
        lo = i


def chain_draft(retrieved: Sequence[Retrieved], model: AcceptanceModel, k: int) -> ChainDraft:
    """The likeliest chain of at most k tokens through the draft tree of what one request's
    sources retrieved (`retrieved`: one result per enabled source), with each token's predicted
    path probability under `model` (see `chain_drafts`)."""
    return chain_drafts([retrieved], [model], [k])[0]


def chain_drafts(
    retrieved: Sequence[Sequence[Retrieved]], models: Sequence[AcceptanceModel], ks: Sequence[int]
) -> list[ChainDraft]:
    """One chain per request: its sources' continuations merged, weighed and cut to the
    heaviest max(4k, POOL_MIN) nodes at most k deep by the engine's own `build_draft` (what
    the auto budget scores too, `rest_core.budget.selection.choose_draft`); every node of
    that tree scored by the request's acceptance model; the likeliest path through it.
    The scoring is one matrix product per model for the whole batch (a step of a full batch
    would otherwise pay numpy's per-call cost once per request)."""
    trees = []
    for found, k in zip(retrieved, ks, strict=True):
        draft = build_draft(found, max(4 * k, POOL_MIN), max_depth=k) if (k > 0 and found) else None
        trees.append(draft if draft is not None and len(draft) else None)
    matches = [tuple(SourceMatch.of(r) for r in found) for found in retrieved]
    out: list[ChainDraft] = [ChainDraft(matches=m) for m in matches]
    by_model: dict[int, list[int]] = {}
    for i, draft in enumerate(trees):
        if draft is not None:
            by_model.setdefault(id(models[i]), []).append(i)
    for rows in by_model.values():
        feats = [node_features(trees[i].trie, matches[i], trees[i].idx) for i in rows]
        q = models[rows[0]].conditional(NodeFeatures.concat(feats))
        at = 0
        for i, f in zip(rows, feats, strict=True):
            nodes = trees[i].nodes
            p = path_probabilities(nodes.parents, q[at : at + f.n])
            at += f.n
            path = likeliest_path(nodes.parents, p)[: ks[i]]
            out[i] = ChainDraft(
                nodes.tokens[path].astype(np.int64), p[path], nodes.sources[path].copy(), f.take(path), matches[i]
            )
    return out


@dataclass(frozen=True)
class BatchPlan:
    """How many tokens of each request's chain to draft for one batched verify step."""

    lengths: tuple[int, ...]  # per request, in the order given
    expected_tokens: float  # B + the sum of the drafted tokens' p: the step's expected yield
    tokens: int  # T = B + the drafted tokens: what the verify forward processes
    rate: float  # expected tokens per millisecond


def batch_lengths(
    chains: Sequence[np.ndarray],
    cost: Cost,
    *,
    overhead_ms: float = 0.0,
    at_least: int = 0,
    at_most: int | None = None,
    limit: int | None = None,
) -> BatchPlan:
    """Per request, how much of its chain to draft: the total that maximises the batch's expected
    tokens per millisecond (see the module docstring). `chains`: one entry per request in the
    batch (an empty array for a request with nothing to draft, which still verifies its one
    token), each the non-increasing predicted path probabilities along that request's chain;
    `cost`: milliseconds of a verify forward over T tokens; `at_least` / `at_most`: draft at
    least / at most that many tokens in all, whatever pays (exploration); `limit`: no request
    drafts more (vLLM's num_speculative_tokens)."""
    b = len(chains)
    if b == 0:
        return BatchPlan((), 0.0, 0, 0.0)
    cut = [np.asarray(c, np.float64)[:limit] for c in chains]
    for i, c in enumerate(cut):
        if np.any(np.diff(c) > 1e-12):
            raise ValueError(f"request {i}: path probabilities must not grow along the chain")
    # Position-major order (every request's first token, then every second one, ...) is the
    # forest's BFS order, so select()'s ties (by index) go to shallower tokens first.
    depth = max((c.shape[0] for c in cut), default=0)
    owner = np.array([i for j in range(depth) for i, c in enumerate(cut) if c.shape[0] > j], dtype=np.int64)
    flat = np.array([c[j] for j in range(depth) for c in cut if c.shape[0] > j], dtype=np.float64)
    most = flat.shape[0] if at_most is None else min(int(at_most), flat.shape[0])
    chosen = select(flat, most, cost, overhead_ms, at_least, roots=b)
    lengths = np.bincount(owner[chosen.idx], minlength=b) if chosen.idx.size else np.zeros(b, np.int64)
    n = int(lengths.sum())
    return BatchPlan(tuple(int(x) for x in lengths), b + chosen.expected_accepted, b + n, chosen.rate)
