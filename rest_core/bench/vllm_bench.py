"""`bench --engine vllm`: the same problems and prompts as the other benchmarks, served by vLLM
at several batch sizes, for plain decoding (`ar`), vLLM's own drafters (`ngram` = prompt lookup,
`suffix` = SuffixDecoding) and REST as vLLM's proposer (`rest`, `hybrid`; rest_core.serve).

This module runs in the app's environment and never imports vLLM: each method is one job for
`rest_core.serve.bench_worker` in the vLLM environment (one engine load per method, every batch
size on it; `suffix` gets a fresh engine per batch size, because its cache of earlier requests'
outputs would otherwise hold the answers to these very prompts from the previous batch size).
`ar` runs first: it is every comparison's reference (greedy outputs must be identical, request
by request, at the same batch size) and it measures the plain step cost per batch size that the
REST proposer starts from as its prior cost curve.

A batch size B is B requests in flight at every moment (continuous batching, as a server keeps
its batch full; `rest_core.serve.bench_worker.run_batch`). Per method and batch size
(`VllmSummary`): tokens/s in total (all requests' tokens over the wall time) and per request
(each request's tokens over its own latency), ms per token per request
(prefill included, as `mean_token_ms` elsewhere), tokens per step and request M (generated /
(generated - accepted drafts): every step of a request yields one token of the model's own),
drafted tokens per step and acceptance (vLLM's counters), identity with `ar`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rest_core.serve.settings import DEFAULT_ANSWERS

VLLM_METHODS = ("ar", "ngram", "suffix", "rest", "hybrid")
NGRAM_SWEEP = ((2, 2), (4, 2), (4, 4), (8, 4))  # (num_speculative_tokens, prompt_lookup_max)
DEFAULT_NGRAM = (4, 4)


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
    speedup_vs_ar: float | None = None  # tokens_per_s ratio
    speedup_vs_ar_request: float | None = None  # tokens_per_s_request ratio
    accepted_per_position: list[int] = field(default_factory=list)
    proposer: dict[str, Any] = field(default_factory=dict)  # REST: drafted / accepted per source


@dataclass(frozen=True)
class VllmMethod:
    """One method as vLLM is told it."""

    name: str
    speculative_config: dict[str, Any] | None = None
    additional_config: dict[str, Any] | None = None
    fresh_engine_per_batch: bool = False


@dataclass
class VllmPlan:
    """Everything a run of the vLLM bench needs, as plain data."""

    model: str  # a folder vLLM loads
    prompts: list[list[int]]
    batches: list[int]
    max_tokens: int
    warmup: list[list[list[int]]]  # rounds of prompts run untimed first (training split)
    dtype: str = "auto"
    max_model_len: int = 2048
    llm_kwargs: dict[str, Any] = field(default_factory=dict)
    calibrate: list[int] = field(default_factory=list)  # ar: the batch sizes whose step cost is measured
    requests_per_batch: int = 3  # a batch size B runs max(prompts, this x B) requests
    repeats: int = 1  # passes per batch size on one engine, the fastest counts (suffix: always 1)


def method_config(
    name: str,
    *,
    stores: Sequence[Any] = (),
    k: int = 16,
    ngram: tuple[int, int] = DEFAULT_NGRAM,
    retrieval: Any = None,
    cost_curve: Any = "auto",
    stats: str | None = None,
    log: str | None = None,
    answers_tokens: int = DEFAULT_ANSWERS,
) -> VllmMethod:
    """The vLLM settings of a method name (VLLM_METHODS)."""
    from rest_core.serve.settings import rest_config, speculative_config

    if name == "ar":
        return VllmMethod(name)
    if name == "ngram":
        n_spec, lookup_max = ngram
        return VllmMethod(
            name,
            {
                "method": "ngram",
                "num_speculative_tokens": n_spec,
                "prompt_lookup_max": lookup_max,
                "prompt_lookup_min": 1,
            },
        )
    if name == "suffix":
        return VllmMethod(name, {"method": "suffix", "num_speculative_tokens": k}, fresh_engine_per_batch=True)
    if name in ("rest", "hybrid"):
        rest = rest_config(
            name,
            list(stores),
            retrieval=retrieval,
            cost_curve=cost_curve,
            stats=stats,
            log=log,
            answers_tokens=answers_tokens,
        )
        return VllmMethod(name, speculative_config(k), {"rest": rest})
    raise ValueError(f"unknown vLLM method {name!r}; choose from {', '.join(VLLM_METHODS)}")


def run_method(plan: VllmPlan, method: VllmMethod, work: Path, *, log: Path) -> dict[str, Any]:
    """One method's job in the vLLM environment; its result (bench_worker's JSON)."""
    from rest_core.serve.env import vllm_environ, vllm_python

    python = vllm_python()
    env = vllm_environ()
    groups = [[b] for b in plan.batches] if method.fresh_engine_per_batch else [plan.batches]
    merged: dict[str, Any] | None = None
    for i, batches in enumerate(groups):
        job = {
            "method": method.name,
            "model": plan.model,
            "dtype": plan.dtype,
            "max_model_len": plan.max_model_len,
            "llm_kwargs": plan.llm_kwargs,
            "speculative_config": method.speculative_config,
            "additional_config": method.additional_config,
            "prompts": plan.prompts,
            "batches": batches,
            "max_tokens": plan.max_tokens,
            "warmup": plan.warmup,
            "requests_per_batch": plan.requests_per_batch,
            # suffix's cache of earlier outputs would hold this very pass's answers on a repeat
            "repeats": 1 if method.fresh_engine_per_batch else plan.repeats,
            "calibrate": plan.calibrate if method.name == "ar" else [],
            "proposer_stats": (method.additional_config or {}).get("rest", {}).get("stats"),
            "out": str(work / f"{method.name}-{i}.json"),
        }
        job_path = work / f"{method.name}-{i}.job.json"
        job_path.write_text(json.dumps(job))
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"\n=== {method.name} batches {batches}: {python} -m rest_core.serve.bench_worker {job_path}\n")
            f.flush()
            done = subprocess.run(
                [python, "-m", "rest_core.serve.bench_worker", str(job_path)],
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
            raise RuntimeError(f"vLLM method {method.name} failed (exit {done.returncode}); see {log}:\n{tail}")
        part = json.loads(Path(job["out"]).read_text())
        if merged is None:
            merged = part
            merged["load_s"] = [part["load_s"]]
        else:
            merged["batches"] += part["batches"]
            merged["load_s"].append(part["load_s"])
            merged["loadavg_end"] = part["loadavg_end"]
    assert merged is not None
    return merged


# --------------------------------------------------------------------------------------------
# Summaries


def summarize(results: dict[str, dict[str, Any]]) -> tuple[dict[int, dict[str, VllmSummary]], list[dict[str, Any]]]:
    """Per batch size, per method: its summary; and every greedy output that differs from ar's
    (request j of a batch size runs the same prompt for every method)."""
    ar = results.get("ar")
    ar_runs = {b["batch"]: b for b in ar["batches"]} if ar else {}
    ar_first = {}
    if 1 in ar_runs:
        for q in ar_runs[1]["requests"]:
            ar_first.setdefault(q["prompt"], q["token_ids"])
    table: dict[int, dict[str, VllmSummary]] = {}
    differences: list[dict[str, Any]] = []
    for name, result in results.items():
        for run in result["batches"]:
            b, reqs = run["batch"], run["requests"]
            ref = [q["token_ids"] for q in ar_runs[b]["requests"]] if b in ar_runs else None
            same = []
            for j, q in enumerate(reqs):
                if ref is not None and name != "ar":
                    ok = q["token_ids"] == ref[j]
                    same.append(ok)
                    if not ok:
                        differences.append(
                            {
                                "method": name,
                                "batch": b,
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
                        "request": None,
                        "prompt": None,
                        "first_diff": None,
                        "what": "repeated passes differ",
                    }
                )
            summary = _run_summary(name, run, result, ref, same, ar_first)
            table.setdefault(b, {})[name] = summary
    for by_method in table.values():
        base = by_method.get("ar")
        for s in by_method.values():
            if base is not None and base.tokens_per_s and base.tokens_per_s_request:
                s.speedup_vs_ar = s.tokens_per_s / base.tokens_per_s
                s.speedup_vs_ar_request = s.tokens_per_s_request / base.tokens_per_s_request
    return dict(sorted(table.items())), differences


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


def markdown_tables(table: dict[int, dict[str, VllmSummary]]) -> str:
    """One table per batch size."""
    out = []
    for b, by_method in table.items():
        out += [
            f"**batch {b}** ({next(iter(by_method.values())).requests} requests, {b} in flight)",
            "",
            "| method | tok/s total | vs ar | tok/s per request | vs ar | ms/token (request) | M | drafted/step | acceptance "
            "| identical to ar | identical to ar at batch 1 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in by_method.values():
            out.append(
                f"| {s.method} | {s.tokens_per_s:.1f} | {_f(s.speedup_vs_ar, '.2f', 'x')} | {s.tokens_per_s_request:.1f} "
                f"| {_f(s.speedup_vs_ar_request, '.2f', 'x')} | {s.mean_token_ms:.1f} | {s.mean_generated_length:.2f} "
                f"| {s.draft_tokens_per_step:.2f} | {_f(s.acceptance, '.0%') if s.acceptance is not None else '-'} "
                f"| {_f(100 * s.identical_to_ar if s.identical_to_ar is not None else None, '.0f', '%')} "
                f"| {_f(100 * s.identical_to_ar_batch1 if s.identical_to_ar_batch1 is not None else None, '.0f', '%')} |"
            )
        out.append("")
    return "\n".join(out)


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
        "timing": "per batch size B: max(problems, 3B) requests, B in flight at every moment (continuous batching); "
        "tok/s total = tokens / the pass's wall time; per request = tokens / its latency (admitted to finished); "
        "one engine load per method (suffix: per batch size)",
        "methods": methods,
        "batches": {str(b): {n: asdict(s) for n, s in by.items()} for b, by in table.items()},
        "differences": differences,
        "cost_curve": (results.get("ar") or {}).get("cost_curve"),
        "load_s": {n: r.get("load_s") for n, r in results.items()},
        "loadavg": {n: [r.get("loadavg_start"), r.get("loadavg_end")] for n, r in results.items()},
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


# --------------------------------------------------------------------------------------------
# The runs


def prepare(args: Any, problems: list, *, tokenizer: Any, folder: str) -> VllmPlan:
    """Prompts as the other benchmarks encode them (first turns), warm-up on training problems."""
    from rest_core.bench.suites import load_suite
    from rest_core.decode.prompts import encode_prompt

    def first_turn(p: Any) -> list[int]:
        if p.kind == "chat":
            return encode_prompt(tokenizer, [{"role": "user", "content": p.turns[0]}], True)
        return encode_prompt(tokenizer, p.turns[0], False)

    ids = {p.id for p in problems}
    train = [p for p in load_suite(args.suite, None, 0, "train") if p.id not in ids][:2] or problems[:1]
    warm = [first_turn(p) for p in train]
    batches = sorted({int(b) for b in str(args.batch).split(",") if b.strip()})
    if not batches or batches[0] < 1:
        raise ValueError(f"--batch must be batch sizes >= 1, got {args.batch!r}")
    dtype = args.dtype if args.dtype != "auto" else ("float32" if args.model == "embedded" else "auto")
    kwargs: dict[str, Any] = {}
    device = args.device if args.device != "auto" else None
    if (device or "").startswith("cpu") or (device is None and not _cuda_visible()):
        kwargs["enforce_eager"] = True  # vLLM's CPU backend: no graph compilation (minutes on 2 cores)
    # Plain steps of 1 .. 2 x the largest batch: the REST proposer's prior (a batch of B verifies
    # B + its drafts tokens; beyond the measured sizes CostCurve extrapolates linearly).
    calibrate = sorted({1, 2, 4, 8, 16, 32, 64, *batches, *(2 * b for b in batches)})
    return VllmPlan(
        model=folder,
        prompts=[first_turn(p) for p in problems],
        batches=batches,
        repeats=args.repeats,
        max_tokens=args.max_new_tokens,
        warmup=[warm, warm * max(1, batches[-1] // len(warm))],
        dtype=dtype,
        llm_kwargs=kwargs,
        calibrate=[b for b in calibrate if b <= max(2 * batches[-1], 4)],
    )


def _cuda_visible() -> bool:
    from rest_core.serve.env import _has_cuda

    return _has_cuda()


def load_tokenizer_and_folder(model: str) -> tuple[Any, str]:
    from transformers import AutoTokenizer

    from rest_core.decode.models import local_folder

    folder = local_folder(model)
    return AutoTokenizer.from_pretrained(folder), folder


def ngram_from(value: str | None) -> tuple[tuple[int, int], str]:
    """(num_speculative_tokens, prompt_lookup_max) from --ngram: K:N, or an ngram-sweep's results."""
    if not value:
        return (
            DEFAULT_NGRAM,
            f"default {DEFAULT_NGRAM[0]}:{DEFAULT_NGRAM[1]} (not swept: pass --ngram RESULTS.json of `bench ngram-sweep --engine vllm`)",
        )
    if ":" in value and not Path(value).exists():
        k, n = value.split(":", 1)
        return (int(k), int(n)), "fixed"
    path = Path(value)
    file = path / "results.json" if path.is_dir() else path
    data = json.loads(file.read_text())
    if data.get("kind") != "ngram-sweep":
        raise ValueError(f"{file} is not the results of `bench ngram-sweep --engine vllm`")
    w = data["ngram_winner"]
    return (
        int(w["num_speculative_tokens"]),
        int(w["prompt_lookup_max"]),
    ), f"ngram-sweep winner ({file}, {data.get('suite')})"


