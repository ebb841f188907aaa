"""`bench --engine vllm`: the same problems and prompts as the other benchmarks, served by vLLM
at several batch sizes, for plain decoding (`ar`), vLLM's own drafters (`ngram` = prompt lookup,
`suffix` = SuffixDecoding as a server runs it, its global tree of earlier answers on;
`suffix-nocache` = the same with that tree off) and REST as vLLM's proposer (`rest`, `hybrid`;
rest_core.serve, with the answers source on as `serve` runs it).

Fair to drafters that learn from earlier answers: no engine is ever handed a prompt twice.
Each method's job (`rest_core.serve.bench_worker`, in the vLLM environment) loads a fresh engine
and runs every batch size once, each on its own slice of the problems (`schedule`: batch size B
asks max(requests_per_batch x B, min_requests) prompts, no slice shares a prompt, and the
warm-up uses training problems); the worker refuses a job that would repeat one.

Interleaved rounds: round r runs ar, then every other method, each on a fresh engine and the
same slices; then round r + 1 does it again. A method's figure is the median of its rounds with
the spread shown, so a machine whose load drifts over the minutes a method takes shifts every
method alike; each pass records the load average around it. `ar` runs first in every round: it
is the reference (greedy outputs must be identical, request by request, in the same round), and
in the first round it measures the plain step cost per batch size that the REST proposer starts
from as its prior cost curve.

A batch size B is B requests in flight at every moment (continuous batching, as a server keeps
its batch full; `rest_core.serve.bench_worker.run_batch`). Per method and batch size
(`VllmSummary`): tokens/s in total (all requests' tokens over the wall time) and per request
(each request's tokens over its own latency), ms per token per request (prefill included, as
`mean_token_ms` elsewhere), tokens per step and request M (generated / (generated - accepted
drafts): every step of a request yields one token of the model's own), drafted tokens per step
and acceptance (vLLM's counters, pooled over rounds), identity with `ar`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rest_core.bench.vllm_summary import markdown_tables, summarize, write_report
from rest_core.serve.settings import DEFAULT_ANSWERS

__all__ = ["markdown_tables", "summarize", "write_report"]  # the bench's figures, re-exported

VLLM_METHODS = ("ar", "ngram", "suffix", "suffix-nocache", "rest", "hybrid")
NGRAM_SWEEP = ((2, 2), (4, 2), (4, 4), (8, 4))  # (num_speculative_tokens, prompt_lookup_max)
DEFAULT_NGRAM = (4, 4)


@dataclass(frozen=True)
class VllmMethod:
    """One method as vLLM is told it."""

    name: str
    speculative_config: dict[str, Any] | None = None
    additional_config: dict[str, Any] | None = None


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
    requests_per_batch: int = 2  # batch size B asks max(this x B, min_requests) distinct prompts
    min_requests: int = 1
    rounds: int = 1  # interleaved rounds: every method once per round, each on a fresh engine


def schedule(prompts: int, batches: Sequence[int], per_batch: int, min_requests: int) -> dict[int, list[int]]:
    """The prompt indices each batch size asks: consecutive slices that share no prompt, so one
    engine running every batch size never sees a prompt twice. ValueError, saying how many are
    needed, when there are too few."""
    need = {b: max(per_batch * b, min_requests) for b in batches}
    total = sum(need.values())
    if total > prompts:
        parts = " + ".join(f"{need[b]} (batch {b})" for b in batches)
        raise ValueError(
            f"batch sizes {','.join(map(str, batches))} need {parts} = {total} distinct prompts "
            f"(max({per_batch} x B, {min_requests}) each; no engine is asked a prompt twice), but only {prompts} "
            "were selected: select more problems (--split, --offset, --limit 0), or lower --requests-per-batch, "
            "--min-requests or the batch sizes"
        )
    out: dict[int, list[int]] = {}
    at = 0
    for b in batches:
        out[b] = list(range(at, at + need[b]))
        at += need[b]
    return out


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
    if name == "suffix":  # as a server runs it: its global tree of earlier answers on (vLLM's default)
        return VllmMethod(name, {"method": "suffix", "num_speculative_tokens": k})
    if name == "suffix-nocache":  # drafts from the request's own prompt and answer only
        return VllmMethod(
            name, {"method": "suffix", "num_speculative_tokens": k, "suffix_decoding_max_cached_requests": 0}
        )
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


def run_method(
    plan: VllmPlan, method: VllmMethod, work: Path, *, log: Path, round_index: int = 0, calibrate: bool = True
) -> dict[str, Any]:
    """One method's job in the vLLM environment (a fresh engine, every batch size once on its
    own prompts); its result (bench_worker's JSON)."""
    from rest_core.serve.bench_worker import check_distinct
    from rest_core.serve.env import vllm_environ, vllm_python

    python = vllm_python()
    job = make_job(plan, method, work, round_index=round_index, calibrate=calibrate)
    check_distinct(job)  # the worker checks again; this fails before an engine loads
    job_path = work / f"{method.name}-{round_index}.job.json"
    job_path.write_text(json.dumps(job))
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n=== {method.name} round {round_index}: {python} -m rest_core.serve.bench_worker {job_path}\n")
        f.flush()
        done = subprocess.run(
            [python, "-m", "rest_core.serve.bench_worker", str(job_path)],
            env=vllm_environ(),
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"vLLM method {method.name} failed (exit {done.returncode}); see {log}:\n{tail}")
    return json.loads(Path(job["out"]).read_text())


def make_job(plan: VllmPlan, method: VllmMethod, work: Path, *, round_index: int, calibrate: bool) -> dict[str, Any]:
    """The worker's job for one method in one round: a fresh engine, each batch size once on its
    own slice of the prompts (`schedule`), marked `distinct` so that the worker refuses it if any
    prompt would be asked twice."""
    slices = schedule(len(plan.prompts), plan.batches, plan.requests_per_batch, plan.min_requests)
    return {
        "method": method.name,
        "model": plan.model,
        "dtype": plan.dtype,
        "max_model_len": plan.max_model_len,
        "llm_kwargs": plan.llm_kwargs,
        "speculative_config": method.speculative_config,
        "additional_config": method.additional_config,
        "prompts": plan.prompts,
        "batches": plan.batches,
        "batch_prompts": {str(b): idx for b, idx in slices.items()},
        "distinct": True,
        "max_tokens": plan.max_tokens,
        "warmup": plan.warmup,
        "calibrate": plan.calibrate if method.name == "ar" and calibrate else [],
        "proposer_stats": (method.additional_config or {}).get("rest", {}).get("stats"),
        "out": str(work / f"{method.name}-{round_index}.json"),
    }


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
    train = [p for p in load_suite(args.suite, None, 0, "train") if p.id not in ids][:2]
    warm = [first_turn(p) for p in train]  # never a measured prompt: the drafters would keep its answer
    batches = sorted({int(b) for b in str(args.batch).split(",") if b.strip()})
    if not batches or batches[0] < 1:
        raise ValueError(f"--batch must be batch sizes >= 1, got {args.batch!r}")
    if getattr(args, "repeats", 1) > 1:
        raise ValueError("--engine vllm never asks an engine a prompt twice: use --rounds for repeated passes")
    per_batch, min_requests = args.requests_per_batch, args.min_requests
    dtype = args.dtype if args.dtype != "auto" else ("float32" if args.model == "embedded" else "auto")
    kwargs: dict[str, Any] = {}
    device = args.device if args.device != "auto" else None
    if (device or "").startswith("cpu") or (device is None and not _cuda_visible()):
        kwargs["enforce_eager"] = True  # vLLM's CPU backend: no graph compilation (minutes on 2 cores)
    calibrate = calibration_sizes(batches, args.spec_k)
    return VllmPlan(
        model=folder,
        prompts=[first_turn(p) for p in problems],
        batches=batches,
        requests_per_batch=per_batch,
        min_requests=min_requests,
        rounds=args.rounds,
        max_tokens=args.max_new_tokens,
        warmup=[warm, warm * max(1, batches[-1] // len(warm))] if warm else [],
        dtype=dtype,
        llm_kwargs=kwargs,
        calibrate=calibrate,
    )


def calibration_sizes(batches: Sequence[int], k: int) -> list[int]:
    """The plain step costs ar measures for the REST proposer's prior: 1 up to the widest verify
    step the bench may ask (a batch of B verifies B + its drafts: up to 2 x the largest batch, and
    at least 1 + k, one request with a full chain). Beyond the measured sizes CostCurve extrapolates
    the last slope: measuring only 1, 2 and 4 at batch 1 (a flat 123 ms on HumanEval 10-19) made a
    17-token step look as cheap as one token, and the hybrid drafted chains whose tails (predicted
    to be accepted a few times in a thousand) could not pay for the wider step."""
    top = max(2 * max(batches), 1 + k)
    return sorted(b for b in {1, 2, 4, 8, 16, 32, 64, *batches, *(2 * b for b in batches), 1 + k} if b <= top)


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
    """`bench --engine vllm`: every method at every batch size, in interleaved rounds; exit 1
    when a greedy output differs from ar's."""
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in VLLM_METHODS]
    if unknown:
        raise ValueError(f"unknown vLLM method(s) {unknown}; choose from {', '.join(VLLM_METHODS)}")
    if "ar" in methods:
        methods = ["ar"] + [m for m in methods if m != "ar"]  # the reference, and the prior cost curve, first
    tokenizer, folder = load_tokenizer_and_folder(args.model)
    plan = prepare(args, problems, tokenizer=tokenizer, folder=folder)
    slices = schedule(len(plan.prompts), plan.batches, plan.requests_per_batch, plan.min_requests)  # too few: now
    stores = _stores(args) if {"rest", "hybrid"} & set(methods) else []
    ngram, ngram_source = ngram_from(args.ngram)
    loadavg_before = list(os.getloadavg())
    results = run_rounds(plan, methods, args, stores=stores, ngram=ngram, work=out / "work", log=out / "vllm.log")
    table, differences = summarize(results)
    meta = {
        **meta,
        "model_folder": folder,
        "batches": plan.batches,
        "rounds": plan.rounds,
        "batch_problems": {str(b): [problems[i].id for i in idx] for b, idx in slices.items()},
        "dtype": plan.dtype,
        "spec_k": args.spec_k,
        "answers_tokens": getattr(args, "answers_tokens", DEFAULT_ANSWERS),
        "ngram": {"num_speculative_tokens": ngram[0], "prompt_lookup_max": ngram[1], "chosen": ngram_source},
        "turns": "first turn of each problem",
        "loadavg_before": loadavg_before,
    }
    title = (
        f"{args.suite} on vLLM: {', '.join(methods)} at batch {', '.join(map(str, plan.batches))}, "
        f"{len(problems)} distinct problems x {args.max_new_tokens} tokens, {plan.rounds} interleaved round(s)"
    )
    written = write_report(out, title=title, table=table, differences=differences, results=results, meta=meta)
    print(markdown_tables(table))
    print("wrote " + ", ".join(written))
    return 1 if differences else 0


def run_rounds(
    plan: VllmPlan, methods: list[str], args: Any, *, stores: list[Any], ngram: tuple[int, int], work: Path, log: Path
) -> dict[str, list[dict[str, Any]]]:
    """Per method, its rounds' worker results: round r runs every method in turn (ar first),
    each on a fresh engine, before round r + 1 begins."""
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in methods}
    curve: Any = "auto"
    for r in range(plan.rounds):
        for name in methods:
            method = method_config(
                name,
                stores=stores,
                k=args.spec_k,
                ngram=ngram,
                retrieval=_retrieval(args),
                cost_curve=curve,  # REST starts from the step costs ar measured on this machine
                stats=str((work / f"{name}-{r}-proposer.json").resolve()),
                log=str((work / f"{name}-{r}-drafts.jsonl").resolve()),
                answers_tokens=getattr(args, "answers_tokens", DEFAULT_ANSWERS),
            )
            t0 = time.time()
            print(f"vllm bench: round {r + 1}/{plan.rounds}, {name} ...", file=sys.stderr, flush=True)
            first = r == 0 and name == "ar"  # measures the plain step costs once
            results[name].append(run_method(plan, method, work, log=log, round_index=r, calibrate=first))
            print(f"vllm bench: {name} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            if first:
                curve = results["ar"][0].get("cost_curve") or "auto"
    return results


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
    plan.requests_per_batch, plan.min_requests, plan.rounds = 1, len(problems), 1  # each training problem once
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
    from rest_core.store.held_out import check_store_for_suite

    path = Path(args.datastore)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"datastore {path} not found: build it with `make datastores` or pass --datastore")
    check_store_for_suite(args.suite, str(path))
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
