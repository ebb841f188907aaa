"""Why this c?'s words agree with its figure: the best c the plotted curve has, the chosen c's
figure, whether the quoted cost is a measured point, and axis labels that do not overlap."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.ui import why_c_view, why_c_words
from tests.ui.test_source_share import _step


def text(html: str) -> str:
    """A caption's words, tags dropped."""
    import re
    from html import unescape

    return unescape(re.sub(r"<[^>]+>", " ", html))


CPU = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (40.0, 40.5, 52.0, 55.0, 56.0, 80.0, 130.0, 140.0))


def test_the_caption_names_the_plotted_best_c_and_the_chosen_c_s_figure():
    events = [_step(100), _step(100)]
    fig = why_c_view.why_c_figure(CPU, events, 2, max_c=64)
    speed = np.asarray(fig.data[1].y)
    best = int(np.argmax(speed))
    caption = text(why_c_words.why_c_caption(CPU, events, 2, max_c=64))
    assert f"highest at c = {best}, {speed[best]:.2f}× plain decoding" in caption
    value, _ = why_c_view.chosen_speedup(CPU, events, 2)
    assert "Predicted at c = 2: " in caption and f"= {value:.2f}×." in caption and "At c = 2: (1 + " in caption
    assert value == pytest.approx(speed[2], abs=0.01)  # the figure's, but for rounding its inputs
    assert fig.layout.meta["best_c"] == best
    assert "grows at once" not in caption  # the plotted curve is flat in places: no claim it contradicts
    assert "read off the line" in caption  # 3 is not a measured size
    assert "ms: measured." in text(why_c_words.why_c_caption(CPU, events, 3, max_c=64))  # 1 + 3 = 4 is


@pytest.mark.parametrize(
    ("sizes", "ticks"), [((1, 2, 4, 8, 16, 32, 64, 65), [1, 2, 4, 8, 16, 32, 65]), ((1, 2, 3, 4), [1, 2, 3, 4])]
)
def test_axis_labels_leave_out_sizes_that_would_overlap(sizes, ticks):
    assert why_c_view._ticks(sizes) == ticks


def _slow_steps() -> list:
    """Two steps whose work beside the forward (5 s) outweighs what their drafts save: no c pays."""
    from dataclasses import replace

    from rest_core.decode.events import StepTimings

    return [replace(_step(3), timings=StepTimings(forward_ms=40.0, total_ms=5040.0)) for _ in range(2)]


def test_why_no_c_pays_is_written_from_the_measured_curve():
    """Issue: the caption said the forward's cost "grows with every token ... a CPU computes every row"
    beside a measured curve flat at ~1850 ms from 2 to 65 tokens. The sentence now reads the curve:
    flat within 15% says so, growing says by how much; and it names what "slower" rests on."""
    flat = CostCurve((1, 2, 4, 16, 65), (1850.0, 1852.0, 1849.0, 1866.0, 1870.0))
    caption = text(why_c_words.why_c_caption(flat, _slow_steps(), 2, max_c=64))
    assert "every c is slower than plain decoding" in caption
    assert "about flat on this device now (1849–1870 ms from 1 to 65 tokens, within 1%)" in caption
    assert "grows with" not in caption and "computes every row" not in caption
    assert "a prediction from the cost curve and this answer's acceptance" in caption and "Compare's speedup" in caption
    steep = CostCurve((1, 2, 4, 16, 65), (10.0, 20.0, 40.0, 160.0, 650.0))
    caption = text(why_c_words.why_c_caption(steep, _slow_steps(), 2, max_c=64))
    assert "grows with the tokens it verifies (1 + 64 tokens cost 65.0× one token)" in caption
    assert "about flat" not in caption


def test_the_chosen_c_label_fits_and_the_two_zeros_stay_apart():
    """Issue: "your c = 16" was clipped at the top of the chart, and the speedup panel's two "0"
    ticks (c = 0 and 0×) met in its corner. The panel keeps room above the curve's highest point
    and starts its c axis a little left of 0."""
    events = [_step(100), _step(100)]
    fig = why_c_view.why_c_figure(CPU, events, 16, max_c=64)
    marker = next(t for t in fig.data if t.name == "chosen c")
    top = fig.layout.yaxis2.range[1]
    assert marker.text == ("your c = 16",) and marker.textposition == "top center"
    assert top >= 1.25 * max(max(fig.data[1].y), 1.0)  # the label's line fits above the curve's peak
    lo, hi = fig.layout.xaxis2.range
    assert lo < 0 and -lo >= 0.03 * (hi - lo)  # c = 0 sits right of the y axis's 0


