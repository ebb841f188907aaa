"""Figures that measure the same thing agree (issue 29): Compare showed plain decoding's ms per token
(313 ms) beside Why this c?'s one-token forward (460 ms) with nothing saying what either was. Each
figure now names what it measures from its own data, and the two one-token forwards are shown
side by side with both definitions, from one module (rest_core.ui.measures)."""

from __future__ import annotations

from dataclasses import replace
from html import unescape

import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepTimings
from rest_core.ui import compare_view, measures, why_c_view
from tests.ui.test_render import event
from tests.ui.test_source_share import _step

CURVE = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (40.0, 40.5, 52.0, 55.0, 56.0, 80.0, 130.0, 140.0), 256, 2)


def timed(ev, forward_ms: float, total_ms: float):
    return replace(ev, timings=StepTimings(forward_ms=forward_ms, total_ms=total_ms))


def runs():
    """A REST run (2 steps, 4 tokens) and a plain one (4 one-token steps, forwards 30, 31, 50, 32 ms)
    after a 5-token prompt."""
    rest = [
        timed(event(0, [1, 2, 3], (1, 1, 0), elapsed=0.1), 70.0, 100.0),
        timed(event(1, [4], (0,), new=4, elapsed=0.2, finished=True), 60.0, 100.0),
    ]
    ar = [
        timed(event(i, [i + 1], (0,), method="ar", new=i + 1, elapsed=0.04 * (i + 1), finished=i == 3), ms, 40.0)
        for i, ms in enumerate((30.0, 31.0, 50.0, 32.0))
    ]
    return rest, ar


def test_plain_decodings_forward_is_the_median_of_its_one_token_forwards_over_the_caches_it_had():
    _, ar = runs()
    f = measures.plain_forward(ar)
    assert f.ms == pytest.approx(31.5) and (f.q, f.runs, f.stat) == (1, 4, "median")
    assert f.cache == (4, 7)  # the prompt's 5 tokens but the root, then one more per step
    assert f.what() == "one forward of 1 token over caches of 4–7 tokens, the median of 4 runs"
    assert measures.plain_forward([e for e in runs()[0]]) is None  # no plain step


def test_compares_rows_say_what_they_measure_and_its_note_takes_the_forward_from_the_same_place():
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(cmp)}
    assert rows["per token (wall clock, whole steps, prefill excluded)"] == ("50.0 ms", "40.0 ms")
    plain = measures.plain_forward(ar)
    assert rows["one forward (median; REST: root + drafts, plain: 1 token)"] == ("65.0 ms", f"{plain.ms:.1f} ms")
    note = unescape(compare_view.comparison_html(cmp))
    assert measures.PER_TOKEN in note
    assert f"Plain decoding: 40.0 ms per token against its forward's {plain.line()}" in note


def test_why_this_c_names_its_one_token_forward_and_puts_compares_beside_it():
    events = [_step(100), _step(100)]
    alone = why_c_view.why_c_caption(CURVE, events, 2, max_c=64)
    measured = measures.curve_forward(CURVE)
    assert measured.what() == "one forward of 1 token over a cache of 256 tokens, the fastest of 2 runs"
    assert f"Verifying 1 token costs {measured.ms:.1f} ms here ({measured.what()})" in alone
    assert "Compare's plain decoding" not in alone
    plain = measures.plain_forward(runs()[1])
    both = why_c_view.why_c_caption(CURVE, events, 2, max_c=64, compared=plain)
    assert (
        f"One forward of 1 token: {measured.line()}; {plain.line()}; the first is {40.0 / 31.5:.2f}× the second" in both
    )
    # a curve not measured by measure_cost_curve (a preset) does not claim how it was measured
    preset = measures.curve_forward(CostCurve((1, 64), (10.0, 12.0)))
    assert preset.what() == "one forward of 1 token, measured in a way not recorded"


def test_the_measured_curve_records_how_it_was_measured():
    from rest_core.decode.cost import measure_cost_curve
    from tests.tiny_models import tiny_loaded, torch_threads

    with torch_threads(1):
        curve = measure_cost_curve(tiny_loaded("llama").model, 4, context_len=32, reps=3)
    assert (curve.cache_len, curve.reps) == (32, 3)
