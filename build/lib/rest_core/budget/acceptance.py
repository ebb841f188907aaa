"""The acceptance model: per draft node, the chance that the model's own path runs through it,
from what is known before the verification forward.

A node is accepted only if its parent is, so the model predicts the conditional
q(node) = P(node accepted | parent accepted) (the root's children: parent = the root, always
"accepted"), and a node's path probability is the product of q along its path,
p(node) = q(node) * p(parent). Path probabilities never grow from parent to child, which is
what `rest_core.budget.selection` relies on.

q is a logistic regression over a handful of features of the node and of the step's matches
(`FEATURE_NAMES`): which sources proposed it, its share of its parent's weight and how many
continuations that share is measured on (a unanimous continuation of one match is weak
evidence, of 500 strong), each proposing source's matched suffix length and occurrence count,
and depth. Its weights come from `acceptance_prior.json` (fitted on the training split by
`scripts/fit_acceptance.py`), and a recalibration of them is learned online from every step's
outcome: only the nodes whose parent was accepted have an observable outcome, and those are
the ones learned from.
Pure numpy; what it predicts only chooses what to draft, never what is emitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.drafting.trie import Trie

PRIOR_PATH = Path(__file__).with_name("acceptance_prior.json")
_CX = 2  # the context's bit (rest_core.sources.SOURCE_CONTEXT); every other bit is a datastore's
_DS = 0xFF & ~_CX  # any datastore (rest_core.sources.STORE_MASK and the spare bit)
_BOTH = 3  # parent_mask of the root's children: "every source"
_K_DEFAULT = 5000  # RetrievalConfig.max_matches: continuations per source at most

FEATURE_NAMES: tuple[str, ...] = (
    "bias",
    "context_only",  # proposed by the context source alone (base: the datastore alone)
    "both",  # proposed by both sources
    "disagree",  # the parent was proposed by both, this node by one only
    "logit_share",  # logit of the node's share of its parent's weight
    "unanimous",  # share 1: every continuation through the parent goes on through the node
    "log_support",  # log2(1 + continuations through the parent)
    "unanimous_x_support",  # a unanimous continuation of many matches is near-certain
    "ds_len",  # log2(1 + datastore suffix length), if the datastore proposed the node
    "cx_len",  # log2(1 + context suffix length), if the context proposed the node
    "ds_occ",  # log2(1 + datastore occurrences) / 4, if the datastore proposed the node
    "cx_occ",  # log2(1 + context occurrences) / 4, if the context proposed the node
    "log_depth",  # log2(depth)
)


@dataclass(frozen=True)
class SourceMatch:
    """What one source found this step (from `Retrieved` or an event's `MatchInfo`)."""

    bit: int
    suffix_len: int
    occurrences: int
    rows: int | None = None  # continuations returned (default min(occurrences, K))
    weight: float = 1.0  # the source's weight in the trie

    @classmethod
    def of(cls, retrieved: Any) -> SourceMatch:
        """From a source's `rest_core.drafting.source.Retrieved` (before the weights are spread over rows)."""
        r = retrieved
        return cls(
            int(r.source_bit), int(r.suffix_len), int(r.occurrences), int(r.continuations.shape[0]), float(r.weight)
        )

    def row_weight(self) -> float:
        rows = self.rows if self.rows is not None else min(self.occurrences, _K_DEFAULT)
        return self.weight / max(rows, 1)


@dataclass(frozen=True)
class NodeFeatures:
    """Raw per-node features, (n,) each; `design` turns them into the model's inputs."""

    mask: np.ndarray  # source bitmask of the node
    parent_mask: np.ndarray  # of its parent; 3 (a store and the context) for the root's children
    depth: np.ndarray
    share: np.ndarray  # weight / parent's weight (the root's weight for depth 1)
    support: np.ndarray  # continuations through the parent (estimated from weights)
    ds_len: np.ndarray
    ds_occ: np.ndarray
    cx_len: np.ndarray
    cx_occ: np.ndarray

    @property
    def n(self) -> int:
        return int(self.mask.shape[0])

    def take(self, rows: np.ndarray) -> NodeFeatures:
        return NodeFeatures(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> NodeFeatures:
        return cls(**{f.name: np.asarray(arrays[f.name]) for f in fields(cls)})

    @classmethod
    def concat(cls, parts: Sequence[NodeFeatures]) -> NodeFeatures:
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    def design(self) -> np.ndarray:
        """(n, len(FEATURE_NAMES)) float64 model inputs."""
        has_ds = (self.mask & _DS) > 0
        has_cx = (self.mask & _CX) > 0
        share = np.clip(self.share, 0.01, 0.99)
        unanimous = (self.share >= 0.999).astype(np.float64)
        log_support = np.log2(1.0 + self.support)
        return np.stack(
            [
                np.ones(self.n),
                (has_cx & ~has_ds).astype(np.float64),
                (has_cx & has_ds).astype(np.float64),
                (_both(self.parent_mask) & ~_both(self.mask) & (self.depth > 1)).astype(np.float64),
                np.log(share / (1.0 - share)),
                unanimous,
                log_support,
                unanimous * log_support,
                has_ds * np.log2(1.0 + self.ds_len),
                has_cx * np.log2(1.0 + self.cx_len),
                has_ds * np.log2(1.0 + self.ds_occ) / 4,
                has_cx * np.log2(1.0 + self.cx_occ) / 4,
                np.log2(np.maximum(self.depth, 1)),
            ],
            axis=1,
        )


def _both(mask: np.ndarray) -> np.ndarray:
    """Proposed by a datastore and by the context."""
    return ((mask & _DS) > 0) & ((mask & _CX) > 0)


def node_features(trie: Trie, matches: Sequence[SourceMatch], idx: np.ndarray | None = None) -> NodeFeatures:
    """Features of the nodes `idx` of `trie` (default: all), given the step's matches.

    A node's support (continuations through its parent) is its parent's weight over the
    per-continuation weight of the heaviest-row source among the parent's proposers: exact for a
    single-source parent, a lower bound when several share it. With several datastores, a
    node's datastore match is the longest among the stores that proposed it.
    """
    idx = np.arange(len(trie)) if idx is None else np.asarray(idx, dtype=np.int64)
    n = idx.shape[0]
    n_top = int(np.searchsorted(trie.parents, -1, side="right"))  # BFS: the root's children first
    root_weight = float(trie.weights[:n_top].sum())
    parents = trie.parents[idx]
    top = parents < 0
    safe = np.where(top, 0, parents)
    parent_w = np.where(top, root_weight, trie.weights[safe] if len(trie) else 0.0)
    parent_mask = np.where(top, _BOTH, trie.sources[safe] if len(trie) else 0).astype(np.uint8)
    mask = trie.sources[idx].astype(np.uint8)
    # per parent mask: the largest per-continuation weight among its sources
    row_w = np.ones(n)
    for m in np.unique(parent_mask[~top]):
        row_w[(parent_mask == m) & ~top] = max((s.row_weight() for s in matches if int(m) & s.bit), default=1.0)
    # The root's children are supported by every retrieved continuation.
    total_rows = sum((s.rows if s.rows is not None else min(s.occurrences, _K_DEFAULT)) for s in matches)
    support = np.where(top, float(total_rows), parent_w / row_w)
    ds_len = np.zeros(n, np.int64)
    ds_occ = np.zeros(n, np.int64)
    cx_len = np.zeros(n, np.int64)
    cx_occ = np.zeros(n, np.int64)
    for s in matches:
        has = (mask & s.bit) > 0
        if s.bit == _CX:
            cx_len[has], cx_occ[has] = s.suffix_len, s.occurrences
        else:
            longer = has & (s.suffix_len > ds_len)
            ds_len[longer], ds_occ[longer] = s.suffix_len, s.occurrences
    weights = trie.weights[idx]
    return NodeFeatures(
        mask=mask,
        parent_mask=parent_mask,
        depth=trie.depths[idx].astype(np.int64),
        share=np.where(parent_w > 0, weights / np.where(parent_w > 0, parent_w, 1.0), 0.0),
        support=np.maximum(support, 1.0),
        ds_len=ds_len,
        ds_occ=ds_occ,
        cx_len=cx_len,
        cx_occ=cx_occ,
    )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
    """Weights of an L2-regularised logistic regression (the bias unpenalised), by Newton's method."""
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(iters):
        p = _sigmoid(x @ w)
        grad = x.T @ (p - y) + penalty * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-7:
            break
    return w


def path_probabilities(parents: np.ndarray, conditional: np.ndarray) -> np.ndarray:
    """p(node) = q(node) * p(parent), parents before children (BFS order), parent -1 = root."""
    p = np.asarray(conditional, dtype=np.float64).copy()
    for i in range(p.shape[0]):  # one pass: a parent's p is final before its children's
        if parents[i] >= 0:
            p[i] *= p[parents[i]]
    return p


class AcceptanceModel:
    """Logistic q(node accepted | parent accepted): fitted weights (the prior) and an online
    recalibration learned from each step's outcome.

    Online, only a recalibration of the prior's logit z is learned, q = sigmoid(a[kind] + b z),
    with an offset a per proposer kind (datastore, context, both) and a common slope b: four
    well-scaled numbers, so one step's outcomes cannot swing predictions wildly, yet a
    conversation whose context source is unusually reliable (or a store that misleads on this
    topic) is picked up within a few steps. They are fitted by a diagonal Newton step per update
    (curvature accumulated from the observations, starting at `prior_strength` nodes' worth),
    with old evidence decaying by `forget` per step, so the model keeps adapting.
    """

    def __init__(self, weights: Sequence[float], *, prior_strength: float = 8.0, forget: float = 0.98) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(FEATURE_NAMES),):
            raise ValueError(
                f"the acceptance model needs {len(FEATURE_NAMES)} weights, got {w.shape[0] if w.ndim else 0}"
            )
        self.weights = w.copy()
        self.prior_strength = float(prior_strength)
        self.forget = float(forget)
        self.reset()

    def reset(self) -> None:
        """Forget what was learned online: back to the prior."""
        self.recalibration = np.array([0.0, 0.0, 0.0, 1.0])  # offsets (datastore, context, both), slope
        self._curvature = np.full(4, self.prior_strength * 0.25)

    @classmethod
    def load(cls, path: str | Path = PRIOR_PATH, **kwargs: float) -> AcceptanceModel:
        """The model with the weights of a fitted JSON file (default: the shipped prior)."""
        data = json.loads(Path(path).read_text())
        if list(data.get("features", [])) != list(FEATURE_NAMES):
            raise ValueError(f"{path}: fitted for other features ({data.get('features')}); refit it")
        return cls(data["weights"], **kwargs)

    def _inputs(self, feats: NodeFeatures) -> np.ndarray:
        """(n, 4) inputs of the recalibration: proposer kind one-hot, and the prior's logit."""
        kind = np.where(_both(feats.mask), 2, np.where(feats.mask & _CX, 1, 0))
        u = np.zeros((feats.n, 4))
        u[np.arange(feats.n), kind] = 1.0
        u[:, 3] = feats.design() @ self.weights
        return u

    def conditional(self, feats: NodeFeatures) -> np.ndarray:
        """(n,) q(node accepted | parent accepted)."""
        if feats.n == 0:
            return np.empty(0)
        return _sigmoid(self._inputs(feats) @ self.recalibration)

    def path_of(self, parents: np.ndarray, feats: NodeFeatures) -> np.ndarray:
        """(n,) path probabilities of nodes with these parents (parents first, -1 = root)."""
        return path_probabilities(parents, self.conditional(feats))

    def learn(self, feats: NodeFeatures, accepted: np.ndarray) -> None:
        """One step's observable outcomes: nodes whose parent was accepted, and which were."""
        if feats.n == 0:
            return
        u = self._inputs(feats)
        q = _sigmoid(u @ self.recalibration)
        self._curvature = self.forget * self._curvature + (u * u * (q * (1 - q))[:, None]).sum(axis=0)
        grad = u.T @ (np.asarray(accepted, dtype=np.float64) - q)
        self.recalibration += grad / np.maximum(self._curvature, 1e-6) / 2  # coupled inputs: damped


def observable(parents: np.ndarray, accepted: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, outcome) of a verified draft (`parents` in draft order, `accepted` its accepted
    path): the nodes whose parent was accepted (or is the root), and whether each was accepted."""
    hit = np.zeros(parents.shape[0], dtype=bool)
    hit[list(accepted)] = True
    seen = np.where(parents < 0, True, hit[np.maximum(parents, 0)])
    rows = np.flatnonzero(seen)
    return rows, hit[rows]


def reliability(predicted: np.ndarray, observed: np.ndarray, bins: int = 10) -> list[dict[str, float]]:
    """Per predicted-probability bin (non-empty ones): count, mean predicted, observed rate."""
    predicted = np.asarray(predicted, dtype=np.float64)
    observed = np.asarray(observed, dtype=np.float64)
    which = np.minimum((predicted * bins).astype(np.int64), bins - 1)
    out = []
    for b in range(bins):
        sel = which == b
        if sel.any():
            out.append(
                {
                    "lo": b / bins,
                    "hi": (b + 1) / bins,
                    "n": int(sel.sum()),
                    "predicted": float(predicted[sel].mean()),
                    "observed": float(observed[sel].mean()),
                }
            )
    return out
