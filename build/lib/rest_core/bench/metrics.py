"""Per-method metrics of a benchmark: `summarize` turns its runs into one `MethodSummary` each.

Timing definitions (all pooled over runs: total time / total tokens, so long outputs count more):
- ``mean_token_ms``: wall time of the whole generate call (prefill included) per generated token.
- ``mean_token_ms_decode``: prefill excluded (what the paper reports): time after prefill per
  token produced after prefill. transformers' prefill covers the whole prompt and yields the
  first token; the engine's prefill covers all but the last prompt token and yields none (its
  first step does), so each is charged for exactly the tokens its decode time produced.
- ``mean_generated_length`` (M): generated tokens per model forward call that yields tokens, so
  plain decoding has M = 1 and M bounds the speedup.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rest_core.bench.loop import BenchResult
from rest_core.bench.runs import RELIABILITY_BINS, TimedRun


@dataclass
class MethodSummary:
    method: str
    runs: int
    new_tokens: int
    mean_token_ms: float  # prefill included
    mean_token_ms_decode: float  # prefill excluded
    mean_generated_length: float | None  # M: tokens per forward call, prefill included
    tokens_per_s: float
    speedup_vs_ar: float | None = None  # prefill included
    speedup_vs_ar_decode: float | None = None
    identical_to_ar: float | None = None  # fraction of runs, greedy only
    retrieval_ms_per_token: float = 0.0
    retrieval_share_of_decode: float = 0.0
    draft_share: float = 0.0  # share of generated tokens that came from accepted drafts
    mean_draft_nodes: float = 0.0  # draft tokens verified per step
    forward_ms_per_step: float | None = None  # engine methods: mean verify forward (root + draft)
    source_share: dict[str, float] = field(default_factory=dict)  # of generated tokens
    accepted_share_by_source: dict[str, float] = field(default_factory=dict)  # of accepted draft tokens
    prefill_ms_mean: float = 0.0
    # auto budget only: predicted vs observed acceptance per probability bin, per source
    reliability: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def summarize_method(method: str, runs: Sequence[TimedRun], identical: Sequence[bool] | None = None) -> MethodSummary:
    """Pooled metrics of one method's runs (total time / total tokens)."""
    tokens = sum(r.new_tokens for r in runs)
    wall = sum(r.wall_ms for r in runs)
    decode = sum(r.decode_ms for r in runs)
    decode_tokens = sum(r.decode_tokens for r in runs)
    steps = sum(r.steps for r in runs)
    retrieval = sum(r.retrieval_ms for r in runs)
    sources: Counter[str] = Counter()
    for r in runs:
        sources.update(r.source_tokens)
    drafted = sum(r.draft_tokens for r in runs)
    pooled: dict[str, list[list[float]]] = {}
    for r in runs:
        for key, cells in r.reliability.items():
            into = pooled.setdefault(key, [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)])
            for b, cell in enumerate(cells):
                into[b] = [x + y for x, y in zip(into[b], cell)]
    accepted_by = {k: v / drafted for k, v in sources.items() if k != "model"} if drafted else {}
    source_total = sum(sources.values())
    return MethodSummary(
        method=method,
        runs=len(runs),
        new_tokens=tokens,
        mean_token_ms=wall / tokens if tokens else math.nan,
        mean_token_ms_decode=decode / decode_tokens if decode_tokens else math.nan,
        mean_generated_length=(tokens / steps) if steps else None,
        tokens_per_s=1000.0 * tokens / wall if wall else 0.0,
        identical_to_ar=(sum(identical) / len(identical)) if identical else None,
        retrieval_ms_per_token=retrieval / tokens if tokens else 0.0,
        retrieval_share_of_decode=retrieval / decode if decode else 0.0,
        draft_share=drafted / tokens if tokens else 0.0,
        mean_draft_nodes=sum(r.drafted_nodes for r in runs) / steps if steps else 0.0,
        forward_ms_per_step=(sum(r.forward_ms for r in runs) / steps)
        if steps and any(r.forward_ms for r in runs)
        else None,
        source_share={k: v / source_total for k, v in sorted(sources.items())} if source_total else {},
        accepted_share_by_source=dict(sorted(accepted_by.items())),
        prefill_ms_mean=sum(r.prefill_ms for r in runs) / len(runs) if runs else 0.0,
        reliability=reliability_rows(pooled),
    )


def summarize(result: BenchResult, *, baseline: str = "ar") -> dict[str, MethodSummary]:
    by_method: dict[str, list[TimedRun]] = {}
    for r in result.runs:
        by_method.setdefault(r.method, []).append(r)
    out = {m: summarize_method(m, runs, result.identical.get(m)) for m, runs in by_method.items()}
    base = out.get(baseline)
    if base is not None:
        for s in out.values():
            s.speedup_vs_ar = base.mean_token_ms / s.mean_token_ms if s.mean_token_ms else None
            s.speedup_vs_ar_decode = (
                base.mean_token_ms_decode / s.mean_token_ms_decode if s.mean_token_ms_decode else None
            )
    return out


def reliability_rows(table: dict[str, list[list[float]]]) -> dict[str, list[dict[str, float]]]:
    """Per source (and "all"): the non-empty bins as {lo, hi, n, predicted, observed}."""
    merged = {"all": [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)]}
    for key in sorted(table):
        merged[key] = table[key]
        for b, cell in enumerate(table[key]):
            merged["all"][b] = [x + y for x, y in zip(merged["all"][b], cell)]
    out: dict[str, list[dict[str, float]]] = {}
    for key, cells in merged.items():
        rows = [
            {
                "lo": b / RELIABILITY_BINS,
                "hi": (b + 1) / RELIABILITY_BINS,
                "n": int(n),
                "predicted": total / n,
                "observed": hits / n,
            }
            for b, (n, total, hits) in enumerate(cells)
            if n
        ]
        if rows:
            out[key] = rows
    return out
