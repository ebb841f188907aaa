"""Issue 29: the draft tree, its key, the verify table and the Accept panel say the same thing.

A hand-made step that ends on an accepted end-of-text token (07 of the screenshots): the walk
accepts "d", "." and EOS; "x" is rejected at the root, "q" under it is off the path, and "\\n"
under the accepted EOS is never checked (the answer ended). Drafted tokens include a quote, as
`."` did in 06 and 07.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape

import numpy as np

from rest_core.decode.events import SOURCE_DATASTORE, MatchInfo
from rest_core.drafting.trie import Trie
from rest_core.ui import answer_view, inspector, phases, style, tree_key, tree_layout, trie_view
from tests.ui.test_render import EOS, ByteTokenizer, event

TOK = ByteTokenizer()


def word(label: str) -> str:
    """A drawn label without its bold row number: "<b>7</b> ↵" -> "↵"."""
    return re.sub(r"^<b>\d+</b> ?", "", label)


def words(trace) -> list[str]:
    return [word(t) for t in trace.text]


QUOTE = 257 + ByteTokenizer.words.index(b'"')


def eos_step():
    # draft nodes (breadth first): 0 d, 1 x (root's children); 2 . (under d), 3 q (under x);
    # 4 EOS (under .), 5 " (under .); 6 \n (under EOS)
    tokens = np.array([ord("d"), ord("x"), ord("."), ord("q"), EOS, QUOTE, ord("\n")], dtype=np.int64)
    parents = np.array([-1, -1, 0, 1, 2, 2, 4], dtype=np.int64)
    depths = np.array([1, 1, 2, 2, 3, 3, 4], dtype=np.int64)
    weights = np.array([6.0, 2.0, 5.0, 1.0, 4.0, 1.0, 3.0])
    sources = np.full(7, SOURCE_DATASTORE, dtype=np.uint8)
    trie = Trie(tokens, parents, depths, weights, sources)
    ev = event(
        3,
        [ord("d"), ord("."), EOS],
        (SOURCE_DATASTORE,) * 3,
        trie=trie,
        draft=trie,
        draft_idx=range(7),
        accepted=(0, 2, 4),
        finished=True,
        matches=[MatchInfo(SOURCE_DATASTORE, 1, (ord("a"),), 9, ((ord("d"), ord(".")),), name="chat")],
    )
    return replace(ev, c=7, row_tokens=(ord("d"), ord("."), ord("\n"), ord("z"), ord("\n"), ord("\n"), ord("\n")))


def test_walk_states_are_one_source_for_tree_table_and_key():
    ev = eos_step()
    states = tree_key.draft_states(ev)
    assert states == ("accepted", "rejected", "accepted", "off the path", "accepted", "rejected", "not checked")
    # the table: the same verdicts, row by row
    assert [c.status for c in phases.row_checks(ev)] == [phases.ROW_STATUS[s] for s in states]
    # the tree: the node under the accepted end of text is faded, not crossed (it was crossed,
    # while the table said the model's token there was the same)
    fig = trie_view.trie_figure(ev, TOK)
    by_name = {t.name: t for t in fig.data if t.name and not t.showlegend}  # the nodes, not the key
    assert words(by_name["not checked"]) == ["↵"]
    assert by_name["not checked"].marker.symbol is None
    assert sorted(words(by_name["drafted, rejected"])) == sorted(["x", '“"”'])
    # the table says why, and the key has the mark
    table = unescape(re.sub(r"<[^>]+>", " ", phases.verify_html(ev, [1, 2, ord("a")], TOK)))
    assert re.search(r"· not checked\s+7 \(parent 5\)\s+↵", table) and "not checked: the answer ended first" in table
    assert "not checked" in tree_key.TREE_LEGEND and "the answer ended" in tree_key.TREE_LEGEND
    assert tree_key.key_name("not checked") in [t.name for t in fig.data if t.showlegend]


def test_accept_panel_follows_from_the_verify_table():
    """07: "accepts 3 draft tokens" but "rows 0, 2, 4": the accepted EOS's row was missing with
    no word why. Now the ✓ rows are named and the last written token's row is explained."""
    ev = eos_step()
    agree = [c.node + 1 for c in phases.row_checks(ev) if c.status == "agree"]
    assert agree == [1, 3, 5]
    keep, drop = phases.kept_rows(ev)
    assert keep == [0, 1, 3] and len(drop) == 8 - 3
    cap = phases.accept_caption(ev, TOK)
    assert "accepts 3 draft tokens, “d.⟨end⟩”: rows 1, 3, 5, the ✓ rows" in cap
    assert (
        "Row 5's token is the last one written" in cap and "KV of rows 0, 1, 3:" in cap and "5 rows are dropped" in cap
    )
    # a step ending on the model's own token keeps every accepted row
    own = replace(
        ev, tokens=(ord("d"), ord("."), ord("z")), token_sources=(SOURCE_DATASTORE,) * 2 + (0,), accepted=(0, 2)
    )
    assert phases.kept_rows(own)[0] == [0, 1, 3]
    assert "last one written" not in phases.accept_caption(own, TOK)


