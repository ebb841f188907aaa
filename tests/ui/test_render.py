"""Render functions on hand-made step events and a tiny byte-level tokenizer (no model)."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import numpy as np
import pytest

from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE, MatchInfo, StepEvent, StepTimings, Totals
from rest_core.drafting.trie import Trie
from rest_core.ui import answer_view, compare_view, inspector, stats, style, tree_key, tree_layout, trie_view

EOS = 256


class ByteTokenizer:
    """ids 0..255 are bytes, 256 is a special EOS, 257+ are multi-byte words (like byte-level BPE)."""

    words = [
        b" hello",
        b"<b>",
        b" &",
        b"\xe4\xb8",
        b"\x96\xe7\x95\x8c",
        b" 'q'",
        b'"',
        b"def",
        b"\n    return",
        b"    ",
        b" x",
    ]

    def __init__(self) -> None:
        self.calls = 0

    def piece(self, i: int) -> bytes:
        if i < 256:
            return bytes([i])
        if i == EOS:
            return b""
        return self.words[i - 257]

    def word(self, w: bytes) -> int:
        return 257 + self.words.index(w)

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        self.calls += 1
        return b"".join(self.piece(int(i)) for i in ids).decode("utf-8", errors="replace")

    def encode_bytes(self, s: str) -> list[int]:
        return list(s.encode("utf-8"))


def totals(new: int, steps: int, drafts: int = 0, elapsed: float = 0.1) -> Totals:
    return Totals(
        prompt_tokens=5,
        new_tokens=new,
        steps=steps,
        draft_tokens=drafts,
        elapsed_s=elapsed,
        prefill_ms=12.0,
        retrieval_ms=0.5 * steps,
    )


def event(
    step,
    tokens,
    sources,
    *,
    trie=None,
    draft=None,
    draft_idx=(),
    accepted=(),
    new=0,
    finished=False,
    matches=(),
    method="rest",
    elapsed=None,
):
    n_drafts = sum(1 for s in sources if s)
    return StepEvent(
        step=step,
        method=method,
        matches=tuple(matches),
        trie=trie,
        draft_idx=tuple(draft_idx),
        draft=draft,
        accepted=tuple(accepted),
        tokens=tuple(tokens),
        token_sources=tuple(sources),
        c=4,
        timings=StepTimings(retrieve_ms=0.1, draft_ms=0.05, forward_ms=40.0, accept_ms=0.1, total_ms=41.0),
        totals=totals(new or len(tokens), step + 1, n_drafts, elapsed if elapsed is not None else 0.05 * (step + 1)),
        finished=finished,
        finish_reason="eos" if finished else None,
    )


def spans(html_text: str) -> list[tuple[str, str]]:
    """(class, unescaped text) of every token span."""
    return [(c, html.unescape(t)) for c, t in re.findall(r'<span class="([^"]*)"[^>]*>(.*?)</span>', html_text)]


# ------------------------------------------------------------------ incremental decoding


def test_incremental_decoder_pieces_concatenate_to_full_text_with_multibyte():
    tok = ByteTokenizer()
    text = "héllo 世界 🎉 ok"
    ids = tok.encode_bytes(text)
    dec = answer_view.IncrementalDecoder(tok)
    pieces = [dec.push(i) for i in ids]
    assert "".join(p for p in pieces if p) + dec.flush() == text
    # Bytes inside a character yield None; the byte completing it yields the whole character.
    assert pieces[:3] == ["h", None, "é"]
    assert "🎉" in pieces and "\ufffd" not in "".join(p for p in pieces if p)


def test_incremental_decoder_window_stays_short():
    tok = ByteTokenizer()
    dec = answer_view.IncrementalDecoder(tok)
    for i in tok.encode_bytes("a" * 500):
        dec.push(i)
    # Each push decodes a window of at most a few tokens, not the whole answer.
    assert dec._read - dec._prefix <= 2


def test_partial_character_tokens_merge_into_one_span():
    tok = ByteTokenizer()
    # "世界" split across tokens as e4b8 | 96 e7 95 8c: the first token ends inside 世.
    ids = [tok.word(b"\xe4\xb8"), tok.word(b"\x96\xe7\x95\x8c"), ord("!")]
    e = event(0, ids, (SOURCE_DATASTORE, SOURCE_DATASTORE, 0), finished=True)
    view = answer_view.AnswerView(tok)
    view.add(e)
    got = spans(view.html())
    assert [t for _, t in got] == ["世界", "!"]
    assert view.spans[0].token_ids == tuple(ids[:2])
    assert view.text == "世界!"


def test_dangling_partial_character_is_flushed_at_the_end():
    tok = ByteTokenizer()
    e = event(0, [ord("a"), 0xE4], (0, 0), finished=True)
    view = answer_view.AnswerView(tok)
    view.add(e)
    assert view.text == "a\ufffd"


# ------------------------------------------------------------------ highlighting


def test_token_boundaries_step_classes_and_titles():
    tok = ByteTokenizer()
    ev = [
        event(0, [ord("A")], (0,)),  # no draft accepted
        event(
            1,
            [ord("B"), ord("C"), ord("D")],
            (SOURCE_DATASTORE, SOURCE_DATASTORE, 0),
            matches=[MatchInfo(SOURCE_DATASTORE, 3, (1, 2, 3), 7, ())],
        ),
        event(2, [ord("E"), ord("F")], (SOURCE_CONTEXT, 0)),
        event(3, [ord("G"), ord("H")], (SOURCE_DATASTORE | SOURCE_CONTEXT, 0), finished=True),
    ]
    out = answer_view.highlight_html(ev, tok)
    got = spans(out)
    assert [t for _, t in got] == list("ABCDEFGH")  # one span per token
    classes = [c for c, _ in got]
    # step 1 accepted no draft: its token alone, no underline (screens9: the dotted underline ran
    # under nearly every word of an answer with few drafts, read as spell-check); step 2's own token
    # follows its accepted drafts and keeps it
    assert classes[0] == "tok m lone p0"
    assert classes[1] == "tok d ds r2 p1" and classes[3] == "tok m p1"  # 2 accepted -> level 2
    assert classes[4] == "tok d cx r1 p0"
    assert classes[6] == "tok d both r1 p1"
    titles = re.findall(r'title="([^"]*)"', out)
    assert "step 2" in titles[1] and "matched suffix 3" in titles[1] and "2 draft tokens accepted" in titles[1]
    assert "drafted by datastore" in titles[1]
    assert "drafted by conversation ·" in titles[4]  # the context named as the page shows it
    assert "model&#x27;s own token" in titles[3]
    assert re.findall(r'data-step="(\d+)"', out) == ["0", "1", "1", "1", "2", "2", "3", "3"]


def test_run_level_thresholds():
    assert [answer_view.run_level(n) for n in (0, 1, 2, 3, 4, 7, 8, 30)] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_model_output_is_escaped():
    tok = ByteTokenizer()
    ids = [tok.word(b"<b>"), tok.word(b" &"), tok.word(b" 'q'"), tok.word(b'"'), EOS]
    out = answer_view.highlight_html(
        [event(0, ids, (SOURCE_DATASTORE, SOURCE_DATASTORE, SOURCE_DATASTORE, 0, 0), finished=True)], tok
    )
    assert "<b>" not in out.replace('<span class="', "")
    assert "&lt;b&gt;" in out and " &amp;" in out and "&#x27;q&#x27;" in out and "&quot;" in out
    assert [t for _, t in spans(out)] == ["<b>", " &", " 'q'", '"']  # EOS shows nothing


def test_conversation_html_escapes_user_text():
    out = answer_view.conversation_html(
        [answer_view.Turn(user="<script>x</script>", answer_html='<span class="tok m p0">hi</span>', note="stopped")]
    )
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "stopped" in out and "tok m p0" in out


def test_legend_mentions_every_style():
    out = answer_view.legend_html()
    for cls in ("tok d ds", "tok d cx", "tok d both", "tok m", "r4"):
        assert cls in out


def test_legend_says_in_words_what_the_dotted_underline_is():
    """Issue 29: every model token has a dotted underline, and the key explained only the thin
    line under drafted whitespace."""
    out = html.unescape(answer_view.legend_html())
    assert "a dotted underline marks the model's own token" in out and "thin line" in out
    assert "plain text: a step that accepted no draft, its token alone" in out  # a lone token: no mark


def test_legend_draws_the_shade_scale_for_every_source_hue():
    out = answer_view.legend_html()
    for css in ("ds", "cx", "both"):
        assert [int(r) for r in re.findall(rf'class="tok d {css} r(\d) p0"', out)][-4:] == [1, 2, 3, 4], css


def test_tree_legend_names_every_mark_of_the_figure():
    out = tree_key.tree_legend_html()
    for mark in (
        "■",
        "root",
        "dashed",
        "filled",
        "hollow",
        "⟨im_start⟩",
        "trie",
        "heaviest",
        "likeliest",
        "weight",
        "split evenly",
        "several sources reach",
    ):
        assert mark in out, mark


def test_leading_blanks_are_not_highlighted_like_words():
    tok = ByteTokenizer()
    ids = [tok.word(b"def"), tok.word(b"\n    return"), tok.word(b"    "), tok.word(b" x"), EOS]
    out = answer_view.highlight_html([event(0, ids, (SOURCE_DATASTORE,) * 4 + (0,), finished=True)], tok)
    got = [(c, html.unescape(t)) for c, t in re.findall(r'<span class="([^"]*)"[^>]*>(.*?)</span>', out, re.S)]
    assert [t for _, t in got] == ["def", "\n    ", "return", "    ", " x"]
    assert [("ws" in c.split()) for c, _ in got] == [
        False,
        True,
        False,
        True,
        False,
    ]  # one leading space stays with its word
    assert all(
        c.startswith("tok d ds r3") for c, _ in got
    )  # 4 accepted: still the drafting source's token, step and shade
    assert len(re.findall(r'data-step="0"', out)) == 5


def test_the_step_throughs_current_step_shows_its_blanks():
    """Screens12, complaint 2: "Step 3 · 7 tokens so far, 2 this step" while the answer looked as
    at step 2: both tokens were line breaks. The step-through's current step marks each line break
    with a faint ↵ before it, and a piece that is all spaces with a · per space; earlier steps and
    the chat (no `current`) are drawn as before."""
    tok = ByteTokenizer()
    first = event(0, [tok.word(b"def"), tok.word(b" x")], (0, 0))
    second = event(1, [10, 10], (SOURCE_DATASTORE, 0))
    third = event(2, [tok.word(b"    "), tok.word(b" x")], (0, 0))
    chat = answer_view.highlight_html([first, second, third], tok)
    assert "ws-mark" not in chat and "↵" not in chat
    shown = answer_view.highlight_html([first, second], tok, current=1)
    mark = '<span class="ws-mark" aria-hidden="true">↵</span>\n'
    assert shown.count(mark) == 2 and "ws-mark" not in shown.split('data-step="1"')[0]
    assert html.unescape(re.sub(r"<[^>]+>", "", shown)) == "def x↵\n↵\n"
    spaces = answer_view.highlight_html([first, second, third], tok, current=2)
    assert re.sub(r"<[^>]+>", "", spaces).endswith("x\n\n···· x")  # a word keeps its leading space
    assert "↵" not in re.sub(r"<[^>]+>", "", answer_view.highlight_html([first, second, third], tok, current=0))


# ------------------------------------------------------------------ trie figure


def small_trie() -> Trie:
    # root -> A(5) -> C(4) -> E(3); A -> D(1); root -> B(2); BFS order by depth, parent, token.
    tokens = np.array([ord("A"), ord("B"), ord("C"), ord("D"), ord("E")], dtype=np.int64)
    parents = np.array([-1, -1, 0, 0, 2], dtype=np.int64)
    depths = np.array([1, 1, 2, 2, 3], dtype=np.int64)
    weights = np.array([5.0, 2.0, 4.0, 1.0, 3.0])
    sources = np.array([1, 2, 1, 3, 1], dtype=np.uint8)
    return Trie(tokens, parents, depths, weights, sources)


def sub(trie: Trie, idx: list[int]) -> Trie:
    remap = {t: k for k, t in enumerate(idx)}
    return Trie(
        trie.tokens[idx],
        np.array([remap.get(int(trie.parents[t]), -1) for t in idx]),
        trie.depths[idx],
        trie.weights[idx],
        trie.sources[idx],
    )


def trie_event() -> StepEvent:
    trie = small_trie()
    draft_idx = [0, 1, 2, 4]  # A, B, C, E
    draft = sub(trie, draft_idx)
    # accepted A, C (draft nodes 0, 2); then the model's own token "Z".
    return event(
        5,
        [ord("A"), ord("C"), ord("Z")],
        (SOURCE_DATASTORE, SOURCE_DATASTORE, 0),
        trie=trie,
        draft=draft,
        draft_idx=draft_idx,
        accepted=(0, 2),
        matches=[MatchInfo(SOURCE_DATASTORE, 2, (ord("x"), ord("y")), 12, ((ord("A"), ord("C")), (ord("B"),)))],
    )


def test_tree_view_roles_and_layout():
    view = trie_view.tree_view(trie_event())
    assert view is not None
    assert view.nodes.tolist() == [0, 1, 2, 3, 4]
    assert view.selected.tolist() == [True, True, True, False, True]
    assert view.accepted.tolist() == [True, False, True, False, False]
    assert view.parent_pos.tolist() == [-1, -1, 0, 0, 2]
    assert view.model_token == ord("Z") and view.model_parent_pos == 2
    # drafted siblings in row order from the top (A, B: rows 1, 2), then retrieved-only ones (C above D)
    assert view.y[0] > view.y[1] and view.y[2] > view.y[3]


def test_tree_view_caps_nodes_but_keeps_accepted_path_and_ancestors():
    view = trie_view.tree_view(trie_event(), max_nodes=3)
    assert view is not None
    assert len(view.nodes) == 3
    shown = set(view.nodes.tolist())
    assert {0, 2} <= shown  # the accepted path
    for k, t in enumerate(view.nodes):  # closed under parents
        assert view.parent_pos[k] >= 0 or small_trie().parents[t] == -1


def test_draft_to_trie_matches_by_token_path():
    trie = small_trie()
    draft = sub(trie, [0, 2, 4])
    assert tree_layout.draft_to_trie(trie, draft).tolist() == [0, 2, 4]


def test_trie_figure_data():
    tok = ByteTokenizer()
    fig = trie_view.trie_figure(trie_event(), tok)
    by_name = {t.name: t for t in fig.data if t.name and not t.showlegend}  # the nodes, not the key
    assert list(by_name["accepted"].text) == ["A", "C"]
    assert list(by_name["drafted, rejected"].text) == ["B", "E"]
    assert list(by_name["retrieved only"].text) == ["D"]
    assert list(by_name["model's own token"].text) == ["Z"]
    nodes = sum(
        len(t.text)
        for t in fig.data
        if t.mode == "markers+text" and t.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS)
    )
    assert list(by_name["verify row"].text) == ["<b>1</b>", "<b>2</b>", "<b>3</b>", "<b>4</b>"]  # the drafted
    assert nodes == 5 + 1  # all trie nodes + the model's token
    # accepted edges: root->A and A->C
    acc_edges = [t for t in fig.data if t.mode == "lines" and t.line.color == style.ACCEPTED_COLOR][0]
    assert sum(1 for x in acc_edges.x if x is None) == 2
    # the context-proposed B is drawn in the context colour
    assert list(by_name["drafted, rejected"].marker.color)[0] == trie_view.faded(
        style.SOURCE_COLORS[SOURCE_CONTEXT], trie_view.REJECTED_ALPHA
    )
    assert "Step 6" in fig.layout.title.text
    # the count is of trie nodes (merged continuations), not of retrieved occurrences or continuations
    assert "<br>trie of 5 nodes" in fig.layout.title.text and "retrieved" not in fig.layout.title.text


def test_trie_figures_key_names_the_marks_it_draws_and_each_sources_colour():
    """Issue 29: a faded blue datastore node matched no key entry; the key names the colour of
    each source it drew, by the source's name. screens16 (03, 06): the key listed every mark in
    a long column beside white space; it now names only the marks the step draws, in a word or
    two, and the fold under the figure says every mark at length."""
    ev = replace(trie_event(), tokens=(ord("A"), ord("D")), token_sources=(SOURCE_DATASTORE, 0), accepted=(0,))
    fig = trie_view.trie_figure(ev, ByteTokenizer())
    key = [t for t in fig.data if t.showlegend is not False]
    names = [t.name for t in key]
    assert names[:6] == [
        "root: last token",
        "accepted",
        "rejected",
        "off the path",
        "retrieved only",
        "model's own token",
    ]
    assert names[:6] == [tree_key.key_name(n) for _, n, _, _ in tree_key.TREE_MARKS if n != "not checked"]
    colours = {t.name: t.marker.color for t in key[6:]}
    drawn = {int(m) for m in ev.trie.sources if m}  # every node of this small trie is drawn
    assert colours
    for bit, name in style.step_source_names(ev):
        if any(m & bit for m in drawn):
            assert colours[name] == style.SOURCE_COLORS[bit]
    assert all(t.x == (None,) for t in key)  # key entries only: no points
    for mark in ("root", "green", "dark ring", "hollow", "model's own token"):
        assert mark in tree_key.TREE_LEGEND, mark
    for name in names[:6]:  # the page's key says the figure's words
        assert name.split(": ")[-1] in tree_key.TREE_LEGEND, name
    # a step that accepted its one draft draws no rejected, unused or hollow node: its key says none
    trie = sub(small_trie(), [0])
    one = event(1, [ord("A"), ord("Z")], (SOURCE_DATASTORE, 0), trie=trie, draft=trie, draft_idx=[0], accepted=(0,))
    key = [t.name for t in trie_view.trie_figure(one, ByteTokenizer()).data if t.showlegend]
    assert key[:3] == ["root: last token", "accepted", "model's own token"]
    assert not {"rejected", "off the path", "retrieved only", "not checked"} & set(key)


def test_model_token_star_never_sits_on_a_node_and_rejected_drafts_are_ringed_dark():
    """The model's own token is a star between the rows even when the trie held it (D, retrieved
    only): drawn on that circle it read as the model choosing a node. Rejected drafts are faded
    in a dark ring, unlike accepted ones' green (no cross: their row number is written inside)."""
    ev = replace(trie_event(), tokens=(ord("A"), ord("D")), token_sources=(SOURCE_DATASTORE, 0), accepted=(0,))
    view = trie_view.tree_view(ev)
    assert view.model_in_trie_pos == view.nodes.tolist().index(3)  # D: the trie had the model's token
    fig = trie_view.trie_figure(ev, ByteTokenizer())
    by_name = {t.name: t for t in fig.data if t.name and not t.showlegend}  # the nodes, not the key
    star = by_name["model's own token"]
    nodes = {
        (x, y)
        for t in fig.data
        if t.mode == "markers+text" and t.name not in (trie_view.ROW_TRACE, trie_view.WIDE_LABELS) and t is not star
        for x, y in zip(t.x, t.y)
    }
    assert (star.x[0], star.y[0]) not in nodes
    assert "the trie had it too" in star.hovertext[0]
    rejected = by_name["drafted, rejected"].marker
    assert all(c.startswith("rgba(") and c.endswith(f",{trie_view.REJECTED_ALPHA})") for c in rejected.color)
    assert rejected.opacity is None and rejected.line.width >= 2 and rejected.line.color == trie_view.REJECTED_RING
    accepted = by_name["accepted"].marker
    assert accepted.line.color != rejected.line.color and accepted.line.width > rejected.line.width


