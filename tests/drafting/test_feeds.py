"""feeds: the continuations behind a step's heaviest first-level trie nodes, checked by hand and
against counting the rows directly."""

from __future__ import annotations

from collections import Counter

import numpy as np

from rest_core.drafting.draft import build_draft
from rest_core.drafting.feeds import Example, feeds
from rest_core.drafting.source import Retrieved
from rest_core.sources import SOURCE_CONTEXT, SOURCE_DATASTORE


def rows(*conts: list[int]) -> np.ndarray:
    m = max(len(c) for c in conts)
    return np.array([c + [-1] * (m - len(c)) for c in conts], dtype=np.int64)


def test_a_hand_worked_step():
    # the store: 3 continuations start with 5 (two of them 5 6 7), 2 with 9, 1 with 4;
    # the context: 2 start with 9, so 9 outweighs 5 in the merged trie (2/2 against 3/6)
    store = Retrieved(SOURCE_DATASTORE, 2, (1, 2), 6, rows([4, 1], [5, 6, 7], [5, 6, 7], [5, 8], [9, 1], [9, 2]))
    context = Retrieved(SOURCE_CONTEXT, 2, (1, 2), 2, rows([9, 3], [9, 3]))
    draft = build_draft([store, context], c=4)
    got = feeds([store, context], draft.trie, nodes=2, examples=2, length=2)
    assert [f.token for f in got] == [9, 5]
    nine, five = got
    assert nine.counts == ((SOURCE_DATASTORE, 2, 6), (SOURCE_CONTEXT, 2, 2))
    assert (nine.fed, nine.retrieved) == (4, 8)
    assert nine.examples == (Example((9, 3), 2, False), Example((9, 1), 1, False))
    assert five.counts == ((SOURCE_DATASTORE, 3, 6), (SOURCE_CONTEXT, 0, 2))
    # cut to 2 tokens: 5 6 stands for both 5 6 7, which go on
    assert five.examples == (Example((5, 6), 2, True), Example((5, 8), 1, False))
    assert nine.weight == draft.trie.weights[draft.trie.tokens == 9][0]


def test_counts_and_examples_match_the_rows_themselves():
    rng = np.random.default_rng(3)
    conts = rng.integers(0, 6, (300, 6))
    conts[rng.random(300) < 0.2, 3:] = -1  # some end early (a separator)
    store = Retrieved(SOURCE_DATASTORE, 3, (1, 2, 3), 900, conts)
    draft = build_draft([store], c=8)
    got = feeds([store], draft.trie, nodes=3, examples=3, length=4)
    firsts = Counter(int(t) for t in conts[:, 0])
    assert [f.token for f in got] == [t for t, _ in sorted(firsts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    for f in got:
        assert f.counts == ((SOURCE_DATASTORE, firsts[f.token], 300),)
        prefixes = Counter(tuple(int(t) for t in r[:4] if t >= 0) for r in conts if r[0] == f.token)
        assert [e.count for e in f.examples] == sorted(prefixes.values(), reverse=True)[:3]
        for e in f.examples:
            assert prefixes[e.tokens] == e.count and e.tokens[0] == f.token
            assert e.more == any(r[4] >= 0 for r in conts if tuple(int(t) for t in r[:4] if t >= 0) == e.tokens)


def test_nothing_retrieved_feeds_nothing():
    empty = Retrieved.empty(SOURCE_DATASTORE, 4)
    assert feeds([empty], None) == ()
    assert feeds([], build_draft([], c=2).trie) == ()
