"""The Retrieve panel's "which continuations made the heaviest branches" (rest_core.ui.feeds_view)
on a hand-made step: a store whose continuations start "up" (4), "get" (2) or "find" (1), and the
conversation's two "get(x"s; c = 2 drafts "ge" and the model takes "g"."""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape

import numpy as np

from rest_core.decode.events import MatchInfo
from rest_core.drafting.draft import build_draft
from rest_core.drafting.feeds import feeds
from rest_core.drafting.source import Retrieved
from rest_core.sources import SOURCE_CONTEXT, SOURCE_DATASTORE
from rest_core.ui import feeds_view, phases, tree_key, words
from tests.tiny_models import tiny_tokenizer
from tests.ui.test_render import event

TOK = tiny_tokenizer()


def ids(text: str) -> list[int]:
    return list(text.encode())


def rows(*texts: str) -> np.ndarray:
    m = max(len(t) for t in texts)
    return np.array([ids(t) + [-1] * (m - len(t)) for t in texts], dtype=np.int64)


def step():
    """(event, draft): the store's 7 continuations (first tokens u, u, u, u, g, g, f) and the
    conversation's 2 (both g); 'g' weighs 2/7 + 2/2, 'u' 4/7, 'f' 1/7."""
    store = Retrieved(
        SOURCE_DATASTORE, 3, (1, 2, 3), 40, rows("up to the", "up to the", "up()", "up", "get(", "get", "find")
    )
    context = Retrieved(SOURCE_CONTEXT, 2, (1, 2), 2, rows("get(x", "get(x"))
    draft = build_draft([store, context], c=2)
    matches = [
        MatchInfo(SOURCE_DATASTORE, 3, (1, 2, 3), 40, (tuple(ids("find")),), name="code"),
        MatchInfo(SOURCE_CONTEXT, 2, (1, 2), 2, (tuple(ids("get(x")),)),
    ]
    g = int(np.flatnonzero((draft.nodes.tokens == ord("g")) & (draft.nodes.depths == 1))[0])
    ev = event(
        0,
        [ord("g"), ord("e")],
        [SOURCE_DATASTORE | SOURCE_CONTEXT, 0],
        trie=draft.trie,
        draft=draft.nodes,
        draft_idx=draft.idx,
        accepted=(g,),
        matches=matches,
    )
    return replace(ev, c=2, feeds=feeds([store, context], draft.trie)), draft


def test_the_heaviest_nodes_say_what_fed_them_and_what_the_step_did():
    ev, draft = step()
    assert [chr(f.token) for f in ev.feeds] == ["g", "u", "f"]
    g, u, f = ev.feeds
    assert feeds_view.feed_status(ev, g) == "drafted, accepted"
    # c = 2 drafts 'g' and then 'ge' (as heavy as 'g'), not 'u' (4/7)
    assert [chr(t) for t in draft.nodes.tokens] == ["g", "e"]
    assert feeds_view.feed_status(ev, u) == "not drafted (fixed c = 2)"
    assert feeds_view.feed_status(ev, f) == "not drafted (fixed c = 2)"
    assert feeds_view.feed_counts(ev, g) == "4 of 9 continuations: code 2 of 7, conversation 2 of 2"
    assert feeds_view.feed_counts(ev, u) == "4 of 9 continuations: code 4 of 7, conversation 0 of 2"
    assert feeds_view.feed_examples(u, TOK) == ["“up·to·th…” ×2", "“up”", "“up()”"]


def test_the_retrieve_panel_shows_them_instead_of_the_first_occurrences():
    ev, _ = step()
    html = unescape(re.sub(r"<[^>]+>", "", phases.retrieve_html(ev, ids("say x y z"), TOK)))
    assert "Which continuations made the heaviest branches" in html
    assert (
        "g drafted, accepted · verify row 1 · weight 0.64 = mean of code 2/7 = 0.29 and conversation 2/2 = 1.00" in html
    )
    assert "“get(x” ×2" in html
    assert (
        "what followed" not in html and "f not drafted (fixed c = 2)" in html
    )  # the first occurrences' continuations, sorted, not the heaviest
    bare = unescape(phases.retrieve_html(replace(ev, feeds=()), ids("say x y z"), TOK))
    assert "heaviest branches" not in bare and "what followed" in bare


