"""The page's timing figures, each with the condition it was measured under (issue 29, round 5):
the live inspector's forward (while the page draws), Why this c?'s cost curve (measured alone,
fastest of N), Compare's step (mean over the run, nothing drawn) read as contradictions with
nothing saying how each was measured. Each figure names its condition from one wording per
condition (rest_core.ui.measures), Compare's REST step is split into the parts Why this c? costs,
and printed parts add up to their printed step."""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepTimings
from rest_core.ui import (
    compare,
    compare_rows,
    compare_view,
    inspector,
    measures,
    model_calls,
    why_c,
    why_c_view,
    why_c_words,
)
from tests.ui.test_measures import steady
from tests.ui.test_render import ByteTokenizer, trie_event
from tests.ui.test_source_share import _step
from tests.ui.test_why_c_view import _auto

CURVE = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (40.0, 40.5, 52.0, 55.0, 56.0, 80.0, 130.0, 140.0), 256, 4)


def text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def parted(ev, retrieve: float, tree: float, forward: float, accept: float):
    """`ev` timed as the engine times a step: its total is exactly its parts' sum."""
    total = retrieve + tree + forward + accept
    return replace(ev, timings=StepTimings(retrieve, tree, forward, accept, total))


def test_the_inspectors_parts_add_up_to_the_step_it_prints():
    """Newcomer, 12: "retrieve 0.48 ms · draft 0.68 ms · forward 113.5 ms · accept 1.00 ms · step
    115.6 ms": the printed parts add to 115.66, the step read 115.6. Every part is printed to 0.1 ms
    and the step is their printed sum, with how the step was timed (live, while the page draws)."""
    ev = parted(trie_event(), 0.484, 0.684, 113.46, 0.996)
    line = text(inspector.inspector_html(ev, ByteTokenizer()))
    said = f"step 115.7 ms = forward 113.5 + retrieval 0.5 + tree 0.7 + acceptance 1.0 ({measures.LIVE_SLOWER})"
    assert said in line
    # screens14: a live step's forward of 343 ms beside Compare's 141 ms a step, explained only by
    # "(live, while the page draws)": the line says which figure is the slower and why
    assert measures.LIVE_SLOWER.startswith(measures.LIVE) and "slower than Compare's steps" in measures.LIVE_SLOWER
    parts = [float(x) for x in re.findall(r"(?:forward|retrieval|tree|acceptance) (\d+\.\d)", line)]
    assert f"{sum(parts):.1f}" == "115.7"


def test_compares_rest_step_is_split_into_parts_that_add_up_to_its_step_row():
    """Newcomer, 04 beside 07: "a REST step took 2.44× a plain step" beside "1 + 16 tokens cost 1.70×
    one token", nothing splitting the step into the forward and the rest. The step row names its
    condition, and its parts (forward, retrieval + tree, acceptance + between steps), each a row,
    add up to it as printed."""
    rest = [parted(e, 4.04, 2.33, 90.12, 1.51) for e in steady([0.0] * 3, [100.0] * 3, tokens=3)]
    ar = [parted(e, 0.0, 0.0, 40.26, 0.52) for e in steady([0.0] * 6, [41.5] * 6, method="ar", tokens=1)]
    cmp = compare_view.compare(rest, ar, greedy=False)
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(cmp)}
    assert measures.COMPARED in compare_rows.STEP_ROW
    for col in (0, 1):
        step = float(rows[compare_rows.STEP_ROW][col].split()[0])
        parts = [rows[k][col] for k in (compare_rows.FORWARD_ROW, compare_rows.TREE_ROW, compare_rows.ACCEPT_ROW)]
        assert f"{sum(float(p.split()[0]) for p in parts if p != '-'):.1f}" == f"{step:.1f}"
    assert rows[compare_rows.FORWARD_ROW] == ("90.1 ms", "40.3 ms")
    assert rows[compare_rows.TREE_ROW] == ("6.3 ms", "-")  # retrieval 4.0 + tree 2.3; plain drafts nothing
    top = unescape(compare_view.comparison_html(cmp)).split("<details")[0]
    assert all(f"<th>{k}</th>" in top for k in (compare_rows.FORWARD_ROW, compare_rows.TREE_ROW))


def test_why_this_c_names_how_each_timing_was_measured():
    """Newcomer, 07 beside 02: a one-token forward of 49.7 ms, an other work of 1.3 ms a step, with
    nothing saying the first was measured alone (fastest of N) and the second is a mean of the
    answer's steps. Each says so beside it, from measures' wordings; the chart's title too."""
    events = [replace(_step(100), timings=StepTimings(forward_ms=40.0, total_ms=41.3)) for _ in range(3)]
    assert measures.alone(4) == "measured alone, fastest of 4 runs"
    words = text(why_c_words.why_c_caption(CURVE, events, 16, "The last chat answer", max_c=64, ran=measures.LIVE))
    assert f"Verifying 1 token costs 40.0 ms on this device ({measures.alone(4)})" in words
    assert (
        f"1.3 ms a step for retrieval, building the tree and acceptance ({measures.mean_over(3, measures.LIVE)})"
        in words
    )
    assert "mean of 3 steps, live, while the page draws" in words
    fig = why_c_view.why_c_figure(CURVE, events, 16, max_c=64)
    assert f"{measures.alone(4)} per size" in fig.layout.annotations[0].text


