"""The acceptance model: features on a hand-built trie, path probabilities, fitting, online
learning and the shipped prior's behaviour on the cases the issue names."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.budget.acceptance import (
    FEATURE_NAMES,
    PRIOR_PATH,
    AcceptanceModel,
    NodeFeatures,
    SourceMatch,
    _sigmoid,
    fit_logistic,
    node_features,
    observable,
    path_probabilities,
    reliability,
)
from rest_core.drafting.source import Retrieved
from rest_core.drafting.trie import build_trie

DS, CX = 1, 2


def _trie():
    """Datastore: 4 continuations [5 6], [5 6], [5 7], [8]; context: 1 continuation [5 6 9]."""
    ds = Retrieved(DS, 2, (1, 2), 4, np.array([[5, 6, -1], [5, 6, -1], [5, 7, -1], [8, -1, -1]]), weight=1 / 4)
    cx = Retrieved(CX, 6, (1, 2, 3, 4, 5, 6), 1, np.array([[5, 6, 9]]), weight=1.0)
    matches = [SourceMatch(DS, 2, 4), SourceMatch(CX, 6, 1)]
    return build_trie([ds, cx]), matches


def test_node_features_on_a_hand_built_trie():
    trie, matches = _trie()
    tokens = trie.tokens.tolist()
    assert tokens == [5, 8, 6, 7, 9]
    f = node_features(trie, matches)
    assert f.mask.tolist() == [3, 1, 3, 1, 2]
    assert f.parent_mask.tolist() == [3, 3, 3, 3, 3]
    assert f.depth.tolist() == [1, 1, 2, 2, 3]
    # weights: 5 -> 3/4 + 1, 8 -> 1/4, 6 -> 2/4 + 1, 7 -> 1/4, 9 -> 1; root 2
    assert f.share == pytest.approx([1.75 / 2, 0.25 / 2, 1.5 / 1.75, 0.25 / 1.75, 1.0 / 1.5])
    # the root's children: every continuation (4 + 1); below, the parent's weight over the
    # heaviest per-continuation weight of its sources (1 for the context)
    assert f.support.tolist() == pytest.approx([5, 5, 1.75, 1.75, 1.5])
    # a source's match counts for the nodes it proposed
    assert f.cx_len.tolist() == [6, 0, 6, 0, 6] and f.ds_occ.tolist() == [4, 4, 4, 4, 0]
    sub = node_features(trie, matches, np.array([2, 4]))
    assert sub.share == pytest.approx(f.share[[2, 4]])
    x = f.design()
    assert x.shape == (5, len(FEATURE_NAMES))
    disagree = FEATURE_NAMES.index("disagree")
    assert x[:, disagree].tolist() == [0, 0, 0, 1, 1]  # depth-2/3 single-source children of a shared parent


def test_path_probabilities_multiply_along_the_path():
    parents = np.array([-1, -1, 0, 0, 2])
    q = np.array([0.5, 0.2, 0.8, 0.1, 0.5])
    assert path_probabilities(parents, q) == pytest.approx([0.5, 0.2, 0.4, 0.05, 0.2])


def test_observable_outcomes():
    parents = np.array([-1, -1, 0, 0, 2, 1])
    rows, outcome = observable(parents, (0, 2))
    # root children 0, 1; children of accepted 0: 2, 3; child of accepted 2: 4; node 5's parent was rejected
    assert rows.tolist() == [0, 1, 2, 3, 4]
    assert outcome.tolist() == [True, False, True, False, False]


def test_fit_logistic_recovers_weights():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(20000), rng.normal(size=20000), rng.normal(size=20000)])
    w_true = np.array([-0.5, 2.0, -1.0])
    y = rng.random(20000) < _sigmoid(x @ w_true)
    assert fit_logistic(x, y, l2=0.0) == pytest.approx(w_true, abs=0.1)


def test_online_learning_follows_outcomes():
    trie, matches = _trie()
    f = node_features(trie, matches)
    model = AcceptanceModel(np.zeros(len(FEATURE_NAMES)))
    before = model.conditional(f)
    for _ in range(20):
        model.learn(f, np.zeros(f.n, dtype=bool))
    assert np.all(model.conditional(f) < before - 0.2)
    for _ in range(60):
        model.learn(f, np.ones(f.n, dtype=bool))
    assert np.all(model.conditional(f) > before)
    model.reset()
    assert model.conditional(f) == pytest.approx(before)


def test_wrong_weight_count_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="needs"):
        AcceptanceModel([0.0, 1.0])
    bad = tmp_path / "prior.json"
    bad.write_text('{"features": ["bias"], "weights": [0.0]}')
    with pytest.raises(ValueError, match="refit"):
        AcceptanceModel.load(bad)


def test_reliability_bins():
    rows = reliability(np.array([0.05, 0.05, 0.95, 0.99]), np.array([0, 1, 1, 1]))
    assert [(r["n"], r["observed"]) for r in rows] == [(2, 0.5), (2, 1.0)]


def _one(mask, share, support, depth, ds=(0, 0), cx=(0, 0), parent_mask=3) -> NodeFeatures:
    a = lambda v, dt=np.int64: np.array([v], dtype=dt)  # noqa: E731
    return NodeFeatures(
        mask=a(mask, np.uint8),
        parent_mask=a(parent_mask, np.uint8),
        depth=a(depth),
        share=a(share, np.float64),
        support=a(support, np.float64),
        ds_len=a(ds[0]),
        ds_occ=a(ds[1]),
        cx_len=a(cx[0]),
        cx_occ=a(cx[1]),
    )


def test_shipped_prior_tells_a_long_self_match_from_a_weak_store_match():
    model = AcceptanceModel.load(PRIOR_PATH)
    # A 12-token context match that continues one way: deep in its chain, still likely.
    long_self = model.conditional(_one(CX, 1.0, 1, 4, cx=(12, 1), parent_mask=CX))[0]
    # One of several continuations of a 2-token match among 5000 occurrences.
    weak = model.conditional(_one(DS, 0.2, 5000, 1, ds=(2, 5000)))[0]
    assert long_self > 0.6
    assert weak < 0.3
    assert long_self > weak + 0.4


def test_several_stores_count_as_datastores_with_their_own_matches():
    # Two stores (bits 1 and 4) propose different first tokens; the second store's match is longer.
    a = Retrieved(1, 2, (1, 2), 3, np.array([[5], [5], [5]]), weight=1 / 3)
    b = Retrieved(4, 5, (1, 2, 3, 4, 5), 1, np.array([[6]]), weight=1.0)
    trie = build_trie([a, b])
    f = node_features(trie, [SourceMatch(1, 2, 3), SourceMatch(4, 5, 1)])
    assert trie.tokens.tolist() == [5, 6]
    assert f.ds_len.tolist() == [2, 5] and f.ds_occ.tolist() == [3, 1]
    x = f.design()
    assert x[:, FEATURE_NAMES.index("context_only")].tolist() == [0, 0]  # both are datastore nodes
    assert x[1, FEATURE_NAMES.index("ds_len")] == pytest.approx(np.log2(6))
