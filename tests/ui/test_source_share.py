"""The teacher's question on the page: where the session's accepted drafts came from, which
sources the c heaviest trie nodes belong to at the session's c and at c = 64, and what that
costs on this device's measured curve."""

from __future__ import annotations

import re

import numpy as np

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE
from rest_core.drafting.trie import Trie
from rest_core.ui import source_share
from tests.ui.test_render import event

CURVE = CostCurve((1, 2, 4, 8, 16, 32, 64, 128), (10.0, 11.0, 12.0, 14.0, 18.0, 26.0, 42.0, 80.0))


def _step(k: int, c: int = 2) -> object:
    """One step: a heavy context continuation (weight 6) and k lighter datastore ones (1 each); it
    verified the c heaviest (its draft)."""
    tokens = np.arange(1 + k, dtype=np.int64)
    weights = np.array([6.0] + [1.0] * k)
    sources = np.array([SOURCE_CONTEXT] + [SOURCE_DATASTORE] * k, dtype=np.uint8)
    trie = Trie(tokens, np.full(1 + k, -1), np.ones(1 + k, dtype=np.int64), weights, sources)
    n = min(c, 1 + k)
    draft = Trie(tokens[:n], np.full(n, -1), np.ones(n, dtype=np.int64), weights[:n], sources[:n])
    return event(0, [0, 99], (SOURCE_CONTEXT, 0), trie=trie, draft=draft, draft_idx=list(range(n)), accepted=(0,))


def test_the_heaviest_nodes_by_source_at_c_and_at_64():
    events = [_step(100), _step(100)]
    here_nodes, here_acc = source_share.verified_by_kind(events, 2)
    assert here_nodes == {"context": 1.0, "datastore": 1.0, "both": 0.0}
    gpu_nodes, gpu_acc = source_share.verified_by_kind(events, 64)
    assert gpu_nodes == {"context": 1.0, "datastore": 63.0, "both": 0.0}
    assert np.isclose(here_acc["context"], 6 / 7) and np.isclose(
        gpu_acc["datastore"], 63 / 7
    )  # scaled: 1 accepted of 7/106


def test_accepted_shares_count_drafted_tokens_only():
    events = [_step(3), _step(3)]
    assert source_share.accepted_shares(events) == {"context": 1.0, "datastore": 0.0, "both": 0.0}
    assert source_share.accepted_shares([]) == {}


def test_the_paragraph_names_the_shares_the_costs_and_the_gpu_case():
    text = source_share.source_share_html([_step(100)], CURVE, 2)
    assert "the conversation 100%" in text
    assert (  # c = 2
        "verified 2 draft tokens in all, accepted or not: 1 verified from the conversation, 1 verified from the "
        "datastore; 2.0 verified per step" in text
    )
    assert "over the same 1 step, are 64.0 a step: 1.0 from the conversation, 63.0 from the datastore" in text  # c = 64
    # round 2's report: "the 64 heaviest drafts per step … are 5.2 + 40.6 + 0.5" summed to 46.3, not 64:
    # a trie smaller than 64 nodes drafts fewer, so the sentence says "up to" and gives the true sum
    few = source_share.source_share_html([_step(10)], CURVE, 2)
    n = float(re.search(r"are ([\d.]+) a step: ", few).group(1))
    parts = [
        float(x) for x in re.findall(r"([\d.]+) from ", few.split(" a step: ")[1].split(".<")[0].split("</li>")[0])
    ]
    assert "the up to 64 heaviest" in few and abs(sum(parts) - n) < 0.15 and n < 64, (n, parts)
    # the cost of 1 + c is Why this c?'s caption's; here only the GPU's c, from the printed figures
    assert "1 + 2 tokens" not in text and "1 + 64 tokens takes 42.6 / 10.0 = 4.26× one token" in text
    assert "rise from 0.14 to 9.00" in text
    assert "Where do the verified drafts come from here" in text  # 1 of 2 verified nodes: not "mostly not"
    assert source_share.source_share_html([], CURVE, 2) == ""


def test_the_question_follows_the_data():
    """Where the datastore drafted most of what a step verified, the paragraph does not ask why
    its drafts are mostly not verified."""
    text = source_share.source_share_html([_step(100, 8)], CURVE, 8)  # c = 8: 1 context node, 7 datastore
    assert "mostly not verified" not in text and "rarely make the cut" not in text
    assert "Where do the verified drafts come from here" in text
    assert source_share.question({"context": 1.0, "datastore": 0.5, "both": 0.0}).startswith("Why are")