def test_each_branch_prints_its_weight_so_the_drafting_order_shows():
    """Issue: a branch fed by "1 of 336 continuations" was drafted and one fed by 21 was not, with
    nothing on the page to say why. Each listed branch now prints its share of the trie's first-level
    weight, which the step picks its nodes by, beside the counts that are not."""
    ev, _ = step()
    text = re.sub(r"<[^>]+>", "", unescape(feeds_view.feeds_html(ev, TOK)))
    assert (
        "g drafted, accepted · verify row 1 · weight 0.64 = mean of code 2/7 = 0.29 and conversation 2/2 = 1.00" in text
    )
    assert "u not drafted (fixed c = 2) · weight 0.29 = mean of code 4/7 = 0.57 and conversation 0/2 = 0.00" in text
    shares = [f.share for f in ev.feeds]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1) < 1e-9  # every first-level node listed


def test_each_drafted_branch_names_its_verify_row_and_the_caption_no_order_it_does_not_keep():
    """Issue: the list claimed to be "in the order the step drafts in", while the verify table put
    those nodes at other rows. Here 'u' (3 of 4 continuations) is the heaviest, but the draft is
    breadth first in token order: 'g' row 1, 'u' row 2, 'up' row 3."""
    store = Retrieved(SOURCE_DATASTORE, 3, (1, 2, 3), 4, rows("up", "up", "up", "get"))
    draft = build_draft([store], c=3)
    assert [chr(t) for t in draft.nodes.tokens] == ["g", "u", "p"]
    matches = [MatchInfo(SOURCE_DATASTORE, 3, (1, 2, 3), 4, (), name="code")]
    u_first = int(np.flatnonzero(draft.nodes.tokens == ord("u"))[0])
    ev = event(
        0,
        [ord("u"), ord("x")],
        [SOURCE_DATASTORE, 0],
        trie=draft.trie,
        draft=draft.nodes,
        draft_idx=draft.idx,
        accepted=(u_first,),
        matches=matches,
    )
    ev = replace(ev, c=3, feeds=feeds([store], draft.trie))
    assert [chr(f.token) for f in ev.feeds] == ["u", "g"]  # heaviest first
    assert [feeds_view.feed_row(ev, f) for f in ev.feeds] == [2, 1]
    table = unescape(re.sub(r"<[^>]+>", " ", phases.verify_html(ev, ids("say x y z"), TOK)))
    assert re.search(r"\b2 \(parent root\)\s+u\b", table) and re.search(r"\b1 \(parent root\)\s+g\b", table)
    # screens9: the root row's choice sat beside the root's own position, one before its drafts':
    # it says the place it is for ("say x y z" ends at 8, the first-level drafts sit at 9)
    assert re.search(r"last written\s+root\s+z\s+\S+\s+\(for pos 9\)\s+8\b", table), table
    panel = unescape(re.sub(r"<[^>]+>", "", feeds_view.feeds_html(ev, TOK)))
    assert "u drafted, accepted · verify row 2" in panel and "g drafted, rejected · verify row 1" in panel
    assert "the order the step drafts in" not in panel and "breadth first" in panel


def test_the_weight_rule_the_glossary_states_is_the_one_the_panel_shows():
    """Issue: How REST works said a node's weight adds shares "from both sources" while three drafted
    (code, chat, the conversation), and never said the shares shown are over the sum of the sources'
    weights. Its example, checked: at weight 1 each, a token starting all of one source's continuations
    and none of the others' weighs 1/3 of the first level."""
    from rest_core.ui.words import GLOSSARY

    code = Retrieved(SOURCE_DATASTORE, 2, (1, 2), 3, rows("xa", "xb", "xc"))
    chat = Retrieved(4, 2, (1, 2), 2, rows("ya", "zb"))
    conversation = Retrieved(SOURCE_CONTEXT, 2, (1, 2), 1, rows("yq"))
    draft = build_draft([code, chat, conversation], c=2)
    shares = {chr(f.token): f.share for f in feeds([code, chat, conversation], draft.trie)}
    assert shares["x"] == 1 / 3  # all of code's, none of the others'
    assert abs(shares["y"] - (1 / 2 + 1) / 3) < 1e-12  # half of chat's and all of the conversation's
    assert shares["x"] == words.node_share([("code", 3, 3), ("chat", 0, 2), ("conversation", 0, 1)])
    weight = next(line for line in GLOSSARY.splitlines() if line.startswith("| **weight**"))
    assert "both sources" not in weight and words.WEIGHT_RULE in weight
    assert "both sources" not in tree_key.TREE_LEGEND and "several sources reach" in tree_key.TREE_LEGEND


