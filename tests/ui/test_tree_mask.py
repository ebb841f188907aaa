"""The tree mask figure's axes: every column's tick under its own column, a tree column named as
its row (rest_core.ui.tree_mask)."""

from __future__ import annotations

from rest_core.drafting.draft import build_draft
from rest_core.drafting.source import Retrieved
from rest_core.sources import SOURCE_DATASTORE
from rest_core.ui import tree_mask
from tests.ui.test_feeds_view import TOK, ids, rows
from tests.ui.test_render import event


def _view():
    store = Retrieved(SOURCE_DATASTORE, 3, (1, 2, 3), 4, rows("up", "up", "get"))
    draft = build_draft([store], c=3)
    ev = event(0, [ord("u")], [0], trie=draft.trie, draft=draft.nodes, draft_idx=draft.idx)
    return tree_mask.mask_view(ev, ids("say x y z"), TOK, n_context=4)


def test_a_tree_column_is_ticked_as_its_row_with_its_own_position_id():
    """Issue: step 1's column tick read "40" above "4:root" while the row said "root (41)", and a
    stray "51" stood past the last column: a two-line tick, turned sideways, put each position id
    beside the next column."""
    view = _view()
    fig = tree_mask.mask_figure(view)
    x, y = list(fig.data[0].x), list(fig.data[0].y)
    assert x[0] == tree_mask.earlier_column(view) == "… (0–3)"  # the cached positions not drawn
    x = x[1:]
    k = view.n_context
    assert x[k:] == y  # the root's column reads "root … (8)" as its row does
    assert y[0].startswith("root ") and y[0].endswith(f"({len(ids('say x y z')) - 1})")
    for tick, p in zip(x, view.col_positions):  # one line each, ending in its own column's position id
        assert "<br>" not in tick and tick.endswith(f"({p})")
    assert len(set(x)) == len(x)  # categories stay apart
