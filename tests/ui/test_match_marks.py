"""The marks under tokens: every source's matched suffix underlined in its colour in the Retrieve
panel, and no mark in the answer's highlighting that the colour key does not explain."""

from __future__ import annotations

import re
from pathlib import Path

from rest_core.decode.events import MatchInfo
from rest_core.sources import SOURCE_CONTEXT, STYLES, origin
from rest_core.ui import answer_view, phases
from tests.ui.test_feeds_view import TOK, ids
from tests.ui.test_render import event

CSS = (Path(__file__).resolve().parents[2] / "assets" / "app.css").read_text(encoding="utf-8")


def _stripes(html: str) -> list[list[str]]:
    """Per context token of the Retrieve panel, the colours of its underline stripes, lowest first."""
    out = []
    for style in re.findall(r'<span class="tt-tok[^"]*"(?: style="([^"]*)")?>', html):
        out.append(re.findall(r"inset 0 -\d+px 0 (#[0-9a-f]{6})", style))
    return out


def test_every_sources_match_is_underlined_in_its_own_colour():
    """Issue: in step 3 chat matched 5 tokens and code 3, and only code's 3 were underlined (the
    second store's class had no style)."""
    chat, code = 1, 4
    matches = (
        MatchInfo(chat, 5, tuple(ids("a b c")[-5:]), 7, (), name="chat"),
        MatchInfo(code, 3, tuple(ids("a b c")[-3:]), 9, (), name="code"),
        MatchInfo(SOURCE_CONTEXT, 0, (), 0, ()),
    )
    ev = event(0, [ord("x")], [0], matches=matches)
    stripes = _stripes(phases.retrieve_html(ev, ids("say a b c"), TOK))
    blue, pink = origin(chat).color, origin(code).color
    assert stripes[-3:] == [[blue, pink]] * 3  # both matches cover the last 3 tokens
    assert stripes[-5:-3] == [[blue]] * 2  # chat's alone the 2 before
    assert all(not s for s in stripes[:-5])  # and nothing before them


def test_the_answer_has_no_underline_its_key_does_not_explain():
    """Issue: an orange underline under some tokens of the chat answer (those several sources
    drafted), named nowhere in the colour key: the violet fill says "several sources" alone."""
    rule = re.search(r"\.tok\.d\.both\s*\{([^}]*)\}", CSS).group(1)
    assert "box-shadow" not in rule and "border" not in rule
    key = answer_view.legend_html(["chat", "code"])
    assert "underline" not in key.replace("a dotted underline marks the model's own token", "")


def test_where_it_came_from_underlines_the_match_of_every_stores_colour():
    for css, color in STYLES.values():
        rule = re.search(rf"\.prov-match\.m-{css}\b[^{{]*\{{([^}}]*)\}}", CSS)
        assert rule and color in rule.group(1), css
