"""Cost-optimal selection against brute force over every connected subtree of small trees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rest_core.budget.selection import choose_draft, select


def _random_tree(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """BFS-ordered parents and monotone path probabilities (ties on purpose)."""
    parents = np.full(n, -1, np.int64)
    for i in range(1, n):
        parents[i] = rng.integers(-1, i) if rng.random() < 0.8 else -1
    parents = np.sort(parents)  # BFS-like: parents non-decreasing, each before its children
    parents = np.minimum(parents, np.arange(n) - 1)
    q = rng.choice([0.2, 0.5, 0.9, 1.0], size=n)
    p = np.empty(n)
    for i in range(n):
        p[i] = q[i] * (p[parents[i]] if parents[i] >= 0 else 1.0)
    return parents, p


def _connected(parents: np.ndarray, nodes: set[int]) -> bool:
    return all(parents[i] < 0 or int(parents[i]) in nodes for i in nodes)


def _linear_cost(base: float, per: float):
    return lambda q: base + per * np.asarray(q, dtype=np.float64)


@pytest.mark.parametrize("seed", range(30))
def test_best_rate_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    parents, p = _random_tree(rng, n)
    cost = _linear_cost(float(rng.uniform(5, 40)), float(rng.uniform(0.5, 15)))
    c = int(rng.integers(0, n + 1))
    overhead = float(rng.uniform(0, 3))
    best = 1.0 / (overhead + cost(1))
    for size in range(1, c + 1):
        for nodes in itertools.combinations(range(n), size):
            if _connected(parents, set(nodes)):
                best = max(best, (1 + p[list(nodes)].sum()) / (overhead + cost(1 + size)))
    got = select(p, c, cost, overhead)
    assert got.idx.shape[0] <= c
    assert _connected(parents, set(got.idx.tolist()))
    assert got.rate == pytest.approx(best, rel=1e-12)
    assert got.rate == pytest.approx((1 + p[got.idx].sum()) / (overhead + cost(1 + got.idx.shape[0])))


def test_ties_keep_parents_first():
    # A chain of certain nodes (parents -1, 0, 1, 2, 3): every prefix of the top-n must be the
    # chain's own prefix.
    p = np.ones(5)
    for c in range(6):
        got = select(p, c, _linear_cost(10, 0.0))
        assert got.idx.tolist() == list(range(c))


def test_deep_likely_chain_drafted_unlikely_nothing():
    cost = _linear_cost(40.0, 1.0)  # a CPU: each verified token costs 1 ms on a 41 ms step
    chain = np.array([0.97, 0.95, 0.93, 0.9, 0.88, 0.85, 0.8, 0.75])
    assert select(chain, 16, cost).idx.tolist() == list(range(8))
    weak = np.array([0.02, 0.01, 0.01])
    assert select(weak, 16, cost).idx.size == 0


def test_cap_and_bad_c():
    p = np.array([0.9, 0.8, 0.7])
    assert select(p, 2, _linear_cost(1, 0)).idx.tolist() == [0, 1]
    with pytest.raises(ValueError, match="c must be"):
        select(p, -1, _linear_cost(1, 0))


def test_choose_draft_takes_a_certain_chain_and_skips_noise():
    from rest_core.budget.acceptance import FEATURE_NAMES, AcceptanceModel, SourceMatch
    from rest_core.drafting.source import Retrieved
    from rest_core.drafting.trie import build_trie

    # Context: one earlier occurrence continuing 8 tokens; datastore: 50 scattered continuations.
    chain = np.arange(100, 108)
    cx = Retrieved(2, 12, tuple(range(12)), 1, chain[None, :], weight=1.0)
    noise = np.arange(200, 250)[:, None] + np.zeros((1, 3), np.int64)
    ds = Retrieved(1, 2, (0, 1), 50, noise, weight=1 / 50)
    trie = build_trie([ds, cx])
    matches = [SourceMatch(1, 2, 50), SourceMatch(2, 12, 1)]
    # A model that trusts unanimous, well-matched context continuations only.
    w = np.zeros(len(FEATURE_NAMES))
    w[FEATURE_NAMES.index("bias")] = -4.0
    w[FEATURE_NAMES.index("cx_len")] = 2.5  # log2(13) * 2.5 = 9.3 -> q near 1
    model = AcceptanceModel(w)
    flat = _linear_cost(40.0, 1.0)
    sel, p = choose_draft(trie, matches, model, 16, flat)
    assert trie.tokens[sel.idx].tolist() == chain.tolist()
    assert np.all(p > 0.9) and np.all(np.diff(p) <= 0)
    model.weights[FEATURE_NAMES.index("cx_len")] = 0.0  # now nothing is likely: draft nothing
    sel, _ = choose_draft(trie, matches, model, 16, flat)
    assert sel.idx.size == 0


def test_at_least_drafts_the_best_even_when_nothing_pays():
    cost = _linear_cost(40.0, 20.0)  # each node costs half a step: weak nodes never pay
    weak = np.array([0.05, 0.04, 0.03])
    assert select(weak, 3, cost).idx.size == 0
    got = select(weak, 3, cost, at_least=1)
    assert got.idx.tolist() == [0]
    assert got.rate == pytest.approx(1.05 / cost(2))
    assert select(weak, 0, cost, at_least=1).idx.size == 0  # c = 0 still means nothing
    assert select(np.ones(3), 3, _linear_cost(40.0, 0.0), at_least=1).idx.tolist() == [0, 1, 2]  # more if it pays
