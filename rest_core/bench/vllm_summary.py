"""The vLLM bench's figures: per method and batch size, one summary over its interleaved rounds
(medians of the rates, with each round's figure and load average kept; drafts, acceptance, M and
identity with ar pooled), and the report files (results.json, results.md)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class VllmSummary:
    method: str
    batch: int
    requests: int
    new_tokens: int
    wall_s: float
    tokens_per_s: float  # all requests' tokens / the pass's wall time
    tokens_per_s_request: float  # mean over requests of tokens / latency
    mean_token_ms: float  # per request: latency / tokens, pooled (prefill included)
    mean_generated_length: float  # M: tokens per step of a request
    draft_tokens_per_step: float  # drafted tokens per step of a request (0 for ar)
    mean_draft_length: float  # drafted tokens per step that drafted
    acceptance: float | None  # accepted / drafted
    identical_to_ar: float | None  # share of requests whose tokens equal ar's at this batch size
    identical_to_ar_batch1: float | None = None  # ... equal ar's output for that prompt at batch 1
    speedup_vs_ar: float | None = None  # tokens_per_s ratio (medians over rounds)
    speedup_vs_ar_request: float | None = None  # tokens_per_s_request ratio
    accepted_per_position: list[int] = field(default_factory=list)
    proposer: dict[str, Any] = field(default_factory=dict)  # REST: drafted / accepted per source
    tokens_per_s_passes: list[float] = field(default_factory=list)  # one per round, in order
    speedup_passes: list[float] = field(default_factory=list)  # tokens/s over ar's in the same round
    loadavg_passes: list[list[float]] = field(default_factory=list)  # per round: 1-min load before, after


# --------------------------------------------------------------------------------------------
# Summaries


def summarize(results: dict[str, Any]) -> tuple[dict[int, dict[str, VllmSummary]], list[dict[str, Any]]]:
    """Per batch size, per method: its summary over its rounds (`results[name]`: the worker
    results of its rounds in order, or one result for a single round); and every greedy output
    that differs from ar's in the same round (request j of a batch size asks the same prompt of
    every method)."""
    rounds = {name: (r if isinstance(r, list) else [r]) for name, r in results.items()}
    ar_rounds = rounds.get("ar", [])
    per: dict[int, dict[str, list[tuple[VllmSummary, dict[str, Any], list[bool]]]]] = {}
    differences: list[dict[str, Any]] = []
    for name, results_r in rounds.items():
        for r, result in enumerate(results_r):
            ar_runs = {x["batch"]: x for x in ar_rounds[r]["batches"]} if r < len(ar_rounds) else {}
            ar_first = {q["prompt"]: q["token_ids"] for q in reversed(ar_runs[1]["requests"])} if 1 in ar_runs else {}
            for run in result["batches"]:
                b = run["batch"]
                ref = [q["token_ids"] for q in ar_runs[b]["requests"]] if b in ar_runs else None
                same = _compare(name, run, ref, r, differences)
                summary = _run_summary(name, run, result, ref, same, ar_first)
                per.setdefault(b, {}).setdefault(name, []).append((summary, run, same))
    table = {b: {name: _combine(name, parts) for name, parts in by.items()} for b, by in sorted(per.items())}
    for by_method in table.values():
        base = by_method.get("ar")
        for s in by_method.values():
            if base is not None and base.tokens_per_s and base.tokens_per_s_request:
                s.speedup_vs_ar = s.tokens_per_s / base.tokens_per_s
                s.speedup_vs_ar_request = s.tokens_per_s_request / base.tokens_per_s_request
                s.speedup_passes = [
                    x / y for x, y in zip(s.tokens_per_s_passes, base.tokens_per_s_passes, strict=False)
                ]
    return table, differences


def _compare(
    name: str, run: dict[str, Any], ref: list[Any] | None, r: int, differences: list[dict[str, Any]]
) -> list[bool]:
    """Request by request, whether run's tokens equal ar's (ref) in the same round; each that
    does not goes into differences."""
    same = []
    b = run["batch"]
    for j, q in enumerate(run["requests"]):
        if ref is not None and name != "ar":
            ok = q["token_ids"] == ref[j]
            same.append(ok)
            if not ok:
                differences.append(
                    {
                        "method": name,
                        "batch": b,
                        "round": r,
                        "request": j,
                        "prompt": q["prompt"],
                        "first_diff": _first_diff(q["token_ids"], ref[j]),
                    }
                )
    if run.get("passes_identical") is False:  # greedy: a repeated pass must give the same tokens
        differences.append(
            {
                "method": name,
                "batch": b,
                "round": r,
                "request": None,
                "prompt": None,
                "first_diff": None,
                "what": "repeated passes differ",
            }
        )
    return same


def _combine(name: str, parts: list[tuple[VllmSummary, dict[str, Any], list[bool]]]) -> VllmSummary:
    """One method at one batch size over its rounds: the medians of the rates, each round's rate
    and load average kept beside them; drafts, acceptance, M and identity pooled over rounds."""
    rounds = [s for s, _, _ in parts]
    runs = [run for _, run, _ in parts]
    pooled = {
        "batch": runs[0]["batch"],
        "wall_s": sum(run["wall_s"] for run in runs),
        "requests": [q for run in runs for q in run["requests"]],
        "spec": _sum_counts([run["spec"] for run in runs]),
    }
    same = [x for _, _, s in parts for x in s]
    ref = [] if rounds[0].identical_to_ar is not None else None
    out = _run_summary(name, pooled, {"batches": []}, ref, same, {})
    b1 = [s.identical_to_ar_batch1 for s in rounds if s.identical_to_ar_batch1 is not None]
    out.identical_to_ar_batch1 = statistics.mean(b1) if b1 else None
    out.requests = rounds[0].requests
    out.wall_s = statistics.median(s.wall_s for s in rounds)
    out.tokens_per_s = statistics.median(s.tokens_per_s for s in rounds)
    out.tokens_per_s_request = statistics.median(s.tokens_per_s_request for s in rounds)
    out.tokens_per_s_passes = [s.tokens_per_s for s in rounds]
    out.loadavg_passes = [list(run.get("loadavg") or []) for run in runs]
    out.proposer = _sum_counts([s.proposer for s in rounds])  # {} for methods without the REST proposer
    if out.proposer:
        calls = out.proposer.get("calls") or 0
        out.proposer["propose_ms_per_call"] = out.proposer.get("propose_ms", 0) / calls if calls else 0.0
        out.proposer["cost_curve"] = rounds[-1].proposer.get("cost_curve")
        out.proposer["req_ids"] = rounds[-1].proposer.get("req_ids")
    return out


def _sum_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers, lists of numbers (per position) and dicts of numbers, added up key by key."""
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, bool) or v is None or isinstance(v, str):
                continue
            if isinstance(v, (int, float)):
                out[k] = out.get(k, 0) + v
            elif isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
                have = out.get(k, [])
                n = max(len(have), len(v))
                out[k] = [(have[i] if i < len(have) else 0) + (v[i] if i < len(v) else 0) for i in range(n)]
            elif isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()):
                have = out.setdefault(k, {})
                for name, x in v.items():
                    have[name] = have.get(name, 0) + x
    return out