def test_trie_figure_without_trie_explains_itself():
    tok = ByteTokenizer()
    fig = trie_view.trie_figure(event(0, [65], (0,), method="ar"), tok)
    assert "plain decoding" in fig.layout.annotations[0].text
    fig = trie_view.trie_figure(event(0, [65], (0,)), tok)
    assert "no match" in fig.layout.annotations[0].text
    assert "appears here" in trie_view.trie_figure(None, tok).layout.annotations[0].text


def test_labels_make_whitespace_visible_and_cut_long_text():
    assert style.visible(" a\n") == "·a↵"
    assert style.visible("abcdefghijklmnop", 6) == "abcde…"
    assert style.visible("") == "∅"


# ------------------------------------------------------------------ inspector, stats, comparison


def test_inspector_shows_suffix_occurrences_continuations_and_accepted():
    tok = ByteTokenizer()
    out = inspector.inspector_html(trie_event(), tok, n_steps=9)
    assert "Step 6 of 9" in out
    assert "<code>xy</code>" in out and "<b>12</b> occurrences" in out
    assert "<code>AC</code>" in out and "<code>B</code>" in out
    assert ">A</span>" in out and ">C</span>" in out and ">Z</span>" in out
    assert "forward 40.0 + " in out


def test_stats_and_source_counts():
    ev = [
        event(0, [65, 66], (SOURCE_DATASTORE, 0)),
        event(1, [67, 68, 69], (SOURCE_CONTEXT, SOURCE_DATASTORE | SOURCE_CONTEXT, 0), new=5),
    ]
    assert stats.source_counts(ev) == {"datastore": 1, "context": 1, "both": 1, "model": 2}
    out = stats.stats_html(ev, running=True)
    assert "generating" in out and "steps" in out


