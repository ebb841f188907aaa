"""The draft tree draws drafted siblings in their verify-table row order, so the numbers inside
the nodes read downwards in every column (rest_core.ui.tree_layout), whatever their weights."""

from __future__ import annotations

import numpy as np

from rest_core.decode.events import SOURCE_DATASTORE
from rest_core.drafting.trie import Trie
from rest_core.ui import tree_layout, trie_view
from tests.ui.test_render import event
from tests.ui.test_tree_reconciled import wide_step


def light_first_step():
    """Rows 1, 2, 3 at the root (weights rising with the row: a weight order would draw 3 on top),
    rows 4, 5 under 1 and row 6 under 3; a retrieved-only sibling of 4 and 5, heavier than both."""
    parents = [-1, -1, -1, 0, 0, 2, 0]
    weights = [1.0, 2.0, 3.0, 0.2, 0.4, 1.5, 0.9]
    n = len(parents)
    depths = np.array([1 if p < 0 else 2 for p in parents], dtype=np.int64)
    tokens = np.arange(ord("a"), ord("a") + n, dtype=np.int64)
    trie = Trie(tokens, np.array(parents), depths, np.array(weights), np.full(n, SOURCE_DATASTORE, dtype=np.uint8))
    drafted = 6
    draft = Trie(
        tokens[:drafted], np.array(parents[:drafted]), depths[:drafted], trie.weights[:drafted], trie.sources[:drafted]
    )
    return event(
        1, [ord("a"), ord("Z")], (SOURCE_DATASTORE, 0), trie=trie, draft=draft, draft_idx=range(drafted), accepted=(0,)
    )


def test_row_numbers_read_downwards_in_every_column():
    """screens16 (03, 06): siblings were drawn heaviest on top, so a column read "1, 8, 6, 10, 2"."""
    for ev in (light_first_step(), wide_step(15)):
        view = trie_view.tree_view(ev)
        for depth in set(view.x.tolist()):
            column = [k for k in range(len(view.nodes)) if view.x[k] == depth and view.draft_rows[k]]
            top_down = sorted(column, key=lambda k: -view.y[k])
            assert [view.draft_rows[k] for k in top_down] == sorted(view.draft_rows[k] for k in column)
    view = trie_view.tree_view(light_first_step())
    hollow = view.nodes.tolist().index(6)
    under_a = [k for k in range(len(view.nodes)) if view.parent_pos[k] == 0]
    assert min(view.y[k] for k in under_a) == view.y[hollow]  # retrieved-only siblings below the drafted ones


def test_a_crowded_level_still_folds_its_lightest_siblings():
    """Drawn in row order, a crowded level still gives up its lightest siblings to "+N more"."""
    trie = wide_step(15).trie
    rising = Trie(trie.tokens, trie.parents, trie.depths, np.linspace(1, 2, 15), trie.sources)
    from dataclasses import replace

    ev = replace(wide_step(15), trie=rising, draft=rising)
    view = trie_view.tree_view(ev)
    [(_, _, _, folded)] = view.folds
    assert set(folded) == set(range(len(folded)))  # rows 1, 2, ...: the lightest here
    assert view.rows <= tree_layout.MAX_ROWS
