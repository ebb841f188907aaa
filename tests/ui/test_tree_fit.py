"""The draft tree fits its screen: a laptop's plot gets its own, larger and longer labels while a
phone keeps those cut for its column (rest_core.ui.tree_text, assets/app.css); the key is short
and names only what is drawn (rest_core.ui.tree_legend); the figure is as tall as its rows."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

from rest_core.ui import tree_labels, tree_legend, trie_view
from tests.ui.test_tree_places import PHONE, STEPS, TOK, Chat, Words, step
from tests.ui.test_tree_reconciled import wide_step

CSS = (Path(__file__).resolve().parents[2] / "assets" / "app.css").read_text()


def drawing(ev, tok=TOK):
    return trie_view._TrieDrawing(ev, trie_view.tree_view(ev), tok)


def test_a_laptop_gets_larger_longer_labels_and_a_phone_keeps_its_own():
    """screens16 (03, 06): on a laptop the labels were cut to a phone's column, in 12 px type."""
    ev = step(PHONE, [0, 3], 16, words=True)
    d = drawing(ev, Words())
    assert tree_labels.WIDE.font >= 14 > tree_labels.PHONE.font
    assert tree_labels.WIDE.plot_px > tree_labels.PHONE.plot_px
    said = [k for k in range(len(d.view.nodes)) if d.said[k]]
    assert all(len(unescape(d.wide.labels[k])) >= len(unescape(d.phone.labels[k])) for k in said)
    chain = drawing(step([-1] + list(range(15)), [0, 1, 2], 16, words=True), Chat())  # sixteen deep: cut on a phone
    wide, phone = ([len(unescape(s.labels[k])) for k in range(16)] for s in (chain.wide, chain.phone))
    assert all(w >= p for w, p in zip(wide, phone)) and sum(wide) > sum(phone)
    fig = trie_view.trie_figure(ev, Words())
    [trace] = [t for t in fig.data if t.name == trie_view.WIDE_LABELS]
    assert trace.textfont.size == tree_labels.WIDE.font and trace.hoverinfo == "skip"
    assert trace.marker.color == "rgba(0,0,0,0)"  # its points are the nodes', unseen
    assert [unescape(t) for t in trace.text][: len(said)] == [unescape(d.wide.labels[k]) for k in said]
    assert unescape(trace.text[len(said)]) == unescape(d.wide.star)  # then the model's token's
    # each label in its node's colour, as the phone's
    node_colour = {}
    for t in fig.data:
        if t.mode == "markers+text" and t.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS) and t.x:
            node_colour.update({(x, y): t.textfont.color for x, y in zip(t.x, t.y)})
    assert [node_colour[(x, y)] for x, y in zip(trace.x, trace.y)] == list(trace.textfont.color)


def test_the_page_shows_one_set_of_labels_by_the_figures_width():
    """The CSS keys on the traces' order (Gradio drops their uids): the wide labels last, the row
    numbers just before them, and every other trace's text a phone's label."""
    for ev in (step(*STEPS[0]), step(*STEPS[1]), wide_step(15)):
        data = trie_view.trie_figure(ev, TOK).data
        assert data[-1].name == trie_view.WIDE_LABELS and data[-2].name == trie_view.ROW_TRACE
        assert all(t.textfont.size in (None, trie_view.LABEL_PX) for t in data[:-2] if t.mode and "text" in t.mode)
    assert f"@container (min-width: {tree_labels.WIDE_FIGURE_PX}px)" in CSS
    assert ":is(#trie, #teach-trie) .js-plotly-plot { container-type: inline-size; }" in CSS
    assert ":is(#trie, #teach-trie) .scatterlayer > g.trace:last-child { display: none; }" in CSS
    assert "g.trace:not(:nth-last-child(-n+2)) g.text { display: none; }" in CSS


def test_the_figure_is_as_tall_as_its_rows():
    """screens16: a tree of one or two rows sat in a 620 px panel, mostly white."""
    small = trie_view.trie_figure(step([-1, -1], [0], 1, words=True), Words())
    big = trie_view.trie_figure(wide_step(15), TOK)
    assert small.layout.height < 360 < 500 < big.layout.height
    for fig, ev, tok in ((small, step([-1, -1], [0], 1, words=True), Words()), (big, wide_step(15), TOK)):
        d = drawing(ev, tok)
        lo, hi = fig.layout.yaxis.range
        assert hi - lo >= trie_view.MIN_SPAN  # a tree of one row is not squeezed into a strip
        plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b - tree_legend.key_px(d.key)
        assert plot / (hi - lo) >= trie_view.ROW_STEP_PX - 0.1  # each row its room on a phone
        assert round(1 - fig.layout.title.y, 6) == round(trie_view.TITLE_TOP / fig.layout.height, 6)


def test_labels_under_a_row_set_the_rows_further_apart():
    """A deep chain's labels take turns above and below: a label under one row and one over the
    next both fit between them, so neither is cut for the other (screens16, 03: "ro…", "↵…")."""
    chain = step([-1] + list(range(15)), [0, 1, 2], 16, words=True)
    d = drawing(chain, Words())
    assert d.below and d.plot_px() / (d.y_range()[1] - d.y_range()[0]) == trie_view.ROW_STEP_BELOW_PX
    assert trie_view.ROW_STEP_BELOW_PX >= 2 * (15 / 2 / 0.8 + 1) + 1.92 * tree_labels.WIDE.font + 3
    assert not drawing(wide_step(15)).below
    d = drawing(step(PHONE, [0, 3], 16, words=True), Words())  # branches of words, under and over each other
    assert d.below and all("…" not in unescape(d.phone.labels[k]) for k in range(len(d.view.nodes)) if d.said[k])
    # rows that far apart: a label under one and one over the next do not meet; closer they do
    assert not tree_labels.overlap(0, True, -1, False, 14, trie_view.ROW_STEP_BELOW_PX)
    assert tree_labels.overlap(0, True, -1, False, 14, trie_view.ROW_STEP_PX)
    assert tree_labels.overlap(0, True, -1, False, 14, None) and not tree_labels.overlap(0, False, -1, False, 14, None)


def test_the_key_is_short_and_counts_its_rows_as_plotly_lays_them():
    """screens16: nine to eleven entries in one long column. Each entry is a word or two, so a
    phone's key has two columns and a laptop's three or four."""
    ev = step(PHONE, [0, 3], 16, words=True)
    entries = drawing(ev, Words()).key
    words = [re.sub(r"<[^>]+>", "", n) for n, _ in entries]
    assert all(len(w) <= 17 for w in words), words
    assert tree_legend.key_rows(entries) == -(-len(entries) // 2)  # two columns on a phone
    assert tree_legend.key_rows(entries, 480) == -(-len(entries) // 3)
    assert tree_legend.key_rows(entries[:2]) == 1  # all in one row where they fit
    assert tree_legend.key_rows([]) == 0
    long = [("a store with a long name", {})] + entries
    assert tree_legend.key_rows(long) == len(long)  # one column of the widest entry
    fig = trie_view.trie_figure(ev, Words())
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.font.size == tree_legend.KEY_FONT
