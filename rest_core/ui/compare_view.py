"""What Compare shows: REST against plain decoding (`compare`, `comparison_html`) and the tokens
over decode time (`speed_figure`).

Pure functions over the runs' `StepEvent`s; Plotly is imported only to build a figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rest_core.decode.events import SOURCE_DATASTORE, StepEvent, Totals
from rest_core.ui.style import SOURCE_COLORS, esc


@dataclass(frozen=True)
class Comparison:
    rest: Totals
    ar: Totals
    identical: bool | None  # None when sampling (outputs may differ by design)

    @property
    def speedup(self) -> float:
        return self.rest.tokens_per_s / self.ar.tokens_per_s if self.ar.tokens_per_s > 0 else 0.0


def compare(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent], greedy: bool) -> Comparison:
    if not rest_events or not ar_events:
        raise ValueError("both runs need at least one step")
    identical = None
    if greedy:
        rest_ids = [t for e in rest_events for t in e.tokens]
        ar_ids = [t for e in ar_events for t in e.tokens]
        identical = rest_ids == ar_ids
    return Comparison(rest_events[-1].totals, ar_events[-1].totals, identical)


def comparison_rows(cmp: Comparison) -> list[tuple[str, str, str]]:
    r, a = cmp.rest, cmp.ar
    rows = [
        ("tokens / s", f"{r.tokens_per_s:.1f}", f"{a.tokens_per_s:.1f}"),
        ("mean token time", f"{r.mean_token_ms:.1f} ms", f"{a.mean_token_ms:.1f} ms"),
        ("tokens / steps (M)", f"{r.new_tokens} / {r.steps} = {r.mean_generated_length:.2f}", f"{a.new_tokens} / {a.steps} = {a.mean_generated_length:.2f}"),
        ("retrieval per token", f"{r.retrieval_ms_per_token:.2f} ms", "-"),
        ("tokens from drafts", f"{100 * r.draft_share:.0f}%", "-"),
        ("prefill", f"{r.prefill_ms:.0f} ms", f"{a.prefill_ms:.0f} ms"),
    ]
    if cmp.identical is not None:
        rows.append(("same output (greedy)", "yes" if cmp.identical else "NO", ""))
    return rows


def comparison_html(cmp: Comparison) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(r)}</td><td>{esc(a)}</td></tr>" for k, r, a in comparison_rows(cmp))
    badge = ""
    if cmp.identical is not None:
        badge = (
            '<span class="same ok">identical output ✓</span>' if cmp.identical else '<span class="same bad">outputs differ</span>'
        )
    return (
        '<div class="compare">'
        f'<div class="speedup">speedup <b id="speedup-value">{cmp.speedup:.2f}×</b> {badge}</div>'
        '<table class="cmp"><thead><tr><th></th><th>REST</th><th>plain</th></tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def speed_figure(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent]):
    """Cumulative tokens over decode time for both runs (prefill excluded, as in the paper)."""
    import plotly.graph_objects as go

    def series(events: Sequence[StepEvent]) -> tuple[list[float], list[int]]:
        return [0.0] + [e.totals.elapsed_s for e in events], [0] + [e.totals.new_tokens for e in events]

    data = []
    for name, events, color in (("REST", rest_events, SOURCE_COLORS[SOURCE_DATASTORE]), ("plain", ar_events, "#6b7280")):
        if events:
            x, y = series(events)
            data.append(dict(type="scatter", x=x, y=y, mode="lines", name=name, line=dict(color=color, width=2.5, shape="hv")))
    layout = dict(
        height=260,
        margin=dict(l=50, r=10, t=10, b=40),
        xaxis=dict(title="decode time (s)", rangemode="tozero"),
        yaxis=dict(title="tokens", rangemode="tozero"),
        legend=dict(x=0.99, xanchor="right", y=0.02, yanchor="bottom", bgcolor="rgba(255,255,255,0.6)"),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    return go.Figure(data=data, layout=layout)

