"""Benchmark reports: `write_report` writes results.json, results.md and chart.html (+ chart.png
when kaleido is installed). Also the markdown tables, the Plotly charts, the run's metadata
(git commit, machine, date) and the greedy outputs that differ from `ar`, printed in full.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rest_core.bench.loop import BenchResult
from rest_core.bench.metrics import MethodSummary
from rest_core.sources import kind_of, origin


def git_commit() -> str | None:
    """The repository's HEAD commit (and '+dirty' with uncommitted changes), if in a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import torch
        import transformers

        info.update(
            torch=torch.__version__, transformers=transformers.__version__, torch_threads=torch.get_num_threads()
        )
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:{spec}}{suffix}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown_table(summaries: dict[str, MethodSummary]) -> str:
    head = (
        "| method | ms/token (with prefill) | ms/token (decode) | speedup vs ar | speedup (decode) | M "
        "| draft tokens | draft nodes/step | forward ms/step | retrieval ms/token | retrieval / decode "
        "| identical to ar | accepted per source |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    rows = []
    for s in summaries.values():
        per_source = ", ".join(f"{k} {100 * v:.0f}%" for k, v in s.accepted_share_by_source.items()) or "-"
        rows.append(
            f"| {s.method} | {_fmt(s.mean_token_ms)} | {_fmt(s.mean_token_ms_decode)} "
            f"| {_fmt(s.speedup_vs_ar, '.2f', 'x')} | {_fmt(s.speedup_vs_ar_decode, '.2f', 'x')} "
            f"| {_fmt(s.mean_generated_length)} | {_pct(s.draft_share)} | {_fmt(s.mean_draft_nodes, '.1f')} "
            f"| {_fmt(s.forward_ms_per_step, '.1f')} | {_fmt(s.retrieval_ms_per_token, '.3f')} "
            f"| {_pct(s.retrieval_share_of_decode)} | {_pct(s.identical_to_ar)} | {per_source} |"
        )
    return head + "\n".join(rows) + "\n"


def reliability_table(summaries: dict[str, MethodSummary]) -> str:
    """The auto budget's calibration per method and source ('' when no method predicted)."""
    rows = []
    for s in summaries.values():
        for key, bins in s.reliability.items():
            for b in bins:
                rows.append(
                    f"| {s.method} | {key} | {b['lo']:.1f}-{b['hi']:.1f} | {b['n']} "
                    f"| {b['predicted']:.3f} | {b['observed']:.3f} |"
                )
    if not rows:
        return ""
    head = (
        "Calibration of the auto budget: each drafted node's predicted chance that the model's path "
        "runs through it, against how often it did, per probability bin and source.\n\n"
        "| method | source | predicted bin | nodes | mean predicted | observed |\n"
        "|---|---|---|---:|---:|---:|\n"
    )
    return head + "\n".join(rows) + "\n"


def reliability_chart(summaries: dict[str, MethodSummary], title: str) -> Any | None:
    """Predicted vs observed acceptance, one panel per method that predicted (None if none did)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [n for n, s in summaries.items() if s.reliability]
    if not names:
        return None
    colors = {kind_of(mask): origin(mask).color for mask in (1, 2, 3)}
    colors["all"] = "#6b7280"
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[f"{n}: observed vs predicted" for n in names])
    for col, name in enumerate(names, 1):
        fig.add_trace(
            go.Scatter(
                x=[0, 1],
                y=[0, 1],
                mode="lines",
                line=dict(dash="dot", color="#9ca3af"),
                name="perfect",
                showlegend=col == 1,
            ),
            1,
            col,
        )
        for key, bins in summaries[name].reliability.items():
            fig.add_trace(
                go.Scatter(
                    x=[b["predicted"] for b in bins],
                    y=[b["observed"] for b in bins],
                    mode="lines+markers",
                    marker=dict(size=[6 + 2 * math.log2(1 + b["n"]) for b in bins], color=colors.get(key, "#111827")),
                    line=dict(color=colors.get(key, "#111827")),
                    name=key,
                    legendgroup=key,
                    showlegend=col == 1,
                    text=[f"{b['n']} nodes" for b in bins],
                    hovertemplate="predicted %{x:.2f}, observed %{y:.2f}, %{text}",
                ),
                1,
                col,
            )
        fig.update_xaxes(range=[0, 1], title_text="predicted", row=1, col=col)
        fig.update_yaxes(range=[0, 1], title_text="observed", row=1, col=col)
    fig.update_layout(title=f"{title}: calibration of the auto budget", height=450, template="plotly_white")
    return fig


def _plotly_html(fig: Any, path: Path, extra: Sequence[Any] = ()) -> list[str]:
    """Write the figure (and any `extra` figures below it) as self-contained HTML (works
    offline); PNG of the first figure only if kaleido is present."""
    if extra:
        parts = [fig.to_html(include_plotlyjs=True, full_html=False)]
        parts += [f.to_html(include_plotlyjs=False, full_html=False) for f in extra]
        path.write_text("<html><head><meta charset='utf-8'></head><body>" + "".join(parts) + "</body></html>")
    else:
        fig.write_html(str(path), include_plotlyjs=True, full_html=True)
    written = [str(path)]
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return written
    try:
        png = path.with_suffix(".png")
        fig.write_image(str(png), width=1200, height=450, scale=1)
        written.append(str(png))
    except Exception as exc:  # a broken kaleido/Chrome setup must not lose the results
        print(f"PNG export skipped: {exc}", file=sys.stderr)
    return written


def methods_chart(summaries: dict[str, MethodSummary], title: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(summaries)
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("ms per token (lower is better)", "speedup vs ar", "tokens per step (M)")
    )
    fig.add_trace(
        go.Bar(name="with prefill", x=names, y=[summaries[n].mean_token_ms for n in names], marker_color="#4c78a8"),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(
            name="decode only", x=names, y=[summaries[n].mean_token_ms_decode for n in names], marker_color="#9ecae9"
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(
            name="speedup",
            x=names,
            y=[summaries[n].speedup_vs_ar or 0 for n in names],
            marker_color="#54a24b",
            text=[_fmt(summaries[n].speedup_vs_ar, ".2f", "x") for n in names],
            textposition="outside",
            showlegend=False,
        ),
        1,
        2,
    )
    fig.add_trace(
        go.Bar(
            name="M",
            x=names,
            y=[summaries[n].mean_generated_length or 0 for n in names],
            marker_color="#f58518",
            showlegend=False,
        ),
        1,
        3,
    )
    fig.update_layout(title=title, barmode="group", height=450, template="plotly_white")
    return fig


def write_report(
    out_dir: Path,
    *,
    title: str,
    summaries: dict[str, MethodSummary],
    result: BenchResult,
    meta: dict[str, Any],
) -> list[str]:
    """results.json, results.md and chart.html (+ chart.png when kaleido is installed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        **meta,
        "machine": machine_info(),
        "timing": "pooled: total ms / total generated tokens; 'decode' excludes prefill; "
        "methods interleaved per problem in one process",
        "methods": {m: asdict(s) for m, s in summaries.items()},
        "identical_runs": {m: v for m, v in result.identical.items()},
        "ar_references_rerun": result.references_rerun,
        "differences": [asdict(d) for d in result.differences],
        "runs": [asdict(r) for r in result.runs],
    }
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(payload, indent=1, default=_json_default))
    md = [f"# {title}", "", _meta_lines(meta), "", markdown_table(summaries)]
    calibration = reliability_table(summaries)
    if calibration:
        md += ["", calibration]
    if result.differences:
        md += ["", f"**{len(result.differences)} greedy output(s) differ from ar** (see results.json)."]
    md_path = out_dir / "results.md"
    md_path.write_text("\n".join(md))
    written = [str(json_path), str(md_path)]
    reliability = reliability_chart(summaries, title)
    written += _plotly_html(
        methods_chart(summaries, title), out_dir / "chart.html", [reliability] if reliability is not None else []
    )
    return written


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _meta_lines(meta: dict[str, Any]) -> str:
    keys = (
        "date",
        "git_commit",
        "suite",
        "problems_run",
        "model",
        "device",
        "dtype",
        "max_new_tokens",
        "repeats",
        "torch_threads",
        "preset",
        "settings",
        "pld",
        "command",
    )
    lines = []
    for k in keys:
        if k in meta:
            v = meta[k]
            if isinstance(v, (dict, list)):
                v = json.dumps(v)
            lines.append(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}")
    return "\n".join(lines)


def print_differences(result: BenchResult, file: Any = sys.stdout) -> None:
    """Every greedy output that differs from ar, in full."""
    for d in result.differences:
        print(
            f"\nDIFFERENCE {d.method} vs ar on {d.problem_id} turn {d.turn}, first differing token {d.first_diff}:",
            file=file,
        )
        print(f"  ar   ids: {d.reference}\n  {d.method} ids: {d.output}", file=file)
        print(f"  ar   text: {d.reference_text!r}\n  {d.method} text: {d.output_text!r}", file=file)


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
