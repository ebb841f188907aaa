"""The draft tree's labels sit where no edge runs through them, on a phone's plot and a
laptop's, and its row numbers inside their nodes (rest_core.ui.tree_places, drawn by rest_core.ui.trie_view)."""

from __future__ import annotations

from html import unescape

import numpy as np

from rest_core.decode.events import SOURCE_DATASTORE
from rest_core.drafting.trie import Trie
from rest_core.ui import tree_places, trie_view
from tests.ui.test_render import ByteTokenizer, event

TOK = ByteTokenizer()


class Words:
    """A tokenizer of whole words: id i is WORDS[i]."""

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(WORDS[int(i)] for i in ids)


# 12 (phone): the tokens the step drafted, as long as the real ones
WORDS = ["\n", "{", "from", "import", " py", " uuid", "d", "\n", "antic", "\n", " import", "from", " Base"]
WORDS += [" py", "Model", ",", " argparse", "x", "y", "z"]


def step(parents: list[int], accepted: list[int], drafted: int, words: bool = False):
    """A step whose first `drafted` trie nodes (breadth first) are the draft, `accepted` walked;
    tokens "a", "b", ... or, with `words`, WORDS (the model's own token: " argparse")."""
    n = len(parents)
    depths = np.zeros(n, dtype=np.int64)
    for i, p in enumerate(parents):
        depths[i] = 1 if p < 0 else depths[p] + 1
    weights = np.array([10.0 / (1 + d) + (0.5 if i in accepted else 0) for i, d in enumerate(depths)])
    tokens = np.arange(n, dtype=np.int64) + (0 if words else ord("a"))
    trie = Trie(tokens, np.array(parents), depths, weights, np.full(n, SOURCE_DATASTORE, dtype=np.uint8))
    k = drafted
    draft = Trie(tokens[:k], np.array(parents[:k]), depths[:k], weights[:k], trie.sources[:k])
    return event(
        1,
        [int(tokens[a]) for a in accepted] + [16 if words else ord("Z")],
        (SOURCE_DATASTORE,) * len(accepted) + (0,),
        trie=trie,
        draft=draft,
        draft_idx=range(k),
        accepted=tuple(accepted),
    )


# 12 (phone): three branches under the first drafted node, two long chains; 03: four branches
PHONE = [-1, 0, 0, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 13, 12]
STEPS = (
    ([-1, 0, 0, -1, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 14, 13], [0, 2], 16),
    ([-1, -1, 0, 0, 0, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13], [0, 2, 6, 10], 15),
)


def _edges(fig) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    out = []
    for t in fig.data:
        if t.mode != "lines" or t.x is None:
            continue
        pts = list(zip(t.x, t.y))
        out += [(p, q) for p, q in zip(pts, pts[1:]) if None not in p and None not in q]
    return out


def _boxes(fig, trace, scale, width_of) -> list[tuple[float, float, float, float]]:
    lo, hi = fig.layout.yaxis.range
    x0, x1 = fig.layout.xaxis.range
    places = [trace.textposition] * len(trace.x) if isinstance(trace.textposition, str) else trace.textposition
    sizes = trace.marker.size if not isinstance(trace.marker.size, (int, float)) else [trace.marker.size] * len(trace.x)
    w, h = scale
    return [
        tree_places.text_box(p, (x - x0) * w / (x1 - x0), (hi - y) * h / (hi - lo), s, width_of(text), font)
        for x, y, p, s, text, font in zip(
            trace.x, trace.y, places, sizes, trace.text, [trace.textfont.size] * len(trace.x)
        )
    ]


def scales(ev, tok, fit=trie_view.PHONE) -> list[tuple[float, float]]:
    """The plot sizes in px a set of labels shows at: its widths, at the figure's plot height."""
    drawing = trie_view._TrieDrawing(ev, trie_view.tree_view(ev), tok)
    return [(w, drawing.plot_px()) for w in fit.widths]


def _crossed(fig, trace, width_of, sizes) -> list[str]:
    lo, hi = fig.layout.yaxis.range
    x0, x1 = fig.layout.xaxis.range
    bad = []
    for scale in sizes:
        w, h = scale

        def px(p, w=w, h=h):
            return ((p[0] - x0) * w / (x1 - x0), (hi - p[1]) * h / (hi - lo))

        for box, text in zip(_boxes(fig, trace, scale, width_of), trace.text):
            if any(tree_places.segment_meets(box, px(p), px(q)) for p, q in _edges(fig)):
                bad.append(f"{text} at {scale}")
    return bad


def test_no_label_lies_on_another_on_a_phone():
    """12 (phone): "ant…" and "·Base" ran together once "·Base" moved off its edge (and a shift
    pushed its neighbours along: "d an…" read "dan…"): a label may have a line under its halo,
    never another label on it or within 2 px of it."""
    ev = step(PHONE, [0, 3], 16, words=True)
    fig = trie_view.trie_figure(ev, Words())
    phone = [
        t
        for t in fig.data
        if t.mode == "markers+text" and t.texttemplate != " " and len(t.x) and t.name != trie_view.WIDE_LABELS
    ]
    wide = [t for t in fig.data if t.name == trie_view.WIDE_LABELS]
    for texts, fit in ((phone, trie_view.PHONE), (wide, trie_view.WIDE)):
        for scale in scales(ev, Words(), fit):
            boxes = []
            for t in texts:
                width = lambda s, fit=fit: len(unescape(s)) * fit.char_px  # noqa: E731
                boxes += [b for b, s in zip(_boxes(fig, t, scale, width), t.text) if s]
            met = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if tree_places.boxes_meet(a, b, 2.0)]
            assert not met, (fit, scale, met)