def test_why_this_c_sets_its_prediction_beside_what_compare_measured_on_the_same_prompt():
    """Newcomer, 07 beside 04: Why this c? predicted 1.85× where Compare measured 0.75×, nothing
    setting one beside the other. When Compare ran on the answer's prompt, the caption gives both,
    says in one sentence why they differ, and puts the predicted step beside Compare's by part."""
    events = [replace(_step(100), timings=StepTimings(forward_ms=40.0, total_ms=41.0)) for _ in range(3)]
    split = measures.StepSplit(95.0, 9.1, 5.3, 2.2, 0.6)
    plain = measures.StepSplit(45.1, 0.0, 0.0, 0.5, 0.4)
    seen = measures.Measured((5, 6, 7), 0.75, 1.83, split, plain=plain)
    _, sections, sums = why_c_words.why_c_points(CURVE, events, 16, "The step-through's answer", measured=seen)
    words = " ".join(p for _, points in sections for p in points)
    value, _ = why_c_view.chosen_speedup(CURVE, events, 16)
    assert f"Compare measured 0.75× on this prompt, M = 1.83; the prediction here is {value:.2f}× at c = 16" in words
    # why they differ, in the terms of a speedup: tokens per step over a step's cost, both pairs
    acc = why_c_view.expected_accepted(events, [16])[0]
    assert (
        f"Each is tokens per step over a step's cost: Compare's REST step took {112.2 / 46.0:.2f}× its plain step "
        f"and wrote M = 1.83; the predicted step costs {58.5 / 40.0:.2f}× one token's forward and writes "
        f"1 + {acc:.2f} tokens." in words
    )
    assert "where Compare reads below 1× the prompt accepts fewer drafts" not in words  # it is this prompt
    assert f"Compare's REST step: {split.line()} ({measures.COMPARED})." in " ".join(sums)
    # why_c passes Compare's figures only for an answer to the prompt Compare ran on
    runtime = SimpleNamespace(calls=SimpleNamespace(cost=lambda *_: CURVE), settings=SimpleNamespace(max_seconds=60.0))
    steps = SimpleNamespace(events=events, message="hi", answers=1, prompt_ids=[5, 6, 7])
    chat = SimpleNamespace(view=None, messages=[], answers=0, prompt_ids=None)
    session = SimpleNamespace(steps=steps, chat=chat, plain_forward=None, measured=seen, why_c_of=None)
    assert "Compare measured 0.75×" in text(why_c.why_c(runtime, session, 16)[1])
    session.measured = replace(seen, prompt_ids=(9,), prompt="“Write a palindrome check”")
    other = text(why_c.why_c(runtime, session, 16)[1])
    assert "Compare measured" not in other
    assert "Compare's 0.75× was measured on another prompt, “Write a palindrome check”: another answer." in other


def test_why_this_c_says_when_the_answers_own_forwards_ran_under_load():
    """Newcomer, 02 beside 07: the live inspector's forward of 1 + 16 rows took 212-222 ms while the
    page streamed, Why this c?'s curve 84 ms for 17 tokens alone. Where the answer's own forwards ran
    well above the cost measured alone, one bullet says by how much and how they ran."""
    slow = [replace(_step(100), timings=StepTimings(forward_ms=130.0, total_ms=140.0)) for _ in range(3)]
    # each step verified 2 drafts: 1 + 2 = 3 tokens cost 46.25 ms alone, so 130 ms is 2.8×
    words = text(why_c_words.why_c_caption(CURVE, slow, 2, "The last chat answer", max_c=64, ran=measures.LIVE))
    assert (
        "Its own forwards ran 2.8× slower than measured alone (median of 3 steps, live, while the page draws)" in words
    )
    calm = [replace(e, timings=StepTimings(forward_ms=47.0, total_ms=50.0)) for e in slow]
    assert "slower than measured alone" not in text(why_c_words.why_c_caption(CURVE, calm, 2, max_c=64))


def test_each_condition_has_one_wording_that_every_figure_takes():
    assert measures.LIVE in measures.LIVE_RATE and measures.LIVE in measures.LIVE_RATE_SO_FAR
    assert measures.NOTHING_DRAWN in measures.COMPARE_RATE and measures.NOTHING_DRAWN in measures.COMPARED
    assert measures.COMPARED in compare_rows.STEP_ROW


def test_compare_keeps_what_it_measured_for_why_this_c():
    rest = steady([60.0] * 2, [70.0] * 2)
    ar = steady([30.0] * 4, [32.0] * 4, method="ar", tokens=1)
    cmp = compare_view.compare(rest, ar, greedy=False)
    kept = compare.measured(cmp, [1, 2], "the last prompt, “hi there”")
    assert (kept.prompt_ids, kept.speedup, kept.m, kept.prompt) == ((1, 2), cmp.speedup, 2.0, "“hi there”")
    assert kept.plain.total == float(compare_view.comparison_rows(cmp)[2][2].split()[0])
    assert kept.rest.total == float(compare_view.comparison_rows(cmp)[2][1].split()[0])