def run(args: Any, problems: list, out: Path, meta: dict[str, Any]) -> int:
    """`bench --engine vllm`: every method at every batch size; exit 1 when a greedy output
    differs from ar's."""
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in VLLM_METHODS]
    if unknown:
        raise ValueError(f"unknown vLLM method(s) {unknown}; choose from {', '.join(VLLM_METHODS)}")
    if "ar" in methods:
        methods = ["ar"] + [m for m in methods if m != "ar"]  # the reference, and the prior cost curve, first
    tokenizer, folder = load_tokenizer_and_folder(args.model)
    plan = prepare(args, problems, tokenizer=tokenizer, folder=folder)
    stores = _stores(args) if {"rest", "hybrid"} & set(methods) else []
    ngram, ngram_source = ngram_from(args.ngram)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = out / "vllm.log"
    results: dict[str, dict[str, Any]] = {}
    for name in methods:
        # REST starts from the step costs ar measured on this machine a moment ago.
        curve = (results.get("ar") or {}).get("cost_curve") or "auto"
        method = method_config(
            name,
            stores=stores,
            k=args.spec_k,
            ngram=ngram,
            retrieval=_retrieval(args),
            cost_curve=curve,
            stats=str((work / f"{name}-proposer.json").resolve()),
            log=str((work / f"{name}-drafts.jsonl").resolve()),
            answers_tokens=getattr(args, "answers_tokens", DEFAULT_ANSWERS),
        )
        t0 = time.time()
        print(f"vllm bench: {name} ...", file=sys.stderr, flush=True)
        results[name] = run_method(plan, method, work, log=log)
        print(f"vllm bench: {name} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    table, differences = summarize(results)
    meta = {
        **meta,
        "model_folder": folder,
        "batches": plan.batches,
        "dtype": plan.dtype,
        "spec_k": args.spec_k,
        "answers_tokens": getattr(args, "answers_tokens", DEFAULT_ANSWERS),
        "ngram": {"num_speculative_tokens": ngram[0], "prompt_lookup_max": ngram[1], "chosen": ngram_source},
        "turns": "first turn of each problem",
        "loadavg_before": list(os.getloadavg()),
    }
    title = f"{args.suite} on vLLM: {', '.join(methods)} at batch {', '.join(map(str, plan.batches))}, {len(problems)} problems x {args.max_new_tokens} tokens"
    written = write_report(out, title=title, table=table, differences=differences, results=results, meta=meta)
    print(markdown_tables(table))
    print("wrote " + ", ".join(written))
    return 1 if differences else 0


def sweep_ngram(args: Any, problems: list, out: Path, meta: dict[str, Any]) -> int:
    """vLLM's ngram drafter at each (num_speculative_tokens, prompt_lookup_max) of --values
    (default NGRAM_SWEEP) against ar, on training problems at batch 1; the fastest wins."""
    configs = NGRAM_SWEEP
    if args.values:
        configs = tuple(tuple(int(x) for x in v.split(":")) for v in args.values.split(","))  # type: ignore[assignment]
    tokenizer, folder = load_tokenizer_and_folder(args.model)
    plan = prepare(args, problems, tokenizer=tokenizer, folder=folder)
    plan.batches = [1]
    plan.calibrate = []
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = out / "vllm.log"
    results = {"ar": run_method(plan, method_config("ar"), work, log=log)}
    for k, n in configs:
        m = method_config("ngram", ngram=(k, n))
        results[f"ngram-{k}:{n}"] = run_method(plan, VllmMethod(f"ngram-{k}:{n}", m.speculative_config), work, log=log)
    table, differences = summarize(results)
    rows = table[1]
    best = max((name for name in rows if name != "ar"), key=lambda name: rows[name].tokens_per_s)
    k, n = (int(x) for x in best.removeprefix("ngram-").split(":"))
    meta = {
        **meta,
        "kind": "ngram-sweep",
        "split": "train",
        "model_folder": folder,
        "ngram_winner": {"num_speculative_tokens": k, "prompt_lookup_max": n},
    }
    title = f"vLLM ngram sweep on {args.suite} (training split), {len(problems)} problems x {args.max_new_tokens} tokens, batch 1"
    written = write_report(out, title=title, table=table, differences=differences, results=results, meta=meta)
    print(markdown_tables(table))
    print(
        f"ngram-sweep winner: num_speculative_tokens={k}, prompt_lookup_max={n}; use it with --ngram {out / 'results.json'}"
    )
    print("wrote " + ", ".join(written))
    return 1 if differences else 0


def _stores(args: Any) -> list[Any]:
    from rest_core.serve.settings import ServedStore

    path = Path(args.datastore)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"datastore {path} not found: build it with `make datastores` or pass --datastore")
    return [ServedStore(str(path.resolve()), path.name)]


def _retrieval(args: Any) -> Any:
    from rest_core.config import RetrievalConfig
    from rest_core.serve.settings import DEFAULT_MATCHES

    defaults = RetrievalConfig(m=args.spec_k, max_matches=DEFAULT_MATCHES)
    given = {k: getattr(args, k) for k in ("n_min", "n_max", "m", "max_matches") if getattr(args, k, None) is not None}
    return RetrievalConfig(
        **{
            **{"n_min": defaults.n_min, "n_max": defaults.n_max, "m": defaults.m, "max_matches": defaults.max_matches},
            **given,
        }
    )