def test_the_glossarys_worked_example_is_what_the_panel_shows_for_it():
    """Fourth report: the glossary divided a node's shares by all three sources ("gets 1/3") while
    the panels took the mean over the sources that matched ("0.83 = mean of code 2/2 and chat 4/6"
    while the conversation showed "no match"). One rule (words.WEIGHT_RULE, the engine's: a source
    that found nothing is left out); the glossary's example, built by the engine into a step, is
    the panel's line word for word."""
    code = Retrieved(SOURCE_DATASTORE, 2, (1, 2), 2, rows("(a", "(b"))
    chat = Retrieved(4, 2, (1, 2), 6, rows("(c", "(d", "(e", "(f", "xg", "xh"))
    conversation = Retrieved.empty(SOURCE_CONTEXT, 2)
    parts = [code, chat, conversation]
    draft = build_draft(parts, c=2)
    matches = [
        MatchInfo(SOURCE_DATASTORE, 2, (1, 2), 2, (), name="code"),
        MatchInfo(4, 2, (1, 2), 6, (), name="chat"),
        MatchInfo(SOURCE_CONTEXT, 0, (), 0, ()),
    ]
    ev = replace(event(0, [ord("(")], [SOURCE_DATASTORE | 4], matches=matches), feeds=feeds(parts, draft.trie))
    paren = next(f for f in ev.feeds if f.token == ord("("))
    example = list(words.WEIGHT_EXAMPLE)
    assert abs(paren.share - words.node_share(example)) < 1e-12 and round(paren.share, 2) == 0.83
    line = feeds_view.feed_weight(ev, paren)
    assert line == words.weight_words(example) == "weight 0.83 = mean of code 2/2 = 1.00 and chat 4/6 = 0.67"
    entry = next(row for row in words.GLOSSARY.splitlines() if row.startswith("| **weight**"))
    assert words.WEIGHT_RULE in entry and line in entry and "1/3" not in entry


def test_each_weight_shows_arithmetic_that_holds():
    """Issue: "0.11 ← 37 of 193 continuations" read as a wrong fraction (37/193 is not 0.11). The
    weight is the mean of the sources' fractions: the line now shows that sum, and it adds up."""
    ev, _ = step()
    for f in ev.feeds:
        line = feeds_view.feed_weight(ev, f)
        assert "←" not in line and line.startswith(f"weight {f.share:.2f} = mean of ")
        fracs = [int(n) / int(k) for n, k in re.findall(r"(\d+)/(\d+) =", line)]
        assert len(fracs) == 2 and abs(sum(fracs) / 2 - f.share) < 0.005
    one = replace(ev.feeds[0], counts=ev.feeds[0].counts[:1], first_level=ev.feeds[0].weight * 7 / 2)
    assert feeds_view.feed_weight(ev, one) == "weight 0.29 = 2 of 7 continuations (code)"
    odd = replace(ev.feeds[0], first_level=ev.feeds[0].weight * 3)  # weighted sources: no sum shown
    assert (
        feeds_view.feed_weight(ev, odd)
        == "weight 0.33; 4 of 9 continuations: code 2 of 7, conversation 2 of 2 start with it"
    )


def test_a_step_that_drafted_nothing_lists_its_branches_in_plain_words():
    """Fourth screenshots: a step of the auto budget that drafted nothing read "What fed the 2
    heaviest branchs, of 0 drafted first-level branches". Now "the 2 heaviest branches, none of
    them drafted"."""
    ev, _ = step()
    nothing = replace(ev, draft=None, accepted=())
    assert feeds_view.feeds_listed(nothing) == "the 3 heaviest branches, none of them drafted"
    assert feeds_view.feeds_listed(replace(nothing, feeds=nothing.feeds[:1])) == "the heaviest branch, not drafted"
    assert "branchs" not in feeds_view.feeds_listed(replace(ev, accepted=()))


def test_the_inspector_says_how_many_of_a_matchs_occurrences_were_read():
    """The store's suffix occurs 40 times but 7 continuations were read (the weights' "/7"): the
    inspector says so beside the 40; the conversation read both of its 2, so nothing is added."""
    from rest_core.ui.inspector import inspector_html

    ev, _ = step()
    text = unescape(re.sub(r"<[^>]+>", "", inspector_html(ev, TOK)))
    assert "40 occurrences, a fair sample of 7 read" in text
    assert "2 occurrences, a fair sample" not in text