def test_plotly_labels_are_escaped_once_for_plotly():
    """`.&quot;` showed in the tree and the mask: Plotly does not read &quot;."""
    ev = eos_step()
    fig = trie_view.trie_figure(ev, TOK)
    texts = [word(t) for tr in fig.data for t in (tr.text or ()) if t]
    hovers = " ".join(h for tr in fig.data for h in (tr.hovertext or ()))
    assert '“"”' in texts and "&quot;" not in " ".join(texts) + hovers and "&#x27;" not in hovers
    mask = phases.mask_figure(phases.mask_view(ev, [1, 2, ord("a")], TOK))
    ticks = list(mask.data[0].y)
    assert any('"' in t for t in ticks) and not any("&quot;" in t for t in ticks)
    assert trie_view.plot_esc("<b>&") == "&lt;b&gt;&amp;"


def test_accept_chips_shade_like_the_answer():
    """06_step_3: the answer shaded a 4-token run r3, the Accept line r1."""
    ev = eos_step()
    answer = answer_view.highlight_html([ev], TOK)
    accept = phases.accept_html(ev, TOK)
    run = f"r{answer_view.run_level(ev.accepted_len)}"
    assert run == "r2"
    assert f"tok d ds {run} p1" in answer and f"tok d ds {run} p1" in accept and " r1 " not in accept
    assert f"tok d ds {run}" in inspector.inspector_html(ev, TOK)


def wide_step(siblings: int = 15):
    """12: fifteen drafted first-level siblings, the model's own token from the root."""
    tokens = np.arange(ord("a"), ord("a") + siblings, dtype=np.int64)
    n = siblings
    trie = Trie(tokens, np.full(n, -1), np.ones(n, dtype=np.int64), np.linspace(2, 1, n), np.ones(n, dtype=np.uint8))
    ev = event(1, [ord("Z")], (0,), trie=trie, draft=trie, draft_idx=range(n), accepted=())
    return replace(ev, c=n)


def assert_no_label_overlaps_on_a_phone(fig, columns: float) -> None:
    """Every two drawn labels on one side (above or below) of nodes within a row of each other:
    their centred halves do not meet at the phone's plot width (CHAR_PX a character)."""
    col_px = trie_view.PHONE_PLOT_PX / columns
    spots = [
        (x, y + (9 if p.startswith("bottom") else 0), len(re.sub(r"<[^>]+>", "", t)))  # far: the other side
        for tr in fig.data
        if tr.mode == "markers+text"
        and tr.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS)
        and tr.texttemplate != " "
        for x, y, t, p in zip(
            tr.x, tr.y, tr.text, [tr.textposition] * len(tr.x) if isinstance(tr.textposition, str) else tr.textposition
        )
    ]
    for i, (x, y, n) in enumerate(spots):
        for x2, y2, n2 in spots[i + 1 :]:
            if abs(y2 - y) < 1:
                assert (n + n2) / 2 * trie_view.CHAR_PX <= abs(x2 - x) * col_px - 4, (x, y, n, x2, y2, n2)