def test_comparison_identity_speedup_and_figure():
    rest = [event(0, [1, 2, 3], (1, 1, 0), elapsed=0.1), event(1, [4], (0,), new=4, elapsed=0.2, finished=True)]
    ar = [event(i, [i + 1], (0,), method="ar", new=i + 1, elapsed=0.1 * (i + 1), finished=i == 3) for i in range(4)]
    cmp = compare_view.compare(rest, ar, greedy=True)
    assert cmp.identical is True
    assert cmp.speedup == pytest.approx((4 / 0.2) / (4 / 0.4))
    out = compare_view.comparison_html(cmp)
    assert 'id="speedup-value">2.00×' in out and "identical output ✓ (all 4 tokens)" in out
    rows = dict((k, (r, a)) for k, r, a in compare_view.comparison_rows(cmp))
    assert rows["tokens / steps (M)"] == ("4 / 2 = 2.00", "4 / 4 = 1.00")
    ar_diff = ar[:-1] + [event(3, [9], (0,), method="ar", new=4, elapsed=0.4, finished=True)]
    assert compare_view.compare(rest, ar_diff, greedy=True).identical is False
    assert compare_view.compare(rest, ar_diff, greedy=False).identical is None
    # a run the time limit cut: the claim names the tokens both wrote, which is what was compared
    from dataclasses import replace

    cut = replace(compare_view.compare(rest, ar[:2], greedy=True), identical=True)
    assert cut.lengths == (4, 2) and cut.compared == 2
    claim = compare_view.identity_claim(cut)
    assert claim == "identical over the first 2 tokens ✓ (REST wrote 4 tokens, plain decoding 2 before the time limit)"
    assert claim in compare_view.comparison_html(cut)
    assert ("same output (greedy)", "yes, 2 tokens compared", "") in compare_view.comparison_rows(cut)
    fig = compare_view.speed_figure(rest, ar)
    assert [t.name for t in fig.data] == ["REST", "plain"]
    assert list(fig.data[0].y) == [0, 3, 4]


