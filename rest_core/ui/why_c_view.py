""" "Why this c": the measured forward-cost curve and the speedup a budget c can expect from the
session's tries, with the chosen c marked (`why_c_figure`), and the figures the caption quotes
(`chosen_speedup`, `expected_speedup`, `verified_counts`, ...); rest_core.ui.why_c_words words them.

Plotly is imported only to build the figure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent
from rest_core.ui.measures import (
    alone,
    shown,
)
from rest_core.ui.style import ACCEPTED_COLOR, MODEL_COLOR, plural


def expected_accepted(events: Sequence[StepEvent], cs: Sequence[int]) -> np.ndarray:
    """(len(cs),) expected draft tokens accepted per step with budget c, from the session's tries.

    From the trie weights alone: a node's weight over the root's (the depth-1 weights summed)
    stands for the chance the model's path runs through it, and the shares of the c heaviest
    nodes, summed, are the predicted accepted count. This is not the auto budget's acceptance
    model (rest_core.budget.acceptance, per node from its sources, share, support, match lengths
    and depth). The prediction is scaled so that at each step's actual draft size it matches, over
    the session, what was accepted (`acceptance_scale`); a REST step without a trie counts as a
    step predicting none.
    """
    cs = np.asarray(cs, np.int64)
    steps = sum(1 for e in events if e.method == "rest")
    if not steps:
        return np.zeros(cs.shape[0])
    predicted = np.zeros(cs.shape[0])
    for _, _, w in heaviest_shares(events, int(cs.max())):
        cum = np.concatenate(([0.0], np.cumsum(w)))
        predicted += cum[np.minimum(cs, w.shape[0])]
    return answer_scale(events) * predicted / steps


def answer_scale(events: Sequence[StepEvent]) -> float:
    """`acceptance_scale` over every node the steps verified, whatever c is asked about: one scale
    per answer, so the caption's figure at one c is the chart's at that c."""
    return acceptance_scale(events, max([verified(e) for e in events] + [1]))


def heaviest_shares(events: Sequence[StepEvent], n: int) -> Iterator[tuple[StepEvent, np.ndarray, np.ndarray]]:
    """Per REST step with a trie: (the event, its `n` heaviest nodes, heaviest first, and their
    weights over the root's): what a budget up to n would verify, and each node's chance."""
    for e in events:
        trie = e.trie
        if e.method != "rest" or trie is None or len(trie) == 0:
            continue
        root_weight = float(trie.weights[trie.depths == 1].sum())
        if root_weight <= 0:
            continue
        order = np.argsort(-trie.weights, kind="stable")[:n]
        yield e, order, trie.weights[order] / root_weight


def acceptance_scale(events: Sequence[StepEvent], n: int) -> float:
    """What the weight shares are scaled by: accepted tokens over the shares of the nodes each
    step verified (its draft size, at most `n`), over the session; 1 when nothing was predicted."""
    used_pred = used_acc = 0.0
    for e, _, w in heaviest_shares(events, n):
        k = min(len(e.draft) if e.draft is not None else 0, w.shape[0])
        used_pred += float(np.cumsum(w)[k - 1]) if k else 0.0
        used_acc += e.accepted_len
    return used_acc / used_pred if used_pred > 0 else 1.0


def why_c_figure(curve: CostCurve, events: Sequence[StepEvent], chosen_c: int, max_c: int = 64):
    """Two panels: the measured forward cost against the tokens verified (1 + c), and the expected
    speedup over plain decoding against c, with the chosen c marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cs = np.arange(0, max_c + 1)
    acc, speedup = expected_speedup(curve, events, cs)
    best = int(cs[np.argmax(speedup)])
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(cost_title(curve), "expected speedup vs c<br><sup>predicted from this answer</sup>"),
        horizontal_spacing=0.14,
    )
    c = int(min(max(chosen_c, 0), max_c))
    x, y, dots = cost_line(curve, 1 + c)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            marker=dict(size=dots),
            mode="lines+markers",
            name="measured",
            line=dict(color=MODEL_COLOR),
            hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>",
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Scatter(
            x=cs.tolist(),
            y=speedup.tolist(),
            mode="lines",
            name="expected speedup",
            line=dict(color="#2563eb"),
            customdata=acc.tolist(),
            hovertemplate="c = %{x}: %{y:.2f}× (%{customdata:.2f} accepted per step)<extra></extra>",
        ),
        1,
        2,
    )
    # the caption's "1 + c tokens costs … ms", marked where the chart shows it; and the asked c
    mark(fig, 1, 1 + c, float(curve(1 + c)), marker_text(curve, c), "top left", "1 + c", 10)
    mark(fig, 2, c, float(speedup[c]), f"your c = {c}", "top center", "chosen c", 11)
    fig.add_hline(y=1.0, line=dict(color="#9ca3af", dash="dot"), row=1, col=2)
    _lay_out(fig, curve, c)
    # room above the curve for the chosen c's label, and c = 0 a little right of the y axis, so its
    # tick does not meet the y axis's 0
    top = 1.3 * max(float(np.max(speedup)), 1.0)
    fig.update_yaxes(range=[0, top], row=1, col=2)
    fig.update_xaxes(range=[-0.04 * max_c, max_c * 1.02], row=1, col=2)
    fig.layout.meta = dict(best_c=best)
    return fig