def test_the_kinds_expected_tokens_add_up_to_why_c_s_chart():
    """The paragraph weighs nodes as the chart above it does: per kind, the expected accepted
    tokens sum to why_c_view.expected_accepted at the same c (scaled to what was accepted)."""
    from rest_core.ui import why_c_view

    trie = _step(100).trie
    drafted = Trie(trie.tokens[:2], trie.parents[:2], trie.depths[:2], trie.weights[:2], trie.sources[:2])
    events = [
        event(
            0,
            [0, 1, 99],
            (SOURCE_CONTEXT, SOURCE_DATASTORE, 0),
            trie=trie,
            draft=drafted,
            draft_idx=[0, 1],
            accepted=(0, 1),
        ),
        _step(100),
    ]
    for c in (2, 8, 64):
        _, acc = source_share.verified_by_kind(events, c)
        assert np.isclose(sum(acc.values()), why_c_view.expected_accepted(events, [c])[0])


def test_the_two_source_shares_name_their_answer_and_what_they_count():
    """Issue: Why this c? said "the datastore 100%" beside the chat stats' "datastore 28%,
    conversation 11%, both 11%". One counts an answer's accepted draft tokens, the other every
    token of the last chat answer: each names its answer, its tokens and their number, and over
    the same steps both come from the same counts."""
    from html import unescape

    from rest_core.ui import stats

    steps = [
        event(0, [1, 2, 3], (SOURCE_DATASTORE, SOURCE_CONTEXT, 0), trie=_step(3).trie),
        event(1, [4, 5], (SOURCE_DATASTORE, 0), new=5, trie=_step(3).trie),
    ]
    why = unescape(source_share.source_share_html(steps, CURVE, 2, "The step-through's answer"))
    assert "Of the 3 accepted draft tokens in the step-through's answer" in why
    assert "the conversation 33%, the datastore 67%" in why and "This session's" not in why
    live = unescape(stats.stats_html(steps))
    assert (
        "Of the 5 tokens, 3 (60%) were drafted: 2 by the datastore and 1 by the conversation; 2 are the model" in live
    )


def test_several_sources_are_named_as_the_page_names_the_violet():
    """The page's violet is "several sources", followed by the names: here the conversation and a
    datastore together, so the kind never reads as a bare "several sources"."""
    from html import unescape

    both = event(0, [1, 2], (SOURCE_CONTEXT | SOURCE_DATASTORE, 0), trie=_step(3).trie)
    text = unescape(source_share.source_share_html([both], CURVE, 2))
    assert "several sources (conversation + datastore) 100%" in text
    assert text.count("several sources") == text.count("several sources (conversation + datastore)")


def test_the_verified_split_adds_up_to_the_total_why_this_c_quotes():
    """Score 7, 07: "16 in each of 17 steps (272 in all)" beside a per-step split of 2.0 + 12.3 + 0.5
    that, times 21 steps, came to more than the drafts verified. One source, the events' drafts:
    the kinds add up to the total, per step times the steps is the total, and it is the total
    Why this c?'s count quotes."""
    import re

    from rest_core.ui import why_c_view

    events = [_step(100, 16)] * 17 + [_step(9, 16)] * 3 + [_step(4, 5)]
    counts, steps = source_share.verified_drafts(events)
    total = sum(why_c_view.verified(e) for e in events)
    assert steps == 21 and sum(counts.values()) == total == 17 * 16 + 3 * 10 + 5
    line = source_share.verified_line(events, 16)
    listed = [int(n) for n in re.findall(r"(\d+) verified from", line)]
    assert f"verified {total} draft tokens in all" in line and sum(listed) == total
    per_step = float(re.search(r"; ([\d.]+) verified per step", line).group(1))
    assert abs(per_step * steps - total) < 0.05 * steps
    counted = why_c_view.verified_counts(events)
    assert counted.endswith(f": {total} drafts in all") and "(272 in all)" not in counted
    bins = re.findall(r"(\d+)(?:–(\d+))? (?:drafts? )?in (?:each of )?(\d+)", counted)
    assert sum(int(n) for *_, n in bins) == steps