def test_answer_view_render_work_per_step_does_not_grow_with_the_answer():
    """Per-step render work (decode + span HTML) is incremental: the ids decoded per token stay
    bounded however long the answer is, so a step's render never re-decodes the whole answer
    (counted, not timed: wall-clock limits flake on a shared machine)."""

    class Counting(ByteTokenizer):
        decoded = 0

        def decode(self, ids, **kw):
            self.decoded += len(ids)
            return super().decode(ids, **kw)

    def decoded_per_token(repeats: int) -> float:
        tok = Counting()
        view = answer_view.AnswerView(tok)
        ids = tok.encode_bytes("def f(x):\n    return x * 2  # 世界\n" * repeats)
        for k in range(0, len(ids), 3):
            chunk = ids[k : k + 3]
            view.add(event(k // 3, chunk, tuple([SOURCE_DATASTORE] * (len(chunk) - 1) + [0])))
            view.html()
        return tok.decoded / len(ids)

    short, long = decoded_per_token(5), decoded_per_token(40)
    assert long < 16 and long < 1.5 * short


def test_tree_view_limits_retrieved_only_nodes():
    view = trie_view.tree_view(trie_event(), max_extra=0)
    assert view is not None
    assert view.selected.all() and view.nodes.tolist() == [0, 1, 2, 4]


def test_trie_labels_are_escaped_for_plotly():
    tok = ByteTokenizer()
    trie = Trie(
        np.array([tok.word(b"<b>")]), np.array([-1]), np.array([1]), np.array([1.0]), np.array([1], dtype=np.uint8)
    )
    e = event(0, [tok.word(b"<b>"), ord("x")], (1, 0), trie=trie, draft=trie, draft_idx=(0,), accepted=(0,))
    fig = trie_view.trie_figure(e, tok)
    acc = [t for t in fig.data if t.name == "accepted" and t.mode == "markers+text" and t.name != trie_view.ROW_TRACE][
        0
    ]
    assert list(acc.text) == ["&lt;b&gt;"]


# --- compact events: what a session keeps per step -------------------------------------------


@pytest.fixture(scope="module")
def big_trie_run():
    """(engine, tokenizer, prompt): the tiny model over a store of random bytes, where a one-token
    suffix has ~1,500 occurrences, so K up to 5000 retrieves tries of tens of thousands of nodes."""
    from rest_core.decode.engine import Engine
    from rest_core.store.datastore import Datastore
    from tests.tiny_models import tiny_loaded

    lm = tiny_loaded("llama")
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 256, size=200).tolist() for _ in range(2000)]
    store = Datastore.from_token_ids(docs, vocab_size=len(lm.tokenizer))
    engine = Engine(lm.model, lm.tokenizer, store, reuse_cache=False)
    return engine, lm.tokenizer, engine.encode("abc abc abc", chat=True)


