"""Compare's two charts stay legible on a 1366 px laptop and a 390 px phone (issue 29): the page's
label over each figure hides no tick or lane, block labels that cannot fit are dropped instead of
shrunk to a vertical smudge, the legend has room below the axis title however it wraps, and the
tokens line ends inside the figure. The legend names the page's violet as the page's key does."""

from __future__ import annotations

from rest_core.bench.prompt_lookup import LookupRun
from rest_core.decode.events import MatchInfo
from rest_core.ui import compare_view
from rest_core.ui.style import SEVERAL_NAME
from tests.ui.test_render import ByteTokenizer, event


def _runs():
    matches = (MatchInfo(1, 2, (5, 6), 3, (), name="chat"), MatchInfo(4, 2, (5, 6), 3, (), name="code"))
    rest = [
        event(0, [72, 73, 74], (1, 1, 0), matches=matches, elapsed=0.1),
        event(1, [75, 76], (5, 0), matches=matches, new=5, elapsed=0.2),
        event(2, [77, 78], (4, 0), matches=matches, new=7, elapsed=0.3, finished=True),
    ]
    ar = [event(i, [72 + i], (0,), method="ar", new=i + 1, elapsed=0.05 * (i + 1)) for i in range(6)]
    return rest, ar


def _timeline():
    rest, ar = _runs()
    lanes = [
        ("plain", compare_view.event_blocks(ar)),
        ("prompt lookup k=3", compare_view.lookup_blocks(list(range(65, 77)), [1, 3, 2], [50.0, 100.0, 150.0])),
        ("REST", compare_view.event_blocks(rest)),
    ]
    return compare_view.timeline_figure(lanes, ByteTokenizer(), compare_view.run_source_names(rest))


def test_the_timeline_names_the_violet_as_the_pages_key_does():
    """Issue: the key said "several sources", the timeline "accepted drafts: chat + code"."""
    names = [t.name for t in _timeline().data]
    # one violet, one legend entry (screens7: four "several sources (…)" entries shared one swatch);
    # which sources, its blocks' hover
    assert f"accepted drafts: {SEVERAL_NAME}" in names
    assert not any("chat + code" in n for n in names)
    hovers = [h for t in _timeline().data if t.name == f"accepted drafts: {SEVERAL_NAME}" for h in t.hovertext]
    assert hovers and all(h.startswith(f"{SEVERAL_NAME} (chat + code)<br>") for h in hovers)
    assert {"accepted drafts: chat", "accepted drafts: code", "accepted drafts: prompt lookup"} <= set(names)
    # with the conversation among them, no bracket inside the bracket
    from rest_core.decode.events import SOURCE_CONTEXT

    assert compare_view.block_sources(1 | SOURCE_CONTEXT, {1: "chat"}) == f"{SEVERAL_NAME} (chat + conversation)"


def test_the_timelines_blocks_carry_no_text_and_its_rows_clear_the_label():
    """Issue: prompt lookup's blocks carried tiny vertical text; newcomer, 04: the in-block labels were
    unreadable. The blocks carry none: colour says who drafted, hover what they wrote. On the phone
    the "plain" row hid under the chart's label, the x title was cut and met the legend."""
    fig = _timeline()
    assert all(t.text is None for t in fig.data)
    assert all(" ms<br>" in h for t in fig.data for h in t.hovertext)  # each hover: its time, then its tokens
    assert fig.layout.margin.t >= compare_view.TOP_MARGIN  # the page's two-line label on a phone
    assert fig.layout.xaxis.title.text == "decode time (ms)"  # fits 330 px; the text above says prefill is excluded
    legend = fig.layout.legend
    assert (legend.yref, legend.y, legend.yanchor) == (
        "container",
        0,
        "bottom",
    )  # anchored to the plot, it pushed it right
    shown = [t.name for t in fig.data if t.showlegend]
    rows = compare_view.legend_rows(shown, compare_view.phone_plot(fig.layout.margin))
    assert rows == len(shown)  # at a phone's width each of these names takes its own row
    # the x title alone in the margin: the container legend reserves its rows as drawn (no band on a laptop)
    assert fig.layout.margin.b == compare_view.UNDER_AXIS and fig.layout.xaxis.automargin is True
    assert fig.layout.height >= fig.layout.margin.t + 60 * 3 + 50 + compare_view.LEGEND_ROW * (1 + rows)
    assert compare_view.legend_rows(shown, width=700) < rows  # a laptop puts several on a row
    assert compare_view.legend_rows([], width=700) == 0


def test_the_tokens_chart_clears_its_label_and_ends_inside_the_figure():
    """Issue: the "Tokens over time" label covered the y axis's top tick; on the phone the REST line
    ran off the right edge."""
    rest, ar = _runs()
    fig = compare_view.speed_figure(rest, ar)
    assert fig.layout.margin.t >= compare_view.TOP_MARGIN
    lo, hi = fig.layout.xaxis.range
    last = max(max(t.x) for t in fig.data)
    assert lo == 0 and hi > 1.02 * last  # room past the last step