def _auto(n: int, accepted: int):
    """A step where the auto budget verified n drafts (it records a predicted chance per node)."""
    from dataclasses import replace

    from rest_core.drafting.trie import Trie

    step = _step(100)
    k = max(n, 0)
    nodes = Trie(
        np.arange(k, dtype=np.int64),
        np.full(k, -1),
        np.ones(k, dtype=np.int64),
        np.ones(k),
        np.ones(k, dtype=np.uint8),
    )
    sources = (1,) * accepted + (0,)
    # the auto budget records its per-step choice as the step's c
    return replace(step, draft=nodes if n else None, predicted=(0.5,) * n, c=n, token_sources=sources)


def test_why_this_c_says_what_the_auto_budget_picked_beside_the_curves_best_c():
    """Issue: "expected speedup is highest at c = 13" with c = 1-5 below 1x, while the chat answer ran
    with the auto budget. The caption names how many drafts the auto budget verified per step and
    relates it to the curve's best c in one sentence."""
    events = [_auto(0, 0)] * 3 + [_auto(2, 1), _auto(3, 0)] + [_auto(9, 2), _auto(16, 3)]
    assert why_c_view.verified_counts(events) == (
        "0 drafts in 3 steps, 2–3 drafts in 2 steps, 9 drafts in 1 step and 16 drafts in 1 step: 30 drafts in all"
    )
    words = text(why_c_words.why_c_caption(CPU, events, 16, max_c=64))
    best = why_c_view.why_c_figure(CPU, events, 16, max_c=64).layout.meta["best_c"]
    sentence = next(s for s in words.split("  ") if "The auto budget" in s).strip()
    assert sentence == (
        "The auto budget verified 0 drafts in 3 steps, 2–3 drafts in 2 steps, 9 drafts in 1 step and 16 drafts in 1 "
        "step: 30 drafts in all. It picks per step and drafts "
        f"only where its own cost estimate expects a gain, while the curve's best c = {best} is one c for every step."
    )
    # a fixed c (step-through) is not called the auto budget
    fixed = text(why_c_words.why_c_caption(CPU, [_step(100)] * 2, 16, max_c=64))
    assert "auto budget" not in fixed and "With c = 16, the most verified per step, the steps verified" in fixed


def test_the_caption_is_bullets_with_the_arithmetic_folded():
    """Issue: Why this c? was a wall of text full of nested brackets. Bullets, one idea each, the
    arithmetic in its own fold, no bracket inside another."""
    import re

    html = why_c_words.why_c_caption(CPU, [_step(100), _step(100)], 16, max_c=64)
    head, folds = html.split("<details", 1)
    assert head.startswith('<div class="why-c">') and folds.count("<li>") >= 4
    sums = folds.split("<summary>The arithmetic</summary>")[1]
    assert "57.5 / 40.0 = 1.44" in sums
    assert "57.5 / 40.0" not in html.replace(sums, "") and "(1 + " not in head  # the sums in their fold only
    for item in re.findall(r"<li>(.*?)</li>", html.replace(sums, "")):
        assert not re.search(r"\([^()]*\(", item), item  # no nested brackets


def visible(html: str) -> str:
    """What shows before any fold is opened: the HTML with every <details> taken out."""
    import re

    return re.sub(r"<details.*?</details>", "", html, flags=re.S)


def _whole(events, measured=None, prompt=(1,)):
    """Why this c?'s whole caption as the page gets it (why_c.why_c), for `events` as the step-through's."""
    from types import SimpleNamespace

    from rest_core.ui import why_c

    runtime = SimpleNamespace(calls=SimpleNamespace(cost=lambda *_: CPU), settings=SimpleNamespace(max_seconds=60.0))
    steps = SimpleNamespace(events=events, message="hi", answers=1, prompt_ids=list(prompt))
    chat = SimpleNamespace(view=None, messages=[], answers=0, prompt_ids=None)
    session = SimpleNamespace(steps=steps, chat=chat, plain_forward=None, measured=measured, why_c_of=None)
    return why_c.why_c(runtime, session, 16)[1]