def test_why_this_c_takes_the_fastest_of_several_runs_per_size():
    """Newcomer: a 65-token point once read 24.8× one token: one busy moment. Why this c? asks for the
    fastest of COST_REPS runs per size; an engine's kept curve of fewer runs is measured again."""
    asked = {}

    class Engine:
        def forward_cost(self, max_q, max_seconds=0.0, reps=0):
            asked.update(max_q=max_q, reps=reps)
            return CURVE

    models = SimpleNamespace(engine=lambda _: Engine(), lock=SimpleNamespace(hold=lambda _: _Held()))
    assert model_calls.forward_cost(models, None, 65, 10.0) is CURVE
    assert asked == {"max_q": 65, "reps": model_calls.COST_REPS} and model_calls.COST_REPS >= 3


class _Held:
    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


def test_an_engine_measures_its_curve_again_for_more_runs_per_size():
    from rest_core.decode.engine import Engine
    from tests.tiny_models import tiny_loaded, torch_threads

    lm = tiny_loaded("llama", max_positions=64)
    engine = Engine(lm.model, lm.tokenizer, None)
    with torch_threads(1):
        two = engine.forward_cost(4)
        assert engine.forward_cost(4) is two  # kept
        three = engine.forward_cost(4, reps=3)
        assert three.reps == 3 and three is not two
        assert engine.forward_cost(4, reps=2) is three  # more runs than asked: kept


def test_the_timelines_lane_names_sit_above_their_blocks():
    """Newcomer, 04: the lane names sat over the bars on a laptop (their offset counted a phone's
    height). Each name's bottom sits at its lane's bar top, in the axis's own units, at any height."""
    from tests.ui.test_compare_charts import _timeline

    fig = _timeline()
    order = list(fig.layout.yaxis.categoryarray)
    for a in fig.layout.annotations:
        assert a.yanchor == "bottom" and not a.yshift
        assert a.y == pytest.approx(order.index(a.text) + (1 - compare_view.BAR_GAP) / 2)
    assert "tap" in compare_view.BLOCK_KEY  # a phone has no hover


def test_the_phone_table_puts_each_label_above_its_figures():
    """Newcomer, 11: at 390 px the first column wrapped a label over six lines and "64 / 64 = 1.00"
    was cut. On a phone each row is a grid: the label on its own line, then REST's and plain's figures."""
    css = Path(__file__).resolve().parents[2].joinpath("assets", "app.css").read_text()
    block = css[css.index("/* phone: Compare's result") :]  # screens16: the block that took over this one's rules
    assert re.search(r"@media \(max-width: 480px\) \{[^@]*table\.cmp tr \{[^}]*grid-template-columns: 1fr 1fr", block)
    assert re.search(r"table\.cmp tbody th \{[^}]*grid-column: 1 / -1", block)


def test_a_loss_the_auto_budget_drafted_says_it_decides_from_its_own_estimate():
    """Newcomer, 01 beside 04: "the auto budget drafts only where it expects to gain" beside 0.72× with
    15-16 drafts a step. Where REST lost with the auto budget, the verdict says it decides from its
    own cost estimate, which can be off under load."""
    slow = [replace(e, predicted=(0.5,) * 15, draft=_auto(15, 1).draft) for e in steady([140.0] * 2, [150.0] * 2)]
    ar = steady([30.0] * 4, [32.0] * 4, method="ar", tokens=1)
    cmp = compare_view.compare(slow, ar, greedy=False)
    assert 0 < cmp.speedup < 1 and cmp.auto_drafts == 15.0
    why = unescape(re.search(r'id="speedup-why">(.*?)</p>', compare_view.comparison_html(cmp)).group(1))
    assert (
        "The auto budget drafted 15.0 tokens a step: it decides from its own cost estimate, which can be off under load."
        in why
    )
    fixed = compare_view.compare(steady([140.0] * 2, [150.0] * 2), ar, greedy=False)
    assert "cost estimate" not in compare_view.comparison_html(fixed)


def test_every_block_of_the_stylesheet_closes_what_it_opens():
    """Newcomer, 11: Compare's table still wrapped its labels over six lines and cut "64 / 64 = 1.00"
    at 390 px, though the stylesheet had phone rules for it: an @media block above them was never
    closed, so the browser dropped every rule after it. Each headed block starts outside any block."""
    css = Path(__file__).resolve().parents[2].joinpath("assets", "app.css").read_text()
    depth, at = 0, 0
    for m in re.finditer(r"/\*.*?\*/|[{}]", css, flags=re.S):
        token = m.group(0)
        if token.startswith("/*"):
            if re.match(r"/\* [a-z0-9]+:", token):  # a helper's block: never inside another
                assert depth == 0, (
                    f"a block above {token[:30]!r} is left open (line {css[: m.start()].count(chr(10)) + 1})"
                )
            continue
        depth += 1 if token == "{" else -1
        assert depth >= 0, css[at : m.start()]
        at = m.start()
    assert depth == 0