def test_no_label_or_marker_shares_a_row_or_a_spot():
    """06_step_1: the star sat on the "You" node; 12: 15 labels piled into one stack."""
    for ev in (
        wide_step(),
        eos_step(),
        replace(eos_step(), tokens=(ord("d"), ord("z")), token_sources=(SOURCE_DATASTORE, 0), accepted=(0,)),
    ):
        view = trie_view.tree_view(ev)
        fig = trie_view.trie_figure(ev, TOK)
        spots = [
            (x, y)
            for t in fig.data
            if t.mode == "markers+text" and t.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS)
            for x, y in zip(t.x, t.y)
        ]
        assert len(spots) == len(set(spots))
        # every leaf and the star has a row of its own, one row apart at least
        leaves = [k for k in range(len(view.nodes)) if k not in set(view.parent_pos.tolist())]
        rows = sorted([float(view.y[k]) for k in leaves] + ([view.star_y] if view.model_token is not None else []))
        assert all(b - a >= 1 for a, b in zip(rows, rows[1:]))
        assert view.rows <= tree_layout.MAX_ROWS
        # labels fit between their neighbours on a phone
        assert_no_label_overlaps_on_a_phone(fig, trie_view._TrieDrawing(ev, view, TOK).columns)
    view = trie_view.tree_view(wide_step())
    assert view.star_y < view.y.min()  # the star in its own row under the siblings, from the root


def test_title_is_two_short_lines_for_a_phone():
    title = trie_view.trie_figure(eos_step(), TOK).layout.title.text
    assert all(len(line) <= 44 for line in title.split("<br>")), title


def test_key_is_one_mark_a_line_with_the_figures_words():
    out = tree_key.tree_legend_html()
    items = re.findall(r"<li>(.*?)</li>", out)
    for sym, name, look, meaning in tree_key.TREE_MARKS:
        assert any(sym in i and name in i and look in i and meaning in unescape(i) for i in items), name
        assert tree_key.key_name(name).split(": ")[-1] in unescape(out)
    assert "color:#1f2937" in out  # dark body text, not light grey


def test_step_through_names_the_settings_it_uses():
    """05, 06: the note sent the visitor to a side panel the Step-through tab does not have."""
    from rest_core.config import GenerationConfig, SamplingConfig
    from rest_core.ui import step_through, words
    from rest_core.ui.stepper import Stepper

    assert "side panel" not in words.STEP_NOTE and "Chat view's Settings panel" in words.STEP_NOTE
    assert "c, the most draft tokens verified per step" in words.STEP_NOTE
    st = Stepper()
    st.stores = {"chat": None}
    st.config = GenerationConfig(sampling=SamplingConfig(temperature=0.8))
    out = unescape(step_through.settings_used_html(st))
    assert "Chat view's Settings panel" in out and "drafts from chat" in out and "temperature 0.8" in out
    assert "K = 5,000" in out


def test_chat_inspector_shows_what_fed_the_accepted_branch_counted_once():
    """02: step 9 accepted a token none of the 8 listed continuations started with, and lines
    repeated. The inspector now lists the continuations through the accepted first token (first)
    and the heaviest other, alike ones once with ×N, as the step-through's Retrieve panel does."""
    from rest_core.drafting.draft import build_draft
    from rest_core.drafting.feeds import feeds
    from rest_core.drafting.source import Retrieved

    conts = ["up", "up", "up", "up", "get(", "get(", "find"]
    width = max(map(len, conts))
    rows = np.array([[ord(ch) for ch in t] + [-1] * (width - len(t)) for t in conts], dtype=np.int64)
    store = Retrieved(SOURCE_DATASTORE, 1, (ord("a"),), 7, rows)
    draft = build_draft([store], c=3)
    g = int(np.flatnonzero((draft.nodes.tokens == ord("g")) & (draft.nodes.depths == 1))[0])
    matches = [
        MatchInfo(
            SOURCE_DATASTORE, 1, (ord("a"),), 7, tuple(tuple(int(t) for t in r if t >= 0) for r in rows), name="chat"
        )
    ]
    ev = event(
        0,
        [ord("g"), ord("z")],
        (SOURCE_DATASTORE, 0),
        trie=draft.trie,
        draft=draft.nodes,
        draft_idx=draft.idx,
        accepted=(g,),
        matches=matches,
    )
    ev = replace(ev, feeds=feeds([store], draft.trie, nodes=2, lead=ord("g")))
    out = unescape(re.sub(r"<[^>]+>", " ", inspector.inspector_html(ev, TOK)))
    out = " ".join(out.split())
    assert out.index("g drafted, accepted") < out.index(
        "u drafted, rejected"
    )  # the accepted branch first, though lighter
    assert "“get(” ×2" in out and "“up” ×4" in out
    assert out.count("“up”") == 1 and "verify row" not in out  # Chat has no verify table
    # without feeds (an older event): the sampled continuations, alike ones once with ×N
    plain = " ".join(unescape(re.sub(r"<[^>]+>", " ", inspector.inspector_html(replace(ev, feeds=()), TOK))).split())
    assert "up ×4" in plain and plain.count("up ×") == 1


