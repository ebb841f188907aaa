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
from rest_core.ui.measures import ForwardTime, curve_forward, divided, same_forward, shown
from rest_core.ui.style import ACCEPTED_COLOR, MODEL_COLOR


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
    return acceptance_scale(events, int(cs.max())) * predicted / steps


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
        rows=1, cols=2, subplot_titles=("forward cost on this device", "expected speedup vs c"), horizontal_spacing=0.14
    )
    fig.add_trace(
        go.Scatter(
            x=list(curve.sizes),
            y=list(curve.ms),
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
    c = int(min(max(chosen_c, 0), max_c))
    fig.add_trace(
        go.Scatter(
            x=[c],
            y=[float(speedup[c])],
            mode="markers+text",
            text=[f"your c = {c}"],
            textposition="top center",
            marker=dict(size=11, color=ACCEPTED_COLOR),
            name="chosen c",
            hoverinfo="skip",
        ),
        1,
        2,
    )
    fig.add_hline(y=1.0, line=dict(color="#9ca3af", dash="dot"), row=1, col=2)
    _lay_out(fig, curve)
    fig.layout.meta = dict(best_c=best)
    return fig


def _expected_speedup(curve: CostCurve, events: Sequence[StepEvent], cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each c in `cs`: the expected draft tokens accepted per step, and the expected speedup
    over plain decoding (1 + accepted tokens per step, each step costing the session's median
    overhead beside the forward plus one forward of 1 + c tokens)."""
    acc = expected_accepted(events, cs)
    speedup = (1.0 + acc) * float(curve(1)) / (step_overhead(events) + curve(cs + 1))
    return acc, speedup


def step_overhead(events: Sequence[StepEvent]) -> float:
    """The median milliseconds a REST step spends beside its forward (0 without REST steps)."""
    overheads = [e.timings.total_ms - e.timings.forward_ms for e in events if e.method == "rest"]
    return float(np.median(overheads)) if overheads else 0.0


def chosen_speedup(curve: CostCurve, events: Sequence[StepEvent], c: int) -> tuple[float, str]:
    """The expected speedup at budget `c` and its sum in printed figures, "(1 + 0.52) × 67.1 /
    (1.1 + 109.1) = 0.93× (…)", computed from those figures so it reproduces from them."""
    acc = float(expected_accepted(events, [c])[0])
    one, verify, overhead = shown(float(curve(1))), shown(float(curve(1 + c))), shown(step_overhead(events))
    value = (1 + shown(acc, 2)) * one / (overhead + verify)
    return value, (
        f"(1 + {acc:.2f}) × {one:.1f} / ({overhead:.1f} + {verify:.1f}) = {value:.2f}× ({acc:.2f}: the draft tokens "
        f"this answer's tries predict accepted per step at c = {c}, not M − 1; {overhead:.1f} ms: a step's median work "
        f"beside its forward; {one:.1f} and {verify:.1f} ms: the forwards of 1 and 1 + {c} tokens)"
    )


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


def _lay_out(fig: Any, curve: CostCurve) -> None:
    """The two panels' axes (the cost curve's on a log scale at its measured sizes) and the layout."""
    fig.update_xaxes(title_text="tokens in one forward (1 + c)", type="log", tickvals=_ticks(curve.sizes), row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="c (draft tokens verified)", row=1, col=2)
    fig.update_yaxes(title_text="× plain decoding", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        height=300,
        margin=dict(l=50, r=10, t=40, b=45),
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )


def why_c_caption(
    curve: CostCurve,
    events: Sequence[StepEvent],
    chosen_c: int,
    answer: str = "This answer",
    max_c: int = 64,
    compared: ForwardTime | None = None,
) -> str:
    """What the figure says, in words: the cost of 1 (as measured: `curve_forward`) and of 1 + c
    tokens, the acceptance and M of `answer` (the answer `events` are the steps of, named as the
    page names it), when no c beats plain decoding, why, and beside the one-token cost, Compare's
    plain decoding forward (`compared`), when the visitor compared."""
    rest = [e for e in events if e.method == "rest"]
    if not rest:
        return (
            "Generate (or step through) an answer first: the expected speedup needs the session's acceptance figures."
        )
    acc = float(np.mean([e.accepted_len for e in rest]))
    totals = rest[-1].totals  # of these steps' answer: every answer has its own M
    measured = "measured" if 1 + chosen_c in curve.sizes else "read off the line between the measured points"
    text = (
        f"Verifying 1 token costs {float(curve(1)):.1f} ms here ({curve_forward(curve).what()}) and 1 + {chosen_c} tokens {float(curve(1 + chosen_c)):.1f} ms "
        f"({divided(float(curve(1 + chosen_c)), float(curve(1)))}× as long; {measured}). {answer} accepted {acc:.2f} draft tokens per step: M = {totals.new_tokens} tokens / "
        f"{totals.steps} forwards = {totals.mean_generated_length:.2f} (the last step can end early, at the end of the "
        f"text; each answer has its own M, and the stats under the chat show the last chat answer's). So a bigger c pays only "
        f"while the extra accepted tokens outgrow the extra forward cost."
    )
    _, speedup = _expected_speedup(curve, events, np.arange(0, max_c + 1))
    best = int(np.argmax(speedup))
    _, chosen = chosen_speedup(curve, events, min(chosen_c, max_c))
    text += (
        f" On this device, with this answer's acceptance, the expected speedup is highest at c = {best} "
        f"({float(speedup[best]):.2f}× plain decoding); your c = {min(chosen_c, max_c)} expects {chosen}."
    )
    same = same_forward(curve_forward(curve), compared)
    text += f" {same}" if same else ""
    if float(speedup[1:].max()) < 1.0:
        text += (
            " Here every c is slower than plain decoding (the curve stays under the dotted 1× line; a prediction from the "
            "cost curve and this answer's acceptance, where Compare's speedup times two whole runs on the wall clock): "
            + cost_growth(curve, max_c)
        )
    return text


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
