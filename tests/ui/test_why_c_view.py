"""Why this c?'s words agree with its figure: the best c the plotted curve has, the chosen c's
figure, whether the quoted cost is a measured point, and axis labels that do not overlap."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.ui import why_c_view
from tests.ui.test_source_share import _step

CPU = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (40.0, 40.5, 52.0, 55.0, 56.0, 80.0, 130.0, 140.0))


def test_the_caption_names_the_plotted_best_c_and_the_chosen_c_s_figure():
    events = [_step(100), _step(100)]
    fig = why_c_view.why_c_figure(CPU, events, 2, max_c=64)
    speed = np.asarray(fig.data[1].y)
    best = int(np.argmax(speed))
    caption = why_c_view.why_c_caption(CPU, events, 2, max_c=64)
    assert f"highest at c = {best} ({speed[best]:.2f}× plain decoding)" in caption
    value, _ = why_c_view.chosen_speedup(CPU, events, 2)
    assert "your c = 2 expects (1 + " in caption and f"= {value:.2f}×" in caption
    assert value == pytest.approx(speed[2], abs=0.01)  # the figure's, but for rounding its inputs
    assert fig.layout.meta["best_c"] == best
    assert "grows at once" not in caption  # the plotted curve is flat in places: no claim it contradicts
    assert "1 + 2 tokens 40.8 ms" not in caption and "read off the line" in caption  # 3 is not a measured size
    assert "measured)" in why_c_view.why_c_caption(CPU, events, 3, max_c=64)  # 1 + 3 = 4 is


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
    caption = why_c_view.why_c_caption(flat, _slow_steps(), 2, max_c=64)
    assert "every c is slower than plain decoding" in caption
    assert "about flat on this device now (1849–1870 ms from 1 to 65 tokens, within 1%)" in caption
    assert "grows with" not in caption and "computes every row" not in caption
    assert "a prediction from the cost curve and this answer's acceptance" in caption and "Compare's speedup" in caption
    steep = CostCurve((1, 2, 4, 16, 65), (10.0, 20.0, 40.0, 160.0, 650.0))
    caption = why_c_view.why_c_caption(steep, _slow_steps(), 2, max_c=64)
    assert "grows with the tokens it verifies (1 + 64 tokens cost 65.0× one token)" in caption
    assert "about flat" not in caption