def test_the_star_under_an_accepted_leaf_takes_a_row_of_its_own():
    """02: the accepted leaf "):" and the star shared a row, the dashed line through the label."""
    trie = Trie(
        np.array([ord("a"), ord("b")]),
        np.array([-1, -1]),
        np.array([1, 1]),
        np.array([2.0, 1.0]),
        np.ones(2, dtype=np.uint8),
    )
    ev = event(0, [ord("a"), ord("z")], (SOURCE_DATASTORE, 0), trie=trie, draft=trie, draft_idx=range(2), accepted=(0,))
    view = trie_view.tree_view(ev)
    assert view.model_parent_pos == 0 and view.star_y != view.y[0]
    assert view.y[0] > view.star_y > view.y[1]  # a, then the star under it, then b
    fig = trie_view.trie_figure(ev, TOK)
    labelled = [t for t in fig.data if t.mode == "markers+text" and t.name != trie_view.ROW_TRACE and len(t.x)]
    places = [p for t in labelled for p in ([t.textposition] if isinstance(t.textposition, str) else t.textposition)]
    assert places and all(p.startswith("top ") for p in places)  # one side: above its node


def test_a_node_under_a_rejected_node_is_drawn_and_keyed_as_off_the_path():
    """06: "q" hangs under the rejected "x", so the walk never compared it; the tree crossed it
    like a rejected node while the table said "off path". One state, one mark, one word."""
    ev = eos_step()
    fig = trie_view.trie_figure(ev, TOK)
    by_name = {t.name: t for t in fig.data if t.name and not t.showlegend}  # the nodes, not the key
    assert sorted(words(by_name["drafted, rejected"])) == sorted(["x", '“"”'])
    off = by_name[tree_key.OFF_PATH]
    assert words(off) == ["q"] and off.marker.symbol != "circle-x"
    # the key lists it by the same words, and the verify table's row uses the key's name
    assert tree_key.key_name(tree_key.OFF_PATH) in [t.name for t in fig.data if t.showlegend]
    assert "under a rejected token, so not used" in unescape(tree_key.TREE_LEGEND)
    table = unescape(re.sub(r"<[^>]+>", " ", phases.verify_html(ev, [1, 2, ord("a")], TOK)))
    assert re.search(r"under a rejected token, not used .*· not used\s+4 \(parent 2\)\s+q", table), table
    assert "off path" not in table


