"""The tree mask figure's axes: every column's tick under its own column, a tree column named as
its row (rest_core.ui.tree_mask)."""

from __future__ import annotations

from dataclasses import replace
from html import unescape

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
    # a tree column is ticked by its row alone, as its row label starts ("2: …") and the table numbers it
    assert x[k:] == ["root"] + [str(i) for i in range(1, len(y))]
    assert y[0].startswith("root ") and y[0].endswith(f"({len(ids('say x y z')) - 1})")
    assert all(y[i].startswith(f"{i}: ") for i in range(1, len(y)))
    for tick, p in zip(x[:k], view.col_positions):  # one line each, ending in its own column's position id
        assert "<br>" not in tick and tick.endswith(f"({p})") and len(tick) <= tree_mask.CONTEXT_CHARS + 3 + len(str(p))
    assert len(set(x)) == len(x)  # categories stay apart


def test_phone_mask_ticks_every_column_readably_none_clipped():
    """12 (phone): column ticks "9: antic (50" were clipped at the top, only every other column
    was ticked, and the text was about 7 px."""
    fig = tree_mask.mask_figure(_view())
    ax = fig.layout.xaxis
    assert ax.dtick == 1 and ax.automargin and fig.layout.yaxis.automargin
    assert ax.tickfont.size >= 11 and fig.layout.yaxis.tickfont.size >= 11
    assert max(len(t) for t in fig.data[0].x) <= 12


def test_every_column_tick_is_short_enough_to_stand_sideways_on_a_phone():
    """Round 2, 12 (phone): the cached columns' ticks "… (0–40)", "ass (41)" ran into each other
    turned sideways (about 10 px a column at c = 16). A tick shows at most four characters: a
    cached token without its position id, "…", "root", the row numbers; the key names the cached
    positions, the hover the whole category."""
    view = _view()
    fig = tree_mask.mask_figure(view)
    ax = fig.layout.xaxis
    shown = list(ax.ticktext)
    assert list(ax.tickvals) == list(fig.data[0].x)  # every column keeps its tick
    assert all(1 <= len(unescape(t)) <= tree_mask.SHOWN_CHARS for t in shown), shown
    k = view.n_context
    cut = [lab if len(lab) <= 4 else lab[:3] + "…" for lab in view.col_labels[:k]]  # "(im…", not "(im_"
    assert shown[0] == "…" and [unescape(t) for t in shown[1 : 1 + k]] == cut
    assert shown[1 + k :] == ["root"] + [str(i) for i in range(1, len(fig.data[0].y))]
    context = next(t for t in fig.data[1:] if t.name.startswith("cached context"))
    assert context.name == f"cached context: positions 0–{view.col_positions[k - 1]}"
    # a long cached token ("(im_start)") is cut with "…", not to a stub that reads as a token
    long = replace(view, col_labels=("(im_start)",) + view.col_labels[1:])
    assert tree_mask.shown_ticks(long, tree_mask.column_ticks(long))[0] == "(im…"