def _run_summary(
    name: str,
    run: dict[str, Any],
    result: dict[str, Any],
    ref: list[Any] | None,
    same: list[bool],
    ar_first: dict[Any, Any],
) -> VllmSummary:
    """One method at one batch size: its throughput, latency, drafts and identity with ar."""
    b, reqs = run["batch"], run["requests"]
    tokens = sum(len(q["token_ids"]) for q in reqs)
    wall = run["wall_s"]
    spec = run["spec"]
    steps = max(tokens - spec["num_accepted_tokens"], 1)
    rates = [len(q["token_ids"]) / q["latency_s"] for q in reqs if q["latency_s"] > 0]
    summary = VllmSummary(
        method=name,
        batch=b,
        requests=len(reqs),
        new_tokens=tokens,
        wall_s=wall,
        tokens_per_s=tokens / wall if wall else 0.0,
        tokens_per_s_request=sum(rates) / len(rates) if rates else 0.0,
        mean_token_ms=1000.0 * sum(q["latency_s"] for q in reqs) / max(tokens, 1),
        mean_generated_length=tokens / steps,
        draft_tokens_per_step=spec["num_draft_tokens"] / steps,
        mean_draft_length=spec["num_draft_tokens"] / spec["num_drafts"] if spec["num_drafts"] else 0.0,
        acceptance=spec["num_accepted_tokens"] / spec["num_draft_tokens"] if spec["num_draft_tokens"] else None,
        identical_to_ar=(1.0 if name == "ar" else (sum(same) / len(same))) if ref is not None else None,
        identical_to_ar_batch1=_share(
            [q["token_ids"] == ar_first[q["prompt"]] for q in reqs if q["prompt"] in ar_first]
        ),
        accepted_per_position=spec["accepted_per_position"],
        proposer=_proposer_part(run.get("proposer"), result["batches"], run),
    )
    return summary


