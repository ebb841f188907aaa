""" "Why this c": the measured forward-cost curve and the speedup a budget c can expect from the
session's tries, with the chosen c marked (`why_c_figure`, `why_c_caption`).

Plotly is imported only to build the figure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent
from rest_core.ui.measures import (
    COMPARED,
    STEPPED,
    ForwardTime,
    Measured,
    alone,
    curve_forward,
    divided,
    mean_over,
    ratio,
    same_forward,
    shown,
)
from rest_core.ui.style import ACCEPTED_COLOR, MODEL_COLOR, esc, plural


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
    acc, speedup = _expected_speedup(curve, events, cs)
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


def _expected_speedup(curve: CostCurve, events: Sequence[StepEvent], cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    """ "0 drafts in 12 steps, 1–3 in 20 and 9–16 in 18: 301 in all": how many drafts the REST steps
    verified, binned 0, 1–3, 4–7, 8–15, 16–31, 32 and more, each bin by the counts it holds, and
    their true sum last (one figure, so a bin's own product is never read as the total)."""
    counts = [verified(e) for e in events if e.method == "rest"]
    bins: dict[int, list[int]] = {}
    for n in counts:
        bins.setdefault(0 if n == 0 else min(n.bit_length() - 1, 5) if n >= 4 else 1, []).append(n)
    parts = []
    for i, (_, ns) in enumerate(sorted(bins.items())):
        lo, hi = min(ns), max(ns)
        what = f"{lo}" if lo == hi else f"{lo}–{hi}"
        if i == 0:
            what += " draft" if what == "1" else " drafts"
        each = "each of " if lo == hi and lo and len(ns) > 1 else ""  # the same count in each step: say so
        parts.append(f"{what} in {each}{plural(len(ns), 'step')}" if i == 0 else f"{what} in {each}{len(ns)}")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{listed}: {sum(counts)} in all" if len(counts) > 1 and sum(counts) else listed


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


def read_between(curve: CostCurve, q: int, said: str = "read between the measured") -> str:
    """Where a size was not measured, the measured sizes its cost is read between (" (read between
    the measured 16 and 32)"); "" for a measured size. Every figure quoting it says so."""
    if q in curve.sizes:
        return ""
    lower = [s for s in curve.sizes if s < q]
    higher = [s for s in curve.sizes if s > q]
    if lower and higher:
        return f" ({said} {lower[-1]} and {higher[0]})"
    return f" (extended past the measured {curve.sizes[-1]})" if lower else ""


def marker_text(curve: CostCurve, c: int) -> str:
    """The cost chart's marker label, its x value named: "1 + 16 = 17 tokens: 123.2 ms", and where
    that size was not measured, which ones it is read between."""
    return f"1 + {c} = {1 + c} tokens: {float(curve(1 + c)):.1f} ms{read_between(curve, 1 + c, 'between')}"


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


def why_c_caption(*args: Any, notes: Sequence[str] = (), **kwargs: Any) -> str:
    """What the figure says, as HTML: one idea a bullet (`why_c_points`, given the arguments it
    takes), the arithmetic folded under them, `notes` (plain text) last in the fold."""
    points, sums = why_c_points(*args, **kwargs)
    items = "".join(f"<li>{esc(x)}</li>" for x in points)
    folded = "".join(f"<li>{esc(x)}</li>" for x in [*sums, *notes])
    fold = f'<details class="why-sums"><summary>The arithmetic</summary><ul>{folded}</ul></details>' if folded else ""
    return f'<ul class="why-c">{items}</ul>{fold}'


def why_c_points(
    curve: CostCurve,
    events: Sequence[StepEvent],
    chosen_c: int,
    answer: str = "This answer",
    max_c: int = 64,
    compared: ForwardTime | None = None,
    measured: Measured | None = None,
    ran: str = STEPPED,
    elsewhere: Measured | None = None,
) -> tuple[list[str], list[str]]:
    """(the caption's bullets, the arithmetic behind them), plain text: the cost of 1 and 1 + c tokens
    (`curve_forward`), `answer`'s M and its accepted drafts (`answer`: whose steps `events` are),
    the plotted best c beside what the steps verified, why no c pays when none does, Compare's
    plain forward (`compared`), and Compare's speedup and step beside the prediction for this
    prompt (`measured`) or named as another prompt's (`elsewhere`); `ran`: how the steps ran."""
    rest = [e for e in events if e.method == "rest"]
    if not rest:
        return [
            "Generate (or step through) an answer first: the expected speedup needs the answer's acceptance figures."
        ], []
    c = min(chosen_c, max_c)
    one, verify = float(curve(1)), float(curve(1 + c))
    point, cost_sum = _verify_cost(curve, c, one, verify)
    points, sums = [point], [cost_sum]
    points.append(_m_words(rest, answer))
    points.append(
        "So a bigger c, the most draft tokens verified per step, pays only while the extra accepted drafts outgrow "
        "the extra forward cost."
    )
    _, speedup = _expected_speedup(curve, events, np.arange(0, max_c + 1))
    best = int(np.argmax(speedup))
    value, sum_ = chosen_speedup(curve, events, c)
    acc_c = float(expected_accepted(events, [c])[0])
    points.append(
        f"If every step verified its c heaviest drafts, the expected speedup would be highest at c = {best}, "
        f"{float(speedup[best]):.2f}× plain decoding."
    )
    points.extend(two_speedups(curve, rest, c))
    sums.append(TWO_DIFFER)
    beside, step_sum = _what_and_beside(curve, rest, c, answer, ran, measured, elsewhere)
    points.extend(beside)
    sums.extend(step_sum)
    points.extend(left_end(curve, events, speedup))
    sums.append(
        f"At c = {c}: {sum_}. {acc_c:.2f}: the accepted drafts per step this answer's tries predict at c = {c}; "
        f"{shown(step_overhead(events)):.1f} ms: a step's mean work beside its forward, from its timings; "
        f"{shown(one):.1f} and {shown(verify):.1f} ms: the forwards of 1 and 1 + {c} tokens."
    )
    points.append(_picked(rest, c, best))
    if float(speedup[1:].max()) < 1.0:
        point, why = _none_pays(curve, max_c)
        points.append(point)
        sums.append(why)
    same = same_forward(curve_forward(curve), compared)
    if same:
        sums.append(same)
    sums.append("Each answer has its own M; the stats under the chat show the last chat answer's.")
    return points, sums


def left_end(curve: CostCurve, events: Sequence[StepEvent], speedup: np.ndarray) -> list[str]:
    """The curve's left end in words, from the data: why no drafts reads below 1×, and why c = 1
    dips under it where it does (a forward of 2 tokens costs more than one, and one draft adds few)."""
    zero, points = float(speedup[0]), []
    if shown(zero, 2) != 1.0:
        points.append(
            f"The curve's left end, no drafts, reads {zero:.2f}×, not 1×: a step without drafts still pays the retrieval and its "
            f"other work ({shown(step_overhead(events)):.1f} ms) beside the forward."
        )
    if len(speedup) > 1 and shown(float(speedup[1]), 2) < shown(zero, 2):
        acc1 = float(expected_accepted(events, [1])[0])
        two = ratio(float(curve(2)), float(curve(1)), 2)
        points.append(
            f"It dips at c = 1 to {chosen_speedup(curve, events, 1)[0]:.2f}×: a forward of 1 + 1 tokens costs {two:.2f}× one token's, "
            f"and one draft adds only {acc1:.2f} accepted tokens per step."
        )
    return points


def what_it_is(
    curve: CostCurve, rest: Sequence[StepEvent], c: int, answer: str = "This answer", ran: str = STEPPED
) -> list[str]:
    """What the predicted speedup is and is not, beside Compare's measured one: for `answer` only,
    from its acceptance, the forward cost and its steps' measured other work; and, when it reads
    above 1×, the costs it leaves out and why Compare can still read below 1×. `ran`: how the
    answer's steps ran (`measures.STEPPED`, `measures.LIVE`), said beside their mean."""
    value, _ = chosen_speedup(curve, rest, c)
    whose = answer.replace("The ", "the ", 1).replace("This ", "this ", 1)
    out = [
        f"The prediction is for {whose} only: its acceptance, the forward cost ({alone(curve.reps)}) and its "
        f"steps' other work, {shown(step_overhead(rest)):.1f} ms a step for retrieval, building the tree and "
        f"acceptance ({mean_over(len(rest), ran)}). Compare instead times whole runs on the wall clock ({COMPARED})."
    ]
    if shown(value, 2) > 1.0:
        out.append(
            f"It reads above 1× because {whose} accepts many drafts. It leaves out the prefill and the page's drawing; "
            "Compare leaves them out too, so where Compare reads below 1× the prompt accepts fewer drafts."
        )
    return out


def _verify_cost(curve: CostCurve, c: int, one: float, verify: float) -> tuple[str, str]:
    """The bullet on what verifying 1 and 1 + c tokens costs (`one`, `verify` ms), and its arithmetic."""
    # one answer to "was 1 + c measured?" for the bullet, the marker and this fold (`read_between`)
    measured = read_between(curve, 1 + c, "read off the line between the measured").strip(" ()") or "measured"
    point = (
        f"Verifying 1 token costs {one:.1f} ms on this device ({alone(curve.reps)}); verifying 1 + {c} = {1 + c} "
        f"tokens costs {verify:.1f} ms{read_between(curve, 1 + c)}, {ratio(verify, one):.2f}× as long."
    )
    return point, f"{divided(verify, one)}. {one:.1f} ms: {curve_forward(curve).what()}; {verify:.1f} ms: {measured}."


def _none_pays(curve: CostCurve, max_c: int) -> tuple[str, str]:
    """The bullet for a curve where every c is slower than plain decoding, and its fold's note."""
    growth = cost_growth(curve, max_c)
    point = "Here every c is slower than plain decoding: the curve stays under the dotted 1× line. " + growth
    return point, (
        "The curve is a prediction from the cost curve and this answer's acceptance; Compare's speedup times two "
        "whole runs on the wall clock."
    )


def two_speedups(curve: CostCurve, rest: Sequence[StepEvent], c: int) -> list[str]:
    """The two speedups the section names, each with its formula in printed figures: predicted
    (the accepted drafts the tries predict, and the step's work beside its forward) and from the
    answer's own M over the forward's cost ratio."""
    value, _ = chosen_speedup(curve, rest, c)
    one, verify = float(curve(1)), float(curve(1 + c))
    m = shown(rest[-1].totals.mean_generated_length, 2)
    x = ratio(verify, one, 1)
    from_m = m / shown(x, 2) if shown(x, 2) else float("inf")
    acc = float(expected_accepted(rest, [c])[0])
    return [
        f"Predicted at c = {c}: 1 + the accepted drafts the tries predict, {acc:.2f}, times the forward of 1 token, "
        f"over the step's other work plus the forward of 1 + {c} = {value:.2f}×.",
        f"From this answer's M: M / the cost ratio of 1 + {c} tokens to 1 = {m:.2f} / {shown(x, 2):.2f} = {from_m:.2f}×.",
    ]


def _what_and_beside(
    curve: CostCurve,
    rest: Sequence[StepEvent],
    c: int,
    answer: str,
    ran: str,
    measured: Measured | None,
    elsewhere: Measured | None = None,
) -> tuple[list[str], list[str]]:
    """What the prediction is (`what_it_is`), how loaded its forwards ran (`forward_load`) and, when
    Compare ran on this answer's prompt, what it measured beside it (`beside_compare`), else on
    which other prompt (`other_prompt`): (bullets, the fold's lines)."""
    if measured is None:
        return what_it_is(curve, rest, c, answer, ran) + forward_load(curve, rest, ran) + other_prompt(elsewhere), []
    beside, step_sum = beside_compare(curve, rest, c, measured, ran)
    # beside Compare's figures for this prompt, what Compare reads on other prompts does not apply
    return what_it_is(curve, rest, c, answer, ran)[:1] + forward_load(curve, rest, ran) + beside, [step_sum]


# a step's forward this many times the cost measured alone, or more, is said to have run under load
LOADED = 1.25


def forward_load(curve: CostCurve, rest: Sequence[StepEvent], ran: str) -> list[str]:
    """When the answer's own forwards ran well above the cost measured alone (the median of each
    step's forward over the curve's cost of its size), one bullet saying so, both conditions
    named: the prediction uses the cost measured alone. [] otherwise."""
    ratios = [e.timings.forward_ms / float(curve(1 + verified(e))) for e in rest if e.timings.forward_ms > 0]
    if not ratios or float(np.median(ratios)) < LOADED:
        return []
    return [
        f"Its own forwards ran {float(np.median(ratios)):.1f}× slower than measured alone (median of "
        f"{plural(len(ratios), 'step')}, {ran}); the prediction uses the cost measured alone."
    ]


def other_prompt(elsewhere: Measured | None) -> list[str]:
    """Compare's speedup, when it ran on another prompt than the answer's, named as another
    prompt's in one bullet; [] without one."""
    if elsewhere is None:
        return []
    on = f"another prompt, {elsewhere.prompt}" if elsewhere.prompt else "another prompt"
    return [f"Compare's {elsewhere.speedup:.2f}× was measured on {on}: another answer."]


def beside_compare(
    curve: CostCurve, rest: Sequence[StepEvent], c: int, measured: Measured, ran: str = STEPPED
) -> tuple[list[str], str]:
    """The prediction beside what Compare measured on the same prompt, and in one short sentence why
    they differ, from the data: Compare's forward slower than the one measured alone (the load of
    the moment), or its run accepting other drafts (another M). Then, for the fold, the predicted
    step beside Compare's step by part, each with how it was measured."""
    value, _ = chosen_speedup(curve, rest, c)
    m = shown(rest[-1].totals.mean_generated_length, 2)
    points = [
        f"Compare measured {measured.speedup:.2f}× on this prompt, M = {measured.m:.2f}; "
        f"the prediction here is {value:.2f}× at c = {c}, M = {m:.2f}."
    ]
    one, verify, overhead = shown(float(curve(1))), shown(float(curve(1 + c))), shown(step_overhead(rest))
    if measured.rest is not None and measured.plain is not None:
        # a speedup is tokens per step over a step's cost ratio: both pairs, so the reader sees which differs
        acc = shown(float(expected_accepted(rest, [c])[0]), 2)
        points.append(
            "Each is tokens per step over a step's cost: Compare's REST step took "
            f"{ratio(measured.rest.total, measured.plain.total):.2f}× its plain step and wrote M = {measured.m:.2f}; "
            f"the predicted step costs {ratio(overhead + verify, one):.2f}× one token's forward and writes "
            f"1 + {acc:.2f} tokens."
        )
    step = (
        f"Predicted step: {overhead:.1f} + {verify:.1f} = {overhead + verify:.1f} ms (other work, {mean_over(len(rest), ran)}; "
        f"forward of 1 + {c} tokens, {alone(curve.reps)})."
    )
    if measured.rest is not None:
        step += f" Compare's REST step: {measured.rest.line()} ({COMPARED})."
    return points, step


TWO_DIFFER = (
    "The predicted and the M-based speedups differ by the step's other work (retrieval, building the tree), which "
    "only the prediction counts, by any step that wrote no token of its own (M counts it, the prediction does not), "
    "and where the tries' predicted acceptance differs from what the answer accepted."
)


def _m_words(rest: Sequence[StepEvent], answer: str) -> str:
    """M and what it is made of: accepted drafts per step and the model's own tokens, and why M is
    not 1 + the drafts per step when a step ended the text before the model's own token."""
    totals = rest[-1].totals  # of these steps' answer: every answer has its own M
    drafts = sum(e.accepted_len for e in rest)
    own = sum(1 for e in rest for s in e.token_sources if not s)
    steps = len(rest)
    acc = drafts / steps
    text = (
        f"{answer} wrote M = {totals.new_tokens} / {totals.steps} = {totals.mean_generated_length:.2f} tokens per step: "
        f"{plural(drafts, 'accepted draft')}, {acc:.2f} a step, and {plural(own, 'token')} of the model's own."
    )
    if own == steps:
        return text + f" M = 1 + {acc:.2f}: every step here added one token of the model's own."
    if own < steps:
        ended = "the last step" if steps - own == 1 else f"{steps - own} steps"
        return text + f" M is below 1 + {acc:.2f} because {ended} ended the text before the model's own token."
    return text


def _picked(rest: Sequence[StepEvent], c: int, best: int) -> str:
    """What the steps verified, in one sentence beside the curve's best c: the auto budget's picks
    where it chose (it drafts only where it expects to gain), else a fixed c's."""
    counts = verified_counts(rest)
    if auto_budget(rest):
        return (
            f"The auto budget verified {counts}. It picks per step and drafts only where its own cost estimate "
            "expects a gain, while "
            f"the curve's best c = {best} is one c for every step."
        )
    return f"With c = {c}, the most verified per step, the steps verified {counts}; fewer where the trie held fewer."


FLAT = 0.15  # a measured curve whose slowest point is within 15% of its fastest reads as flat


def cost_growth(curve: CostCurve, max_c: int) -> str:
    """Why no c pays, from the measured curve: about flat (so the drafts, not the forward, fall
    short) or growing with the tokens verified, by how much from 1 to 1 + `max_c`."""
    ms = np.asarray(curve.ms, np.float64)
    spread = float(ms.max() / ms.min() - 1) if ms.min() > 0 else float("inf")
    largest = int(curve.sizes[-1])
    if spread <= FLAT:
        return (
            f"the forward's measured cost is about flat on this device now ({float(ms.min()):.0f}–{float(ms.max()):.0f} ms "
            f"from 1 to {largest} tokens, within {100 * spread:.0f}%), so verifying more tokens costs little here, but "
            "this answer's accepted drafts do not make up for the step's work beside the forward."
        )
    grows = float(curve(1 + max_c) / curve(1))
    return (
        f"on this device the forward's cost grows with the tokens it verifies (1 + {max_c} tokens cost {grows:.1f}× one "
        f"token), and this answer's accepted drafts do not make up for it. A GPU verifies dozens of tokens in about the "
        "time of one, so there the same acceptance pays."
    )