def test_off_the_path_says_one_thing_in_key_table_caption_and_tree():
    """06: the key said "never compared" while the table gave those rows a model token and a
    "same / other" verdict, and the caption counted 1 agreeing token beside 9 rows whose drafted
    token equalled the model's. One forward computes every row; a row under a rejected token is
    not used. Off-path nodes were drawn in pale source colours, keyed grey."""
    ev = eos_step()
    states = tree_key.draft_states(ev)
    html = phases.verify_html(ev, [1, 2, ord("a")], TOK)
    table = unescape(re.sub(r"<[^>]+>", " ", html))
    assert ": same" not in table and ": other" not in table
    off_rows = [i + 1 for i, s in enumerate(states) if s == tree_key.OFF_PATH]
    assert table.count(phases.NOT_USED) == len(off_rows) == 1 and 'class="tt-unused"' in html
    accepted = states.count(tree_key.ACCEPTED)
    lead = phases.verify_lead(ev)
    assert f"{accepted} of the 7 drafted tokens are accepted" in lead and "agree with the model" not in lead
    assert "rejected" not in lead and "<summary>1 row under a rejected token, not used</summary>" in html
    assert "not used" in tree_key.KEY_SHORT[tree_key.OFF_PATH] and "never compared" not in tree_key.TREE_LEGEND
    assert "computed its row too" in unescape(tree_key.TREE_LEGEND)
    # drawn as keyed: grey and faded, the same look for the nodes and the key's sample
    fig = trie_view.trie_figure(ev, TOK)
    node = next(t for t in fig.data if t.name == tree_key.OFF_PATH)
    sample = next(t for t in fig.data if t.showlegend and t.name.startswith(tree_key.OFF_PATH))
    assert node.marker.color == sample.marker.color == style.GREY and node.marker.opacity == sample.marker.opacity
    # a rejected node's source colour shows under its cross, and the key says so
    rejected = next(t for t in fig.data if t.name == "drafted, rejected")
    assert all(c.endswith(f",{trie_view.REJECTED_ALPHA})") for c in rejected.marker.color)
    assert trie_view.REJECTED_ALPHA >= 0.7 and "its source" in tree_key.KEY_SHORT[tree_key.REJECTED]


def test_a_crowded_level_folds_its_lightest_siblings_into_one_more_node():
    """12 (phone): fifteen drafted siblings stacked their labels into one another. The heaviest
    keep a row and a label each; the rest fold into one "+N more" node, and the title counts both."""
    ev = wide_step(15)
    view = trie_view.tree_view(ev)
    assert view.rows <= tree_layout.MAX_ROWS
    [(parent, _, _, folded)] = view.folds
    drawn = len(view.nodes)
    assert parent == -1 and drawn + len(folded) == 15 and drawn >= 5
    assert set(folded) == set(range(15 - len(folded), 15))  # the lightest ones
    fig = trie_view.trie_figure(ev, TOK)
    more = next(t for t in fig.data if t.name == "folded")
    assert list(more.text) == [f"+{len(folded)} more"]
    assert f"trie of 15 nodes, {drawn} drawn, {len(folded)} folded" in fig.layout.title.text
    # labels at least 12 px, on every drawn node, the star and the fold
    assert all(t.textfont.size >= 12 for t in fig.data if t.mode == "markers+text" and t.name != trie_view.ROW_TRACE)


def test_each_label_takes_the_room_its_neighbours_leave():
    """06_step_3: a chain of ten drafted words all read "·…", every label cut to one width. A label
    now gets what its row leaves it: short neighbours (".") let a word keep more, and none meet."""
    assert trie_view.label_room([1, 2, 3], [0, 0, 0], 4.6, [6, 1, 6]) == [6, 1, 6]
    assert trie_view.label_room([1, 2, 3], [0, 0, 0], 11.6, [6, 1, 6]) == [4, 1, 4]
    assert trie_view.label_room([1, 2, 3], [0, 0, 0], 11.6, [6, 6, 6]) == [3, 2, 3]  # the middle meets both
    assert trie_view.label_room([1, 2], [0, 5], 11.6, [6, 6]) == [6, 6]  # other rows: no limit but the edge
    hello = 257 + ByteTokenizer.words.index(b" hello")
    depth = 10
    tokens = np.array([hello if k % 2 else ord(".") for k in range(depth)], dtype=np.int64)
    chain = Trie(
        tokens, np.arange(-1, depth - 1), np.arange(1, depth + 1), np.linspace(3, 2, depth), np.ones(depth, np.uint8)
    )
    ev = replace(
        event(1, [ord("."), ord("Z")], (1, 0), trie=chain, draft=chain, draft_idx=range(depth), accepted=(0,)), c=depth
    )
    fig = trie_view.trie_figure(ev, TOK)
    assert_no_label_overlaps_on_a_phone(fig, trie_view._TrieDrawing(ev, trie_view.tree_view(ev), TOK).columns)
    labels = [
        word(t)
        for tr in fig.data
        if tr.mode == "markers+text" and tr.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS)
        for t in tr.text
    ]
    assert "·hello" in labels, labels  # above and below by turns: a word keeps two columns
    # ten words in a row: a label cut to "·…" says nothing; by turns above and below each keeps
    # at least "·h…"
    words = replace(chain, tokens=np.full(depth, hello, dtype=np.int64))
    ev = replace(ev, trie=words, draft=words, tokens=(hello, ord("Z")))
    fig = trie_view.trie_figure(ev, TOK)
    assert_no_label_overlaps_on_a_phone(fig, trie_view._TrieDrawing(ev, trie_view.tree_view(ev), TOK).columns)
    labels = [
        word(t)
        for tr in fig.data
        if tr.mode == "markers+text"
        and tr.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS, "model's own token")
        for t in tr.text
    ]
    assert "·…" not in labels and all(w.startswith("·h") and len(w) >= 3 for w in labels), labels