@pytest.mark.parametrize("k, c", [(5000, 8), (5000, 64), (50, 64)])
def test_compact_event_draws_the_same_figure_and_inspector_in_bounded_size(big_trie_run, k, c):
    """A compact event's trie holds at most the drawn nodes plus the draft, whatever K; the trie
    figure and the inspector made from it equal those made from the full event."""
    from rest_core.config import PRESETS
    from rest_core.knobs import make_config

    engine, tok, prompt = big_trie_run
    config = make_config(
        dict(n_min=1, n_max=1, m=32, max_matches=k, c=c, max_new_tokens=10, use_context=True), PRESETS["cpu"]
    )
    events = list(engine.generate(prompt, config))
    full_sizes = []
    for e in events:
        small = tree_layout.compact_event(e)
        if e.trie is None:
            assert small.trie is None
            continue
        full_sizes.append(len(e.trie))
        assert len(small.trie) <= tree_layout.TRIE_MAX_NODES + c + tree_layout.HEAVIEST_KEPT  # independent of K
        heaviest = np.sort(e.trie.weights)[::-1][:64]
        assert np.array_equal(np.sort(small.trie.weights)[::-1][:64], heaviest)  # what c <= 64 would verify
        assert small.trie_nodes == len(e.trie) and small.draft == e.draft and small.tokens == e.tokens
        assert [int(small.trie.tokens[i]) for i in small.draft_idx] == [int(e.trie.tokens[i]) for i in e.draft_idx]
        assert trie_view.trie_figure(small, tok).to_dict() == trie_view.trie_figure(e, tok).to_dict()
        assert inspector.inspector_html(small, tok, n_steps=3) == inspector.inspector_html(e, tok, n_steps=3)
        assert tree_layout.compact_event(small) is small
    assert full_sizes
    if k == 5000:
        assert max(full_sizes) > 10_000  # the full tries really are big


