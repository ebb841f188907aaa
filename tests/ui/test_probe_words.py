"""A step where the auto budget drafted nothing to time a plain step (its probe,
rest_core.budget.auto) says so in every view of the step, from one wording (tree_key), and a
step that drafted nothing for another reason never claims to be one."""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape

from rest_core.ui import feeds_view, inspector, phases, trie_view
from rest_core.ui.tree_key import NO_GAIN_WHY, PROBE_SHORT, PROBE_WHY, budget_words, undrafted_reason
from tests.ui.test_feeds_view import step as feeds_step
from tests.ui.test_tree_reconciled import TOK


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def undrafted(probe: bool):
    """The feeds step as if nothing of its trie had been drafted: the model's own token alone."""
    ev, _ = feeds_step()
    return replace(
        ev, draft=None, accepted=(), tokens=ev.tokens[:1], token_sources=(0,), predicted=(), c=0, probe=probe
    )


def test_a_probe_says_it_timed_a_plain_step_in_every_view():
    ev = undrafted(probe=True)
    assert budget_words(ev) == f"drafted 0 ({PROBE_SHORT})"
    assert PROBE_SHORT in text(inspector.inspector_html(ev, TOK, c_max=16))
    assert PROBE_SHORT in trie_view.trie_figure(ev, TOK, c_max=16).layout.title.text
    assert PROBE_WHY in phases.trie_lead(ev) and PROBE_WHY in phases.trie_caption(ev)
    assert all(PROBE_SHORT in feeds_view.feed_status(ev, f) for f in ev.feeds)


def test_a_step_that_expected_no_gain_is_not_called_a_probe():
    ev = undrafted(probe=False)
    assert undrafted_reason(ev) == NO_GAIN_WHY
    views = [
        budget_words(ev),
        text(inspector.inspector_html(ev, TOK, c_max=16)),
        trie_view.trie_figure(ev, TOK, c_max=16).layout.title.text,
        phases.trie_lead(ev),
        phases.trie_caption(ev),
        *(feeds_view.feed_status(ev, f) for f in ev.feeds),
    ]
    assert not any(PROBE_SHORT in v or PROBE_WHY in v for v in views)
    assert NO_GAIN_WHY in phases.trie_lead(ev)
    drafted, _ = feeds_step()
    assert undrafted_reason(replace(drafted, probe=True)) == ""  # it drafted: nothing to explain


def test_a_step_that_drafted_nothing_labels_the_branches_its_retrieve_panel_names():
    """screens8, 02: the Retrieve panel named the heaviest branches ("·str", "·&") of a step that
    drafted nothing, and the tree drew them without a word: its first-level nodes say their token."""
    ev = undrafted(probe=True)
    fig = trie_view.trie_figure(ev, TOK, c_max=16)
    said = [
        s for t in fig.data if t.name == "retrieved only" and not t.showlegend and t.texttemplate != " " for s in t.text
    ]
    assert [chr(f.token) for f in ev.feeds[:2]] == ["g", "u"] == said  # the two the panel names
    drafted, _ = feeds_step()  # a step that drafted: its retrieved-only nodes stay unlabelled
    fig = trie_view.trie_figure(drafted, TOK, c_max=16)
    assert not [t for t in fig.data if t.name == "retrieved only" and not t.showlegend and t.texttemplate != " "]
