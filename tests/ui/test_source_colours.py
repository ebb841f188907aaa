"""One colour and one name per source in every view of a page: the default stores keep their bits
whichever of them a message drafts from, and every view calls a token of several sources the same."""

from __future__ import annotations

import html
import re

import pytest

from rest_core.decode.events import MatchInfo
from rest_core.sources import SOURCE_CONTEXT, SourceTable, stable_bits
from rest_core.ui import answer_view, compare_view, source_share
from rest_core.ui.style import DEFAULT_STORES, SEVERAL_NAME
from tests.ui.test_render import event


def _css(stores: list[str]) -> dict[str, str]:
    """Store name -> the CSS class the colour key gives it."""
    out = answer_view.legend_html(stores)
    return dict(
        (n, c)
        for c, n in re.findall(
            r'class="tok d (\w+) r1 p0" title="draft tokens retrieved from the datastore (\w+)"', out
        )
    )


def test_a_default_store_keeps_its_colour_whichever_stores_a_message_drafts_from():
    """Issue: "chat" pink on the desktop (a code question: code + chat), blue on the phone (chat
    alone): its colour came from its place in the message's store list."""
    alone, both, other_order = _css(["chat"]), _css(["code", "chat"]), _css(["chat", "code"])
    assert alone["chat"] == both["chat"] == other_order["chat"]
    assert both["code"] == other_order["code"] == _css(["code"])["code"] != both["chat"]
    assert stable_bits(["code", "chat"], DEFAULT_STORES) == stable_bits(["chat", "code"], DEFAULT_STORES)[::-1]
    # a store of the visitor's own takes a bit no default store holds, then what is left
    mine = stable_bits(["mine"], DEFAULT_STORES)[0]
    assert mine not in stable_bits(["chat", "code"], DEFAULT_STORES)
    assert stable_bits(["mine", "chat"], DEFAULT_STORES) == (mine, stable_bits(["chat"], DEFAULT_STORES)[0])
    # without fixed names, the i-th store takes the i-th bit, as before
    assert SourceTable.for_stores(["b", "a"]).bit("b") == SourceTable.for_stores(["b"]).bit("b")
    many = [f"s{i}" for i in range(6)]
    assert len(set(stable_bits(many, DEFAULT_STORES))) == 6 and SOURCE_CONTEXT not in stable_bits(many, DEFAULT_STORES)
    with pytest.raises(ValueError):
        stable_bits([*many, "s6"], DEFAULT_STORES)


def test_every_view_calls_tokens_of_several_sources_by_one_name():
    """Issue: the phone's key (one store) said "both", the desktop's "several"; the share line "both"."""
    for stores in (["chat"], ["code", "chat"]):
        key = html.unescape(answer_view.legend_html(stores))
        assert f">{SEVERAL_NAME}<" in key and ">both<" not in key and ">several<" not in key
    assert source_share.LABELS["both"].startswith(f"{SEVERAL_NAME} (")


def test_compares_timeline_names_the_stores_by_their_names():
    """Issue: the timeline's key named the stores "datastore" and "store 2"."""
    matches = (MatchInfo(1, 2, (5, 6), 3, (), name="chat"), MatchInfo(4, 2, (5, 6), 3, (), name="code"))
    events = [
        event(0, [7, 8, 9], (1, 4, 0), matches=matches, elapsed=0.1),
        event(1, [10, 11], (5, 0), matches=matches, new=5, elapsed=0.2),
    ]
    names = compare_view.run_source_names(events)
    assert names == {1: "chat", 4: "code"}

    class Tok:
        def decode(self, ids, **_):
            return " ".join(map(str, ids))

    fig = compare_view.timeline_figure([("REST", compare_view.event_blocks(events))], Tok(), names)
    legend = {tr.name for tr in fig.data}
    assert {"accepted drafts: chat", f"accepted drafts: {SEVERAL_NAME}"} <= legend
    assert not any("datastore" in n or "store 2" in n for n in legend)