def _proposer_part(stats: dict[str, Any] | None, runs: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """The REST proposer's totals during this batch size (its stats are cumulative per process)."""
    if not stats:
        return {}
    i = runs.index(run)
    before = runs[i - 1].get("proposer") if i > 0 else run.get("proposer_before")
    keys = (
        "drafted_tokens",
        "accepted_tokens",
        "rows",
        "rows_drafted",
        "steps_skipped",
        "steps_explored",
        "propose_ms",
        "calls",
    )
    out = {k: stats.get(k, 0) - (before.get(k, 0) if before else 0) for k in keys}
    for k in ("drafted_by_source", "accepted_by_source", "drafted_by_kind", "accepted_by_kind"):
        now, then = stats.get(k, {}), (before or {}).get(k, {})
        out[k] = {name: v - then.get(name, 0) for name, v in now.items()}
    out["propose_ms_per_call"] = out["propose_ms"] / out["calls"] if out["calls"] else 0.0
    out["cost_curve"] = stats.get("cost_curve")
    out["req_ids"] = stats.get("req_ids")
    return out


def _share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


# --------------------------------------------------------------------------------------------
# Reports


def _f(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:{spec}}{suffix}"


def _spread(values: list[float], spec: str) -> str:
    return f" ({min(values):{spec}}-{max(values):{spec}})" if len(values) > 1 else ""


def markdown_tables(table: dict[int, dict[str, VllmSummary]]) -> str:
    """One table per batch size: medians over rounds, each with its range (min-max) over rounds."""
    out = []
    for b, by_method in table.items():
        first = next(iter(by_method.values()))
        rounds = len(first.tokens_per_s_passes) or 1
        out += [
            f"**batch {b}** ({first.requests} distinct prompts, {b} in flight; median of {rounds} round(s), "
            "range in brackets)",
            "",
            "| method | tok/s total | vs ar | tok/s per request | vs ar | ms/token (request) | M | drafted/step | acceptance "
            "| identical to ar | load avg (1 min) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in by_method.values():
            loads = [x for pair in s.loadavg_passes for x in pair]
            out.append(
                f"| {s.method} | {s.tokens_per_s:.1f}{_spread(s.tokens_per_s_passes, '.1f')} "
                f"| {_f(s.speedup_vs_ar, '.2f', 'x')}{_spread(s.speedup_passes, '.2f')} | {s.tokens_per_s_request:.1f} "
                f"| {_f(s.speedup_vs_ar_request, '.2f', 'x')} | {s.mean_token_ms:.1f} | {s.mean_generated_length:.2f} "
                f"| {s.draft_tokens_per_step:.2f} | {_f(s.acceptance, '.0%') if s.acceptance is not None else '-'} "
                f"| {_f(100 * s.identical_to_ar if s.identical_to_ar is not None else None, '.0f', '%')} "
                f"| {f'{min(loads):.1f}-{max(loads):.1f}' if loads else '-'} |"
            )
        out.append("")
    return "\n".join(out)


def _rounds(result: Any) -> list[dict[str, Any]]:
    return result if isinstance(result, list) else [result] if result else []


def write_report(
    out: Path,
    *,
    title: str,
    table: dict[int, dict[str, VllmSummary]],
    differences: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
    meta: dict[str, Any],
) -> list[str]:
    """results.json (per method the bench's usual fields, at the smallest batch size, plus
    `by_batch`) and results.md (one table per batch size)."""
    out.mkdir(parents=True, exist_ok=True)
    first = min(table) if table else None
    methods: dict[str, Any] = {}
    for b, by_method in table.items():
        for name, s in by_method.items():
            entry = methods.setdefault(name, {"method": name, "by_batch": {}})
            entry["by_batch"][str(b)] = asdict(s)
            if b == first:
                entry.update(
                    batch=b,
                    runs=s.requests,
                    new_tokens=s.new_tokens,
                    mean_token_ms=s.mean_token_ms,
                    mean_generated_length=s.mean_generated_length,
                    tokens_per_s=s.tokens_per_s,
                    speedup_vs_ar=s.speedup_vs_ar,
                    identical_to_ar=s.identical_to_ar,
                )
    payload = {
        **meta,
        "engine": "vllm",
        "timing": "per batch size B: max(requests_per_batch x B, min_requests) distinct prompts, B in flight at every "
        "moment (continuous batching); no engine is asked a prompt twice (each batch size its own slice); "
        "interleaved rounds (every method once per round, each on a fresh engine), medians over rounds; "
        "tok/s total = tokens / the pass's wall time; per request = tokens / its latency (admitted to finished)",
        "methods": methods,
        "batches": {str(b): {n: asdict(s) for n, s in by.items()} for b, by in table.items()},
        "differences": differences,
        "cost_curve": (_rounds(results.get("ar") or {}) or [{}])[0].get("cost_curve"),
        "load_s": {n: [x.get("load_s") for x in _rounds(r)] for n, r in results.items()},
        "loadavg": {
            n: [[x.get("loadavg_start"), x.get("loadavg_end")] for x in _rounds(r)] for n, r in results.items()
        },
        "raw": results,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=1))
    lines = [f"# {title}", ""] + [
        f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in meta.items() if not isinstance(v, (dict, list))
    ]
    lines += ["", markdown_tables(table)]
    if differences:
        lines.append(
            f"**{len(differences)} greedy output(s) differ from ar at the same batch size** (see results.json)."
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    return [str(out / "results.json"), str(out / "results.md")]