def test_the_takeaway_comes_first_and_is_all_that_shows_before_the_folds():
    """Newcomer, screens14 07: Why this c? was a wall of about 16 bullets under the charts. Two lines
    show, the takeaway, first in the caption; every other sentence, the arithmetic and where the
    verified drafts come from are in folds, each named by its summary; no visible list has more
    than 3 bullets."""
    import re
    from html import unescape

    events = [_step(100), _step(100)]
    html = why_c_words.why_c_caption(CPU, events, 16, "The step-through's answer", max_c=64)
    assert html.startswith('<div class="why-c"><p class="why-lead"><b>Predicted:</b>')
    shown = text(visible(html)).split()
    lines = re.findall(r'<p class="why-lead">(.*?)</p>', visible(html))
    assert len(lines) == 2 and lines[1].startswith("<b>Measured:</b>")
    assert len(re.findall(r"[.!?](?=\s|$)", " ".join(shown))) <= 2  # at most two sentences show
    for line in lines:  # each line that quotes a figure says which kind it is
        assert re.search(r"\d", line) and ("Predicted" in line or "Measured" in line)
    summaries = [unescape(s) for s in re.findall(r"<summary>(.*?)</summary>", html)]
    assert summaries == [
        why_c_words.MEASURED_FOLD,
        why_c_words.PREDICTED_FOLD,
        why_c_words.SHAPE_FOLD,
        why_c_words.SUMS_FOLD,
    ]
    whole = _whole(events)
    caption = whole.split('<div class="tt-cap">', 1)[1]
    assert caption.startswith('<div class="why-c"><p class="why-lead">')  # the takeaway opens the caption
    assert "Where do the verified drafts come from here" in re.findall(r"<summary>(.*?)</summary>", whole)[-1]
    assert "On a GPU" in whole and "On a GPU" not in visible(whole)
    for items in re.findall(r"<ul[^>]*>(.*?)</ul>", visible(whole), flags=re.S):
        assert items.count("<li>") <= 3


def test_the_takeaways_figures_are_the_ones_the_folds_explain():
    """The takeaway's predicted speedup is chosen_speedup's, its best c the plotted curve's, its M the
    answer's, and Compare's speedup the one measured on this prompt: one source per figure."""
    import re

    from rest_core.ui import measures

    events = [_step(100), _step(100)]
    c = events[-1].c  # why_c marks a fixed c the steps ran with
    value, _ = why_c_view.chosen_speedup(CPU, events, c)
    _, speedup = why_c_view.expected_speedup(CPU, events, np.arange(0, 65))
    best = int(np.argmax(speedup))
    m = events[-1].totals
    seen = measures.Measured((1,), 0.75, 1.83, None)
    lead = text(visible(_whole(events, measured=seen)))
    assert f"used c = {c}, predicted at {value:.2f}× plain decoding" in lead
    assert f"the best c on this device now is c = {best}, predicted {float(speedup[best]):.2f}×" in lead
    assert f"wrote M = {m.mean_generated_length:.2f} tokens per step ({m.new_tokens} tokens in 1 step)" in lead
    assert "Compare measured 0.75× plain decoding on this prompt" in lead
    other = text(visible(_whole(events, measured=seen, prompt=(9,))))
    assert "Compare's measured 0.75× is another prompt's" in other
    assert "Compare has not run on this prompt" in text(visible(_whole(events)))
    # where no c pays, the takeaway says so plainly
    flat = CostCurve((1, 2, 4, 16, 65), (1850.0, 1852.0, 1849.0, 1866.0, 1870.0))
    lead = why_c_words.why_c_caption(flat, _slow_steps(), 2, max_c=64).split("<details")[0]
    assert "no c pays on this device now" in lead
    # where only c = 1 or 2 pays, it says only c near 1 pays
    cheap = np.array([0.98, 1.05, 1.01, 0.99, 0.9])
    lines = why_c_words.takeaway(CPU, events, 1, cheap, "This answer")
    assert "only c near 1 pays on this device now: the best is c = 1, predicted 1.05×" in lines[0]
    assert len(re.findall(r"\d", lines[0])) > 0


