"""Weighted trie: weights, source bits, BFS order, exact top-c budget, connectivity."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.drafting.source import Retrieved
from rest_core.drafting.trie import Trie, build_trie, node_path, select_top_c, subtree


def retrieved(rows, bit=1, weight=1.0) -> Retrieved:
    rows = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1)
    return Retrieved(bit, 1, (0,), len(rows), rows, weight)


def brute_trie(parts):
    """{prefix tuple: (weight, bits)} by inserting every row in a dict."""
    nodes = {}
    for rows, bit, weight in parts:
        for row in rows:
            prefix = ()
            for t in row:
                if t < 0:
                    break
                prefix = prefix + (int(t),)
                w, b = nodes.get(prefix, (0.0, 0))
                nodes[prefix] = (w + weight, b | bit)
    return nodes


def prefixes(trie: Trie) -> list[tuple[int, ...]]:
    out = []
    for i in range(len(trie)):
        out.append(tuple(int(trie.tokens[j]) for j in node_path(trie, i)))
    return out


def test_hand_worked_trie():
    trie = build_trie([retrieved([[1, 2, 3], [1, 2, 4], [1, 5, -1], [6, -1, -1], [-1, -1, -1]])])
    assert trie.tokens.tolist() == [1, 6, 2, 5, 3, 4]
    assert trie.parents.tolist() == [-1, -1, 0, 0, 2, 2]
    assert trie.depths.tolist() == [1, 1, 2, 2, 3, 3]
    assert trie.weights.tolist() == [3, 1, 2, 1, 1, 1]
    assert trie.sources.tolist() == [1] * 6
    for a in (trie.tokens, trie.parents, trie.depths):
        assert a.dtype == np.int64
    assert trie.weights.dtype == np.float64 and trie.sources.dtype == np.uint8


def test_sources_merge_with_weights_and_bits():
    ds = retrieved([[1, 2], [1, 3], [4, -1]], bit=1, weight=1.0)
    ctx = retrieved([[1, 2], [7, 8]], bit=2, weight=2.5)
    trie = build_trie([ds, ctx])
    got = {p: (float(w), int(s)) for p, w, s in zip(prefixes(trie), trie.weights, trie.sources)}
    assert got == {
        (1,): (4.5, 3),
        (4,): (1.0, 1),
        (7,): (2.5, 2),
        (1, 2): (3.5, 3),
        (1, 3): (1.0, 1),
        (7, 8): (2.5, 2),
    }


def test_empty_inputs():
    assert len(build_trie([])) == 0
    assert len(build_trie([Retrieved.empty(1, 5)])) == 0
    assert len(build_trie([retrieved([[-1, -1]])])) == 0
    assert select_top_c(build_trie([]), 8).tolist() == []
    assert len(subtree(build_trie([]), [])) == 0


def check_bfs(trie: Trie) -> None:
    n = len(trie)
    keys = [(int(trie.depths[i]), int(trie.parents[i]), int(trie.tokens[i])) for i in range(n)]
    assert keys == sorted(keys), "BFS order: by depth, then parent, then token"
    assert len(set(prefixes(trie))) == n, "no duplicate nodes"
    for i in range(n):
        p = int(trie.parents[i])
        assert p < i
        assert trie.depths[i] == (1 if p < 0 else trie.depths[p] + 1)
        if p >= 0:
            assert trie.weights[p] >= trie.weights[i]
            assert trie.sources[p] & trie.sources[i] == trie.sources[i]


def random_rows(rng, k, m, vocab):
    rows = rng.integers(0, vocab, (k, m))
    cut = rng.integers(0, m + 1, k)  # pad from a random column on
    rows[np.arange(m)[None, :] >= cut[:, None]] = -1
    return rows


@pytest.mark.parametrize("seed", range(15))
def test_trie_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 7))
    parts = []
    for bit in (1, 2):
        if rng.random() < 0.8:
            rows = random_rows(rng, int(rng.integers(0, 60)), m, int(rng.integers(1, 5)))
            if rng.random() < 0.5:  # sorted input (as from a suffix array) and shuffled input
                rows = rows[np.lexsort(np.where(rows < 0, 10**9, rows).T[::-1])]
            parts.append((rows, bit, float(rng.choice([0.0, 0.3, 1.0, 2.0]))))
    trie = build_trie([retrieved(r, b, w) for r, b, w in parts if len(r)])
    expect = brute_trie(parts)
    got = {p: (float(w), int(s)) for p, w, s in zip(prefixes(trie), trie.weights, trie.sources)}
    assert set(got) == set(expect)
    for p, (w, s) in expect.items():
        assert got[p][0] == pytest.approx(w) and got[p][1] == s
    check_bfs(trie)
    # The row order does not matter.
    shuffled = [(r[rng.permutation(len(r))], b, w) for r, b, w in parts]
    again = build_trie([retrieved(r, b, w) for r, b, w in shuffled if len(r)])
    assert np.array_equal(again.tokens, trie.tokens) and np.array_equal(again.parents, trie.parents)


def brute_top_c(trie: Trie, c: int) -> list[int]:
    order = sorted(range(len(trie)), key=lambda i: (-trie.weights[i], int(trie.depths[i]), i))
    return sorted(order[:c])


@pytest.mark.parametrize("seed", range(15))
def test_top_c_exact_budget_connected_deterministic(seed):
    rng = np.random.default_rng(1000 + seed)
    m = int(rng.integers(1, 8))
    parts = [retrieved(random_rows(rng, int(rng.integers(1, 200)), m, int(rng.integers(1, 4))), 1, 1.0)]
    if seed % 2:
        parts.append(retrieved(random_rows(rng, int(rng.integers(1, 30)), m, 4), 2, float(rng.choice([0.0, 0.7, 3.0]))))
    trie = build_trie(parts)
    for c in (0, 1, 2, 3, 5, 9, 16, 64, len(trie), len(trie) + 5):
        idx = select_top_c(trie, c)
        assert idx.tolist() == brute_top_c(trie, c)
        assert len(idx) == min(c, len(trie))
        chosen = set(idx.tolist())
        assert all(int(trie.parents[i]) in chosen or trie.parents[i] < 0 for i in chosen)
        assert np.array_equal(idx, select_top_c(trie, c))


def test_top_c_ties_prefer_shallow_then_bfs_order():
    # Every node has weight 1: the budget goes breadth-first.
    trie = build_trie([retrieved([[1, 2, 3], [4, 5, 6], [7, 8, 9]])])
    assert trie.tokens[select_top_c(trie, 4)].tolist() == [1, 4, 7, 2]
    with pytest.raises(ValueError):
        select_top_c(trie, -1)


def test_subtree_remaps_parents_and_rejects_gaps():
    trie = build_trie([retrieved([[1, 2, 3], [1, 2, 4], [1, 5, -1], [6, -1, -1]])])
    # nodes: 0:1 1:6 2:1-2 3:1-5 4:1-2-3 5:1-2-4
    sub = subtree(trie, [0, 2, 5])
    assert sub.tokens.tolist() == [1, 2, 4]
    assert sub.parents.tolist() == [-1, 0, 1]
    assert sub.depths.tolist() == [1, 2, 3]
    assert sub.weights.tolist() == [3, 2, 1]
    with pytest.raises(ValueError):
        subtree(trie, [0, 4])  # 1-2-3 without its parent 1-2
    with pytest.raises(IndexError):
        subtree(trie, [0, 99])