def test_a_step_that_drafted_nothing_says_so_not_accepted_0_of_0():
    """Issue 29: an auto step that drafted nothing was titled "accepted 0 of 0 drafted" beside
    the trie it retrieved; it says what happened instead."""
    from tests.ui.test_render import event, small_trie

    ev = event(3, [ord("Z")], (0,), trie=small_trie(), draft=None, draft_idx=())
    title = trie_view.trie_figure(ev, TOK, c_max=16).layout.title.text
    assert "Step 4: drafted nothing" in title and "0 of 0" not in title


def test_every_drafted_node_carries_its_verify_table_row():
    """06_step_1: drafted nodes went unlabelled ("You", "·rest") and the tree could not be mapped
    to the table. Each drafted node is numbered inside by its table row (the mask's "i:" too);
    a folded node's number is in its fold's hover."""
    for ev in (eos_step(), wide_step(15)):
        fig = trie_view.trie_figure(ev, TOK)
        table = unescape(re.sub(r"<[^>]+>", " ", phases.verify_html(ev, [1, 2, ord("a")], TOK)))
        rows = next(t for t in fig.data if t.name == trie_view.ROW_TRACE)
        assert rows.mode == "text" and rows.textposition == "middle center"  # inside its node
        at = {(x, y): re.sub(r"<[^>]+>", "", t) for x, y, t in zip(rows.x, rows.y, rows.text)}
        view = trie_view.tree_view(ev)
        drawn = [k for k, st in enumerate(view.states) if st != "retrieved"]
        assert len(at) == len(drawn)
        for k in drawn:
            row = at[(float(view.x[k]), float(view.y[k]))]
            token = TOK.decode([int(ev.trie.tokens[view.nodes[k]])])
            node = list(tree_layout.draft_to_trie(ev.trie, ev.draft)).index(view.nodes[k])
            assert row == str(node + 1)  # the table's row of that draft node
            assert re.search(rf"\s{row} \((parent|root)", table) or f" {row} (parent" in table
            assert token == TOK.decode([int(ev.draft.tokens[node])])
        mask = phases.mask_view(ev, [1, 2, ord("a")], TOK)
        assert all(mask.row_labels[int(r)].startswith(f"{r}: ") for r in at.values())
        hovers = " ".join(h for t in fig.data if t.name == "folded" for h in t.hovertext)
        for _, _, _, held in view.folds:
            for t in held:
                assert f"row {list(tree_layout.draft_to_trie(ev.trie, ev.draft)).index(t) + 1}," in hovers


def test_top_label_and_bottom_row_number_stay_inside_the_figure():
    """07: the top node's label "8" was clipped at the figure's edge (0.6 of a row above it)."""
    for ev in (eos_step(), wide_step(15)):
        fig = trie_view.trie_figure(ev, TOK)
        ys = [y for t in fig.data if t.mode and "text" in t.mode for y in t.y]
        lo, hi = fig.layout.yaxis.range
        assert hi - max(ys) >= 0.89 and min(ys) - lo >= 0.89
    assert "2px" in trie_view.LABEL_HALO  # a line under a label (the star's dashed one) never crosses it