def test_why_this_c_marks_the_c_asked_for_where_the_auto_budget_chose():
    """A real chat answer's last auto-budget step chose no draft: its c read 0, and the caption spoke
    of "c = 0". Where the auto budget chose, the figure and caption take the c asked for."""
    from types import SimpleNamespace

    from rest_core.ui import why_c

    events = [_auto(0, 0), _auto(3, 1), _auto(0, 0)]
    assert why_c_view.auto_budget(events) and why_c_view.auto_budget([_auto(0, 0)])  # none drafted: still auto
    assert not why_c_view.auto_budget([_step(100)])
    runtime = SimpleNamespace(calls=SimpleNamespace(cost=lambda *_: CPU), settings=SimpleNamespace(max_seconds=60.0))
    chat = SimpleNamespace(
        view=SimpleNamespace(events=events), messages=[{"role": "user", "content": "hi"}], answers=1, prompt_ids=[1]
    )
    steps = SimpleNamespace(events=[], message="", answers=0, prompt_ids=[])
    session = SimpleNamespace(steps=steps, chat=chat, plain_forward=None, measured=None, why_c_of=None)
    fig, caption = why_c.why_c(runtime, session, 16)
    marker = next(t for t in fig.data if t.name == "chosen c")
    assert marker.text == ("your c = 16",)
    assert "c = 0" not in text(caption) and "verifying 1 + 16 = 17 tokens" in text(caption)


def test_the_same_count_in_every_step_reads_per_step_and_in_all():
    """Score 2, 07: "the steps verified 16 drafts in 4 steps" read as 16 in all; every tree says 16 each."""
    events = [_auto(16, 3)] * 4
    assert why_c_view.verified_counts(events) == "16 drafts in each of 4 steps: 64 drafts in all"


def test_both_speedups_are_named_with_their_formulas():
    """Score 2, 07: the predicted 1.13× beside M = 2.50 and 2.38× as long (about 1.05×): each speedup
    is named, its formula inline, in the printed figures."""
    events = [_step(100), _step(100)]
    words = text(why_c_words.why_c_caption(CPU, events, 16, max_c=64))
    value, _ = why_c_view.chosen_speedup(CPU, events, 16)
    acc = float(why_c_view.expected_accepted(events, [16])[0])
    assert (
        f"Predicted at c = 16: 1 + the accepted drafts the tries predict, {acc:.2f}, times the forward of 1 token, "
        f"over the step's other work plus the forward of 1 + 16 = {value:.2f}×." in words
    )
    m = events[-1].totals.mean_generated_length
    x = float(f"{CPU(17) / CPU(1):.2f}")
    assert (
        f"From this answer's M: M / the cost ratio of 1 + 16 tokens to 1 = {m:.2f} / {x:.2f} = {m / x:.2f}×." in words
    )


def test_the_cost_chart_has_one_point_per_size_and_marks_the_quoted_one():
    """Score 2, 07: two points at x = 65 (64 and 65 measured); the text's 1 + 16 tokens not on the chart."""
    fig = why_c_view.why_c_figure(CPU, [_step(100)] * 2, 16, max_c=64)
    dots = [x for x, size in zip(fig.data[0].x, fig.data[0].marker.size) if size]
    assert dots == [1, 2, 4, 8, 16, 32, 65]  # one dot per measured size
    marked = next(t for t in fig.data if t.name == "1 + c")
    # the line runs through the marker: 17 was not measured, its value read off the curve
    assert list(fig.data[0].x) == [1, 2, 4, 8, 16, 17, 32, 65] and fig.data[0].y[5] == marked.y[0]
    assert list(marked.x) == [17] and marked.y[0] == pytest.approx(float(CPU(17)))
    words = text(why_c_words.why_c_caption(CPU, [_step(100)] * 2, 16, max_c=64))
    cost = f"{float(CPU(17)):.1f} ms"
    assert (
        f"1 + 16 = 17 tokens costs {cost}" in words
        and marked.text[0] == f"1 + 16 = 17 tokens: {cost} (between 16 and 32)"
    )