def test_the_timelines_key_reads_on_a_phone_and_its_blocks_get_the_width():
    """Score 2, 04/11: block labels had no key; on the phone the lanes shrank to slivers. Newcomer,
    11: the key's caption was cut at 390 px and the blocks were slivers. The key is the legend's
    title, from the figure's left edge, in 12 px type, one line at a phone's width; the lane names
    sit over their lanes, so the plot starts at the figure's edge."""
    fig = _timeline()
    legend = fig.layout.legend
    assert legend.title.text == compare_view.BLOCK_KEY and legend.xref == "container" and legend.x == 0
    assert legend.font.size >= 12
    # one line in the phone's 300 px figure (prose at 12 px measured 5.9 px a character there)
    assert 6.4 * len(compare_view.BLOCK_KEY) <= compare_view.PHONE_FIGURE
    assert fig.layout.margin.l <= 10 and fig.layout.yaxis.showticklabels is False
    names = [a.text for a in fig.layout.annotations]
    assert names == ["plain", "prompt lookup k=3", "REST"] and all(
        a.yanchor == "bottom" for a in fig.layout.annotations
    )
    lanes = 3
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert plot >= 60 * lanes  # each lane at least 60 px tall, whatever the width


def test_the_tokens_chart_keeps_its_legend_off_the_curves():
    """Newcomer, 11: on the phone the legend sat over the curves. It sits under the x axis's title,
    at both widths, with room for every row it wraps to at 390 px."""
    rest, ar = _runs()
    fig = compare_view.speed_figure(rest, ar)
    legend = fig.layout.legend
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == ("h", "container", 0, "bottom")
    rows = compare_view.legend_rows([t.name for t in fig.data], compare_view.phone_plot(fig.layout.margin))
    assert fig.layout.margin.b == compare_view.UNDER_AXIS and fig.layout.xaxis.automargin is True
    # the plot keeps its height under the phone's legend rows
    assert fig.layout.height - fig.layout.margin.t - 50 - compare_view.LEGEND_ROW * rows >= 200


def test_the_tokens_chart_keeps_its_plot_height_under_the_phones_legend():
    """Screens16, 11: on the phone the tokens chart's plot was 233 x 160 px, not 200 tall: its
    height kept room for one legend row, the three names' total width against 330 px, where Plotly
    bounds a horizontal legend by the plot's width (234 px there) and, once its items do not fit
    one row, sets them in a grid as wide as the widest ("prompt lookup k=3"): three rows."""
    rest, ar = _runs()
    lookup = LookupRun(tuple(range(65, 77)), (1, 3, 2), (50.0, 100.0, 150.0), 10.0, False, 3)
    fig = compare_view.speed_figure(rest, ar, lookup)
    names = [t.name for t in fig.data]
    assert names == ["REST", "plain", "prompt lookup k=3"]
    phone = compare_view.phone_plot(fig.layout.margin)
    assert phone == compare_view.PHONE_FIGURE - 50 - 16
    assert compare_view.legend_rows(names, phone) == 3  # as a 390 px phone drew them
    assert compare_view.legend_rows(names, width=700) == 1  # a laptop: one row
    below = fig.layout.height - fig.layout.margin.t - compare_view.UNDER_AXIS
    assert below - compare_view.LEGEND_ROW * 3 >= compare_view.SPEED_PLOT
    # Plotly's grid: as many columns as the widest item fits, then the rows they take
    assert compare_view.legend_rows(["a", "b", "c", "d"], width=130) == 2
    assert compare_view.legend_rows(["a" * 40, "b"], width=130) == 2


def test_no_empty_band_between_the_timeline_and_its_legend_on_a_laptop():
    """Score 7, 04: a big gap between the block chart and its legend on a laptop: the bottom margin
    held the rows a phone wraps the legend to. The margin holds the axis's title only; the legend,
    anchored to the container's bottom, reserves the rows it takes at the width drawn."""
    fig = _timeline()
    shown = [t.name for t in fig.data if t.showlegend]
    phone = compare_view.phone_plot(fig.layout.margin)
    assert compare_view.legend_rows(shown, width=1000) < compare_view.legend_rows(shown, phone)
    assert fig.layout.margin.b < 50 + compare_view.LEGEND_ROW * (1 + compare_view.legend_rows(shown, width=1000))


def test_a_block_takes_the_colour_of_who_drafted_most_of_it():
    """screens9: a step whose first token several sources drafted and whose next three the
    conversation alone did read "several sources" in the block chart, against the key's meaning."""
    from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE
    from tests.ui.test_render import event

    both = SOURCE_DATASTORE | SOURCE_CONTEXT
    ev = event(0, [1, 2, 3, 4, 5], (both, SOURCE_CONTEXT, SOURCE_CONTEXT, SOURCE_CONTEXT, 0))
    assert compare_view.event_blocks([ev])[0].sources == SOURCE_CONTEXT
    tie = event(0, [1, 2, 3], (both, SOURCE_CONTEXT, 0))
    assert compare_view.event_blocks([tie])[0].sources == both  # a tie: the first drafted
    assert compare_view.event_blocks([event(0, [1], (0,))])[0].sources == 0