BOLD_DIGIT = 0.62  # a bold digit's width, in font sizes


def test_every_row_number_is_written_inside_its_own_node():
    """screens12 (03, 06, 07, 12): row numbers at a corner of their node sat beside neighbours'
    labels and nodes ("8 5", "4 4", "9" floating between rows) and could not be paired with
    their node. Each is written inside its drafted node, centred, and the node is big enough
    for its digits."""
    for parents, accepted, drafted in STEPS:
        fig = trie_view.trie_figure(step(parents, accepted, drafted), TOK)
        rows = next(t for t in fig.data if t.name == trie_view.ROW_TRACE)
        assert rows.mode == "text" and rows.textposition == "middle center" and len(rows.text) == drafted
        size = {}
        for t in fig.data:
            if t.mode == "markers+text" and t.name != "model's own token":
                sizes = t.marker.size if not isinstance(t.marker.size, (int, float)) else [t.marker.size] * len(t.x)
                size.update({(x, y): s for x, y, s in zip(t.x, t.y, sizes)})
        for x, y, text in zip(rows.x, rows.y, rows.text):
            digits = len(text.replace("<b>", "").replace("</b>", ""))
            assert (x, y) in size, (x, y)  # on a node, not beside one
            assert digits * BOLD_DIGIT * rows.textfont.size <= size[(x, y)] - 3, (text, size[(x, y)])


def test_no_label_is_crossed_by_an_edge_and_every_label_stays_above_its_node():
    """12 (phone): the steep edge from a branching node to its lowest child ran through that
    child's label ("(" crossed); a label shifts left or right above its node to clear it."""
    for parents, accepted, drafted in STEPS:
        ev = step(parents, accepted, drafted)
        fig = trie_view.trie_figure(ev, TOK)
        labelled = [
            t for t in fig.data if t.mode == "markers+text" and t.name != trie_view.ROW_TRACE and t.texttemplate != " "
        ]
        for t in labelled:
            fit = trie_view.WIDE if t.name == trie_view.WIDE_LABELS else trie_view.PHONE
            places = [t.textposition] if isinstance(t.textposition, str) else list(t.textposition)
            assert all(p.startswith("top ") for p in places)
            crossed = _crossed(fig, t, lambda s, fit=fit: len(unescape(s)) * fit.char_px, scales(ev, TOK, fit))
            assert not crossed, (t.name, crossed)


def test_a_segment_through_a_box_meets_it_and_one_beside_it_does_not():
    box = (10.0, 10.0, 20.0, 20.0)
    assert tree_places.segment_meets(box, (0.0, 15.0), (30.0, 15.0))  # straight through
    assert tree_places.segment_meets(box, (0.0, 0.0), (30.0, 30.0))  # corner to corner
    assert not tree_places.segment_meets(box, (0.0, 25.0), (30.0, 25.0))  # below it
    assert not tree_places.segment_meets(box, (0.0, 0.0), (8.0, 8.0))  # stops short


def test_the_key_says_what_the_numbers_are_without_a_hover():
    """Round 2: the node numbers were explained only in a folded text and in the hover, which a
    phone has not; the figure's key has a line for them whenever it draws some."""
    parents, accepted, drafted = STEPS[0]
    fig = trie_view.trie_figure(step(parents, accepted, drafted), TOK)
    key = [unescape(t.name) for t in fig.data if t.showlegend]
    assert "<b>1, 2, …</b>: its row" in key
    assert key[-1].startswith("<b>1, 2")  # after the marks and the sources' colours


# 06_step_1 (phone): a chat prompt drafted sixteen deep, three words beside it at depth 1
CHAT = ["<|im_start|>", "You", " are", " a", " helpful", " assistant", ".", "\n", "8", "5", " the", " question"]
CHAT += [":", " 4", "4", " answer", " is", " The", " In", " user"]


class Chat:
    """A tokenizer of CHAT's words: id i is CHAT[i]."""

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(CHAT[int(i)] for i in ids)


def test_every_drafted_node_of_a_deep_chain_keeps_a_label_clear_of_every_other_text():
    """06_step_1, 06_step_3, 12 (phone): a chain sixteen deep left a column 17 px wide, every
    word was cut to one character and "…" and then dropped ("You", nodes 11, 13, 15 bare).
    Neighbours in the row take turns above and below, so each word keeps two columns: at least
    two characters and "…", and no text lies on another, a node or the plot's edge anywhere."""
    for siblings, accepted in ((0, [0, 1, 2]), (1, [0, 1, 2]), (3, [0, 1, 2])):
        parents = [-1] + list(range(15)) + [-1] * siblings
        ev = step(parents, accepted, len(parents), words=True)
        drawing = trie_view._TrieDrawing(ev, trie_view.tree_view(ev), Chat())
        said = [k for k, st in enumerate(drawing.view.states) if st != "retrieved"]
        assert len(said) == len(parents)
        for k in said:
            text = unescape(drawing.labels[k])
            full = trie_view.punctuation(trie_view.visible(CHAT[int(ev.trie.tokens[drawing.view.nodes[k]])], 99))
            assert text == full or (len(text) >= 3 and text.endswith("…")), (k, text)
        assert drawing.texts.overlaps == 0, (siblings, accepted)
        assert {p.split()[0] for p in drawing.texts.label_places[:16]} == {"top", "bottom"}  # by turns