def test_the_cost_axis_ticks_the_marked_size_and_no_two_ticks_meet():
    """Newcomer, 07: the marker for 1 + c = 17 tokens sat beside the tick 16 and read as 16. The
    axis ticks 17 itself (16 beside it goes), the marker names its value, and no two ticks sit
    closer than a factor 1.25 (64 and 65 would meet)."""
    fig = why_c_view.why_c_figure(CPU, [_step(100)] * 2, 16, max_c=64)
    ticks = list(fig.layout.xaxis.tickvals)
    assert ticks == [1, 2, 4, 8, 17, 32, 65]
    assert all(b / a >= 1.25 for a, b in zip(ticks, ticks[1:]))
    marked = next(t for t in fig.data if t.name == "1 + c")
    assert marked.x[0] in ticks and marked.text[0].startswith("1 + 16 = 17 tokens")
    # a measured size keeps its tick when the marker sits on it
    assert why_c_view.cost_ticks((1, 2, 4, 8, 16, 32, 64, 65), 16) == [1, 2, 4, 8, 16, 32, 65]
    assert why_c_view.cost_ticks((1, 2, 4, 8, 16, 32, 64, 65), 60) == [1, 2, 4, 8, 16, 32, 60]


def test_the_curve_at_c_0_says_why_it_is_not_1x():
    """Score 2, 07: the curve starts below 1× at c = 0; the caption says the step's other work is why."""
    events = [_step(100), _step(100)]
    fig = why_c_view.why_c_figure(CPU, events, 2, max_c=64)
    zero = float(fig.data[1].y[0])
    words = text(why_c_words.why_c_caption(CPU, events, 2, max_c=64))
    if round(zero, 2) != 1.0:
        assert f"The curve's left end, no drafts, reads {zero:.2f}×, not 1×" in words


def test_the_dip_at_c_1_is_explained_from_the_data():
    """Score 7, 07: the curve dips to 0.8× at c = 1 and only its 0.98× left end was explained. Where
    c = 1 reads below c = 0, one clause says why: the 1 + 1 forward's cost beside one draft's gain."""
    curve = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (50.0, 120.0, 120.0, 125.0, 130.0, 140.0, 200.0, 206.0))
    events = [_step(100), _step(100)]
    _, speedup = why_c_view.expected_speedup(curve, events, np.arange(0, 65))
    assert speedup[1] < speedup[0]
    words = text(why_c_words.why_c_caption(curve, events, 16, max_c=64))
    acc1 = float(why_c_view.expected_accepted(events, [1])[0])
    assert (
        f"It dips at c = 1 to {why_c_view.chosen_speedup(curve, events, 1)[0]:.2f}×: a forward of 1 + 1 tokens costs 2.40× one token's, and one draft "
        f"adds only {acc1:.2f} accepted tokens per step." in words
    )
    flat = CostCurve((1, 2, 4), (50.0, 50.0, 50.0))  # no dip: no clause
    assert "dips at c = 1" not in text(why_c_words.why_c_caption(flat, events, 2, max_c=3))


def test_the_cost_axis_is_tokens_in_one_forward_with_1_plus_c_marked():
    """Score 7, 07: the axis read "tokens in one forward (1 + c)" under ticks 1, 2, 4, 8, 17, 32, 65:
    32 is no 1 + c. The axis names tokens; the marker names 1 + c."""
    fig = why_c_view.why_c_figure(CPU, [_step(100)], 16, max_c=64)
    assert fig.layout.xaxis.title.text == "tokens in one forward"
    marker = next(t for t in fig.data if t.name == "1 + c")
    assert marker.text[0].startswith("1 + 16 = 17 tokens") and 17 in fig.layout.xaxis.tickvals


def test_the_prediction_says_what_it_is_and_is_not():
    """Score 7, 07 beside 04: Why this c? predicted 1.55× for the step-through's answer where Compare
    measured 0.84× on the chat's prompt. The caption says the prediction is for its answer only, from
    which costs (the steps' other work measured, as a mean), against what Compare times; above 1× it
    names what it leaves out."""
    from dataclasses import replace

    from rest_core.decode.events import StepTimings

    events = [replace(_step(100), timings=StepTimings(forward_ms=40.0, total_ms=41.0 + i)) for i in range(3)]
    value, _ = why_c_view.chosen_speedup(CPU, events, 16)
    assert value > 1
    words = text(why_c_words.why_c_caption(CPU, events, 16, "The step-through's answer", max_c=64))
    assert (
        "The prediction is for the step-through's answer only: its acceptance, the forward cost (measured alone) "
        "and its steps' other work, 2.0 ms a step for retrieval, building the tree and acceptance (mean of 3 steps, "
        "one step per click)" in words
    )
    assert "Compare instead times whole runs on the wall clock (mean over the run, nothing drawn)." in words
    assert "It leaves out the prefill and the page's drawing" in words
    # said in the takeaway, then once in the folds, in the formula's bullet
    assert words.split("The arithmetic")[0].count(f"{value:.2f}×") == 2
    assert why_c_view.step_overhead(events) == pytest.approx(2.0)  # the mean, as Compare's step row