def _random_trie(rnd: np.random.Generator, n: int) -> Trie:
    parents = np.array([-1 if i < 3 else int(rnd.integers(-1, i)) for i in range(n)], dtype=np.int64)
    depths = np.zeros(n, dtype=np.int64)
    for i in range(n):
        depths[i] = 1 if parents[i] < 0 else depths[parents[i]] + 1
    weights = rnd.choice([0.5, 0.25, 0.125, 1 / 3], size=n)  # many ties, as a K=5000 trie has
    return Trie(tokens=rnd.permutation(n), parents=parents, depths=depths, weights=weights, sources=np.ones(n, np.int8))


@pytest.mark.parametrize("seed", range(12))
def test_draw_order_is_the_full_sort_s_prefix_that_can_be_drawn(seed):
    """The figure's node order sorts only the nodes that can be drawn (a K=5000 trie has 80,000
    nodes; sorting them all cost ~100 ms a step): the same order as sorting the whole trie, up
    to the max_extra-th retrieved-only node, ties included."""
    rnd = np.random.default_rng(seed)
    trie = _random_trie(rnd, int(rnd.integers(5, 300)))
    n = len(trie)
    selected = rnd.random(n) < 0.1
    accepted = selected & (rnd.random(n) < 0.5)
    full = np.lexsort((np.arange(n), trie.depths, -trie.weights, ~selected, ~accepted))
    for max_extra in (0, 1, 3, 8, n + 5):
        order = tree_layout._draw_order(trie, selected, accepted, max_extra)
        head = int(selected.sum()) + min(max_extra, n - int(selected.sum()))
        assert order[:head].tolist() == full[:head].tolist()
        assert len(set(order.tolist())) == len(order)