def expected_speedup(curve: CostCurve, events: Sequence[StepEvent], cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each c in `cs`: the expected draft tokens accepted per step, and the expected speedup
    over plain decoding (1 + accepted tokens per step, each step costing the session's mean
    overhead beside the forward plus one forward of 1 + c tokens)."""
    acc = expected_accepted(events, cs)
    speedup = (1.0 + acc) * float(curve(1)) / (step_overhead(events) + curve(cs + 1))
    return acc, speedup


def step_overhead(events: Sequence[StepEvent]) -> float:
    """The mean milliseconds a REST step spends beside its forward (retrieval, building the tree,
    acceptance), from the steps' own timings; 0 without REST steps. The mean, as Compare's step row."""
    overheads = [e.timings.total_ms - e.timings.forward_ms for e in events if e.method == "rest"]
    return float(np.mean(overheads)) if overheads else 0.0


def chosen_speedup(curve: CostCurve, events: Sequence[StepEvent], c: int) -> tuple[float, str]:
    """The expected speedup at c and its sum in printed figures, "(1 + 0.52) × 67.1 / (1.1 + 109.1)
    = 0.93×", computed from those figures so it reproduces from them."""
    acc = float(expected_accepted(events, [c])[0])
    one, verify, overhead = shown(float(curve(1))), shown(float(curve(1 + c))), shown(step_overhead(events))
    value = (1 + shown(acc, 2)) * one / (overhead + verify)
    return value, f"(1 + {acc:.2f}) × {one:.1f} / ({overhead:.1f} + {verify:.1f}) = {value:.2f}×"


def verified(e: StepEvent) -> int:
    """How many draft tokens a step verified (its draft's nodes)."""
    return len(e.draft) if e.draft is not None else 0


def verified_counts(events: Sequence[StepEvent]) -> str:
    """ "0 drafts in 12 steps, 1–3 drafts in 20 steps and 9–16 drafts in 18 steps: 301 drafts in all":
    how many drafts the REST steps verified, binned 0, 1–3, 4–7, 8–15, 16–31, 32 and more, each bin
    by the counts it holds, and their true sum last (one figure, so a bin's own product is never
    read as the total). Each figure names its unit, so a count of drafts never reads as one of steps
    (nor as the 1 + c tokens beside it)."""
    counts = [verified(e) for e in events if e.method == "rest"]
    bins: dict[int, list[int]] = {}
    for n in counts:
        bins.setdefault(0 if n == 0 else min(n.bit_length() - 1, 5) if n >= 4 else 1, []).append(n)
    parts = []
    for _, ns in sorted(bins.items()):
        lo, hi = min(ns), max(ns)
        what = f"{lo} draft" if lo == hi == 1 else f"{lo} drafts" if lo == hi else f"{lo}–{hi} drafts"
        each = "each of " if lo == hi and lo and len(ns) > 1 else ""  # the same count in each step: say so
        parts.append(f"{what} in {each}{plural(len(ns), 'step')}")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{listed}: {plural(sum(counts), 'draft')} in all" if len(counts) > 1 and sum(counts) else listed


def auto_budget(events: Sequence[StepEvent]) -> bool:
    """Whether the auto budget chose these steps' drafts: it records a predicted chance per node,
    and a step's c is then what it chose, 0 where it drafted nothing (a fixed c is at least 1)."""
    return any(e.predicted or e.c == 0 for e in events if e.method == "rest")


def plotted_sizes(sizes: Sequence[int]) -> list[int]:
    """The measured sizes the cost chart plots, one point per size the axis can tell apart: 64 and
    65 (both measured) would print as two points at one place, so the nearer one goes."""
    return _ticks(sizes)


def _ticks(sizes: Sequence[int], apart: float = 1.25) -> list[int]:
    """The measured sizes to label on the log axis, leaving out one too close to the last kept
    (64 and 65 would print on top of each other); the largest is always kept."""
    kept: list[int] = []
    for size in sizes:
        if kept and size / kept[-1] < apart:
            if size == sizes[-1]:
                kept[-1] = size
            continue
        kept.append(int(size))
    return kept


def cost_line(curve: CostCurve, marked: int) -> tuple[list[int], list[float], list[int]]:
    """The cost chart's line: the plotted measured sizes (a dot each) and, where 1 + c (`marked`)
    was not measured, its value read off the curve (no dot: the marker sits there), so the line
    runs through the marker the caption quotes."""
    sizes = plotted_sizes(curve.sizes)
    ms = {n: float(curve.ms[list(curve.sizes).index(n)]) for n in sizes}
    if marked not in ms and marked <= max(sizes):
        ms[marked] = float(curve(marked))
    x = sorted(ms)
    return x, [ms[n] for n in x], [6 if n in sizes else 0 for n in x]


def cost_title(curve: CostCurve) -> str:
    """The cost panel's title and, under it, how its points were measured (`measures.alone`) and
    at which sizes (`sizes_words`): the axis ticks these, bar one beside another, and 1 + c."""
    return f"forward cost on this device<br><sup>{alone(curve.reps)} per size,<br>at {sizes_words(curve.sizes)}</sup>"


def sizes_words(sizes: Sequence[int]) -> str:
    """The measured sizes, as the cost panel's title lists them: "1, 2, 4, 8, 16, 32, 64 and
    1 + 64 = 65 tokens" (the last, one past the doubling before it, is 1 + c for the largest c)."""
    said = [str(n) for n in sizes]
    if len(sizes) > 2 and sizes[-1] == sizes[-2] + 1:
        said[-1] = f"1 + {sizes[-2]} = {sizes[-1]}"
    listed = f"{', '.join(said[:-1])} and {said[-1]}" if len(said) > 1 else "".join(said)
    return f"{listed} {'token' if list(sizes) == [1] else 'tokens'}"


def read_between(curve: CostCurve, q: int, said: str = "read between the measured", unit: str = " tokens") -> str:
    """Where a size was not measured, the measured sizes its cost is read between (" (read between
    the measured 16 and 32 tokens)", the unit named so a size is not read as a c); "" for a
    measured size. Every figure quoting it says so; the chart's marker, on a tokens axis, drops the unit."""
    if q in curve.sizes:
        return ""
    lower = [s for s in curve.sizes if s < q]
    higher = [s for s in curve.sizes if s > q]
    if lower and higher:
        return f" ({said} {lower[-1]} and {higher[0]}{unit})"
    return f" (extended past the measured {curve.sizes[-1]}{unit})" if lower else ""


def marker_text(curve: CostCurve, c: int) -> str:
    """The cost chart's marker label, its x value named: "1 + 16 = 17 tokens: 123.2 ms", and where
    that size was not measured, which ones it is read between."""
    return f"1 + {c} = {1 + c} tokens: {float(curve(1 + c)):.1f} ms{read_between(curve, 1 + c, 'between', '')}"


def cost_ticks(sizes: Sequence[int], marked: int) -> list[int]:
    """The cost axis's ticks: the measured sizes the title lists (`sizes_words`), the marker's size
    `marked` (1 + c, which its label names) among them, and none so near another that their
    labels meet (17 beside 16, 65 beside 64): the marker's tick wins over a measured size beside it."""
    near = [n for n in _ticks(sizes) if max(n, marked) / min(n, marked) < 1.25]
    return sorted({n for n in _ticks(sizes) if n not in near} | {marked})


def _lay_out(fig: Any, curve: CostCurve, c: int) -> None:
    """The two panels' axes (the cost curve's on a log scale at its measured sizes and the marked
    1 + c) and the layout."""
    ticks = cost_ticks(curve.sizes, 1 + c)
    fig.update_xaxes(title_text="tokens in one forward", type="log", tickvals=ticks, row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="c, the most draft tokens verified per step", row=1, col=2)
    fig.update_yaxes(title_text="× plain decoding", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        height=320,
        margin=dict(l=50, r=10, t=72, b=45),  # room for the cost title's three lines
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )


def mark(fig: Any, col: int, x: float, y: float, text: str, where: str, name: str, size: int) -> None:
    """One labelled point on the figure's panel `col` (1: the cost, 2: the speedup)."""
    import plotly.graph_objects as go

    fig.add_trace(
        go.Scatter(
            x=[x],
            y=[y],
            mode="markers+text",
            text=[text],
            textposition=where,
            marker=dict(size=size, color=ACCEPTED_COLOR),
            name=name,
            hoverinfo="skip",
        ),
        1,
        col,
    )