def test_the_captions_accepted_drafts_at_a_c_are_the_charts():
    """Score 7, 07: the dip's clause said one draft "adds only 2.05 accepted tokens per step" where the
    chart's c = 1 read 0.81×: the caption scaled the tries' shares at its own c, the chart at 64. One
    scale per answer: the caption's figure at each c is the chart's hover at that c."""
    events = [_step(100, 16), _step(100, 8), _step(9, 4)]
    fig = why_c_view.why_c_figure(CPU, events, 16, max_c=64)
    chart = np.asarray(fig.data[1].customdata)
    for c in (1, 2, 4, 16, 64):
        assert float(why_c_view.expected_accepted(events, [c])[0]) == pytest.approx(chart[c])
    assert why_c_view.chosen_speedup(CPU, events, 1)[0] == pytest.approx(fig.data[1].y[1], abs=0.01)


@pytest.mark.parametrize(
    ("curve", "c"),
    [
        (CPU, 16),
        (CPU, 20),
        (CostCurve((1, 2, 4, 8, 16, 17), (40.0, 41.0, 45.0, 50.0, 60.0, 61.0)), 16),
        (CostCurve((1, 2, 4, 8, 16, 32, 64, 128, 129), tuple(40.0 + n for n in (1, 2, 4, 8, 16, 32, 64, 128, 129))), 3),
    ],
)
def test_the_cost_charts_words_list_its_measured_sizes_and_its_ticks_come_from_them(curve, c):
    """Screens12, complaint 3: the note said "for 1, 2, 4, … 65 tokens" under ticks 1, 2, 4, 8, 17,
    32, 65, neither a doubling series nor 1 + c. The chart's title lists the sizes measured, from
    the curve, the last as 1 + c; the ticks are those sizes, less one beside another, plus the
    marker's 1 + c, which its label names; the note above the button names no sizes."""
    import re

    from rest_core.ui import words

    fig = why_c_view.why_c_figure(curve, [_step(100)] * 2, c, max_c=64)
    title = text(fig.layout.annotations[0].text)
    listed = [int(n) for n in re.findall(r"\d+", title.split(" at ", 1)[1])]
    top = curve.sizes[-1]
    if top == curve.sizes[-2] + 1:  # "… 64 and 1 + 64 = 65 tokens"
        assert f"and 1 + {top - 1} = {top} tokens" in title
        listed = listed[:-3] + [top]
    assert listed == list(curve.sizes)
    ticks = list(fig.layout.xaxis.tickvals)
    marked = next(t for t in fig.data if t.name == "1 + c")
    assert set(ticks) <= set(curve.sizes) | {1 + c} and marked.x[0] in ticks
    assert marked.text[0].startswith(f"1 + {c} = {1 + c} tokens")
    for n in curve.sizes:  # each measured size is ticked, or sits beside a tick
        assert n in ticks or min(max(n, t) / min(n, t) for t in ticks) < 1.25, n
    assert "…" not in words.WHY_C_NOTE and not re.search(r"\d+ tokens", words.WHY_C_NOTE)


def test_an_unmeasured_size_says_which_measured_ones_it_is_read_between():
    """screens13 (07): "verifying 1 + 16 = 17 tokens costs 89.5 ms (measured alone…)" while the
    chart's title lists 16 and 32 as measured, not 17. The marker and the bullet say 17 is read
    between the measured 16 and 32; a measured size says nothing more."""

    curve = CostCurve((1, 2, 4, 8, 16, 32, 64), (40.0, 42.0, 44.0, 48.0, 60.0, 90.0, 150.0), 256, 2)
    assert why_c_view.read_between(curve, 17) == " (read between the measured 16 and 32 tokens)"
    assert why_c_view.read_between(curve, 16) == ""
    assert why_c_view.marker_text(curve, 16).endswith(" (between 16 and 32)")
    point, _ = why_c_words._verify_cost(curve, 16, 40.0, float(curve(17)))
    assert "17 tokens costs 61.9 ms (read between the measured 16 and 32 tokens)" in point