def test_draft_to_trie_on_a_deep_draft_and_missing_nodes():
    trie = _random_trie(np.random.default_rng(0), 400)
    path = [399]
    while trie.parents[path[-1]] >= 0:
        path.append(int(trie.parents[path[-1]]))
    draft = sub(trie, sorted(path))
    assert tree_layout.draft_to_trie(trie, draft).tolist() == sorted(path)
    stranger = Trie(
        tokens=np.array([99999, 1]),
        parents=np.array([-1, 0]),
        depths=np.array([1, 2]),
        weights=np.ones(2),
        sources=np.ones(2, np.int8),
    )
    assert tree_layout.draft_to_trie(trie, stranger).tolist() == [-1, -1]


def test_how_rest_works_diagram_agrees_with_the_glossary_and_its_text_fits_its_boxes():
    """Issue 29: the diagram said a tree node sees "its ancestors only" where the glossary (and
    the mask figure) say the cached context, its ancestors and itself; and that line ran out of
    its box."""
    import xml.etree.ElementTree as ET

    from rest_core.ui import words
    from rest_core.ui.settings import ROOT

    svg = ET.parse(ROOT / "assets" / "how_rest_works.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    text = " ".join(" ".join(t.itertext()) for t in svg.iter(f"{ns}text"))
    assert "ancestors only" not in text and "cached context, its ancestors and itself" in text
    assert "the cached context, its ancestors and itself" in words.GLOSSARY
    # every line inside its box: tests/ui/test_first_screen.py's diagram test


def test_wide_tables_scroll_sideways_on_a_phone():
    """Issue: a 390-pixel phone clipped the verify table's verdict column ("disag"). Compare's table
    and the verify rows sit in a box that scrolls sideways (assets/app.css's .scroll-x)."""
    import re
    from pathlib import Path

    from rest_core.ui import phases

    ev = trie_event()
    verify = phases.verify_html(ev, [ord("x"), ord("y")], ByteTokenizer())
    assert re.search(r'<div class="scroll-x"><table class="tt-rows">.*✗ disagree.*</table></div>', verify)
    rest = [event(0, [1, 2, 3], (1, 1, 0), elapsed=0.1), event(1, [4], (0,), new=4, elapsed=0.2, finished=True)]
    ar = [event(i, [i + 1], (0,), method="ar", new=i + 1, elapsed=0.1 * (i + 1)) for i in range(4)]
    table = compare_view.comparison_html(compare_view.compare(rest, ar, greedy=True))
    assert re.search(r'<div class="scroll-x"><table class="cmp">.*</table></div>', table)
    css = (Path(__file__).parents[2] / "assets" / "app.css").read_text()
    assert ".scroll-x { overflow-x: auto; max-width: 100%; }" in css


def test_live_stats_and_inspector_count_the_same_steps():
    """Issue: mid-stream the stats said "3 steps" while the inspector, redrawn only with the trie
    figure, still said "Step 2 of 2". Every live refresh draws all three from the same steps."""
    from rest_core.ui.chat import live_panels

    steps = [event(i, [i + 1], (0,), new=i + 1) for i in range(3)]
    stats_, fig, inspector = live_panels(steps, ByteTokenizer())
    assert '<div class="v">3</div><div class="k">steps</div>' in stats_ and "<b>Step 3</b>" in inspector
    assert "Step 3 of 3" not in inspector  # while it streams, "of 3" would read as the end
    assert "Step 3" in str(fig.layout)
    stats_, fig, inspector = live_panels([], ByteTokenizer())
    assert "Stats appear here" in stats_ and "Pick a step" in inspector and fig is None


def test_a_streaming_answer_never_shows_two_steps_at_once(scripted):
    """Issue 29: while an answer streamed, the tree said Step 5 and the inspector Step 6, and then
    the text ran a token ahead of the stats (text every 0.08 s, panels every 0.3 s). Every live
    Update now carries the text, the stats, the tree and the inspector together, all of one step:
    the text's last token is of the step the stats count."""
    import re

    from rest_core.ui.runtime import NO_STORE
    from rest_core.ui.session import Session
    from tests.app_fixtures import knob_values, respond

    rt, engine = scripted
    engine.step_s = 0.03  # several steps between two refreshes
    session = Session()
    live = 0
    for u in respond(session, rt, "go", NO_STORE, knob_values()):
        if u.chat is not None and u.stats is None:  # only before the first token (the model loading)
            assert '<span class="tok' not in u.chat[u.chat.rindex('<div class="msg bot">') :], "text without the panels"
        if u.stats is None or 'class="live"' not in u.stats:
            continue
        assert u.chat is not None and u.trie is not None and u.inspector is not None
        n = re.search(r'<div class="v">(\d+)</div><div class="k">steps</div>', u.stats).group(1)
        assert f"<b>Step {n}</b>" in u.inspector and f"Step {n}" in str(u.trie.layout), n
        answer = u.chat[u.chat.rindex('<div class="msg bot">') :]
        last = max(int(k) for k in re.findall(r'data-step="(\d+)"', answer))  # 0-based
        assert last + 1 == int(n), (last, n)  # the text ends at the step the panels show
        live += 1
    assert live >= 2, live
