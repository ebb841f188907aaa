"""One method of `bench --engine vllm`, run in the vLLM environment:
`python -m rest_core.serve.bench_worker JOB.json` (the bench, `rest_core/bench/vllm_bench.py`,
writes the job and reads the result; it never imports vLLM itself).

The job names the model, one method's speculative_config (and additional_config), the prompts
as token ids (encoded by the bench exactly as its other engines get them), the batch sizes and
the tokens to generate. One engine is loaded and every batch size runs on it, greedy:

- batch B: the job's `batch_prompts[B]` (indices into the prompts), with B of them in flight at
  every moment, as a server keeps its batch full (continuous batching: a request is admitted as
  soon as another finishes). A job marked `distinct` is refused (`check_distinct`) when any
  prompt would be asked twice on this engine, in one batch size or two, or repeats a warm-up
  prompt: a drafter that keeps earlier answers (SuffixDecoding's global tree, the hybrid's
  answers source) must never draft a request from an answer to that very prompt. Without
  `batch_prompts`, max(prompts, requests_per_batch x B) requests take the prompts in turn (the
  overhead script's plain jobs, whose drafters keep nothing);
- per request: its tokens and its latency (admitted to finished); per batch size: the wall time,
  the 1-minute load average before and after, and the differences of vLLM's speculative-decoding
  counters (drafts, draft tokens, accepted tokens, accepted per position);
- with `calibrate`, the cost of one plain decoding step with B requests in flight, for each B:
  the REST proposer's prior cost curve (measured here on the method without speculation);
- with `repeats` R > 1 (never with `distinct`), each batch size runs R times on the same
  engine and the fastest pass counts;
- with `proposer_stats`, the REST proposer's running totals (a JSON file its worker process
  rewrites every step) after each batch size.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def spec_counters(llm: Any) -> dict[str, Any]:
    """vLLM's cumulative speculative-decoding counters (vllm:spec_decode_*), as plain numbers."""
    out: dict[str, Any] = {name: 0 for name in SPEC_COUNTERS}
    out["accepted_per_position"] = []
    for metric in llm.get_metrics():
        name = metric.name.removeprefix("vllm:spec_decode_")
        if name in SPEC_COUNTERS:
            out[name] = int(getattr(metric, "value", 0))
        elif name == "num_accepted_tokens_per_pos":
            out["accepted_per_position"] = [int(v) for v in getattr(metric, "values", [])]
    return out


def counter_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out = {k: after[k] - before[k] for k in SPEC_COUNTERS}
    a, b = after["accepted_per_position"], before["accepted_per_position"]
    b = b + [0] * (len(a) - len(b))
    out["accepted_per_position"] = [x - y for x, y in zip(a, b, strict=True)]
    return out


def generate(llm: Any, prompts: list[list[int]], max_tokens: int) -> tuple[list[dict[str, Any]], float]:
    """One round: the requests submitted together, greedy; (per request: tokens and latency, wall s)."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    start = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    wall = time.perf_counter() - start
    requests = []
    for o in outs:
        m = o.metrics
        latency = (m.last_token_ts - m.queued_ts) if m is not None and m.last_token_ts > 0 else wall
        first = (m.first_token_ts - m.queued_ts) if m is not None and m.first_token_ts > 0 else None
        requests.append(
            {
                "token_ids": [int(t) for t in o.outputs[0].token_ids],
                "latency_s": latency,
                "first_token_s": first,
                "finish_reason": o.outputs[0].finish_reason,
            }
        )
    return requests, wall


def check_distinct(job: dict[str, Any]) -> None:
    """Raise ValueError when a `distinct` job would hand one prompt to its engine twice: two
    requests of the batch sizes' prompt lists with the same token ids (the same problem listed
    twice, or two problems with one text), a measured prompt that is also a warm-up prompt, or
    repeated passes."""
    if not job.get("distinct"):
        return
    if int(job.get("repeats", 1)) > 1:
        raise ValueError("a distinct-prompt job runs each batch size once (repeats would ask every prompt again)")
    prompts = job["prompts"]
    seen: dict[tuple[int, ...], str] = {}
    for rnd in job.get("warmup", []):
        for p in rnd:
            seen.setdefault(tuple(p), "the warm-up")
    for b in job["batches"]:
        for i in job["batch_prompts"][str(b)]:
            key = tuple(prompts[i])
            if key in seen:
                raise ValueError(
                    f"prompt {i} at batch {b} was already asked on this engine ({seen[key]}): "
                    "a drafter that keeps earlier answers would draft it from its own answer"
                )
            seen[key] = f"batch {b}"


def _requests(job: dict[str, Any], b: int) -> list[int]:
    """The prompt indices batch size b asks, in order."""
    given = job.get("batch_prompts") or {}
    if str(b) in given:
        return [int(i) for i in given[str(b)]]
    n = len(job["prompts"])
    return [i % n for i in range(max(n, int(job.get("requests_per_batch", 3)) * b))]


def run_batch(llm: Any, prompts: list[list[int]], batch: int, max_tokens: int, order: list[int]) -> dict[str, Any]:
    """The requests `order` (indices into prompts) with `batch` of them in flight at every
    moment, as a server keeps its batch full: a request is admitted as soon as another finishes
    (continuous batching). Per request: its tokens and its latency (admitted to finished, on this
    process's clock); the pass's wall time, the load average around it and vLLM's
    speculative-decoding counters over it. Requests name no answer namespace: REST's hybrid
    drafts from the server's shared one, as `serve` runs it."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    load_before = os.getloadavg()[0]
    admitted: dict[str, tuple[int, float]] = {}
    done: dict[int, dict[str, Any]] = {}
    before = spec_counters(llm)
    start = time.perf_counter()
    nxt = 0
    while nxt < len(order) or engine.has_unfinished_requests():
        while nxt < len(order) and len(admitted) - len(done) < batch:
            rid = f"b{batch}-{nxt}"
            params = SamplingParams(temperature=0.0, max_tokens=max_tokens, output_kind=RequestOutputKind.FINAL_ONLY)
            engine.add_request(rid, {"prompt_token_ids": prompts[order[nxt]]}, params)
            admitted[rid] = (nxt, time.perf_counter())
            nxt += 1
        for out in engine.step():
            if out.finished:
                j, t0 = admitted[out.request_id]
                done[j] = {
                    "prompt": order[j],
                    "token_ids": [int(t) for t in out.outputs[0].token_ids],
                    "latency_s": time.perf_counter() - t0,
                    "finish_reason": out.outputs[0].finish_reason,
                }
    wall = time.perf_counter() - start
    return {
        "batch": batch,
        "wall_s": wall,
        "loadavg": [load_before, os.getloadavg()[0]],
        "requests": [done[j] for j in range(len(order))],
        "spec": counter_delta(spec_counters(llm), before),
    }


def step_cost(
    llm: Any, prompts: list[list[int]], sizes: list[int], steps: int = 16, context: int = 64
) -> dict[str, list[float]]:
    """Milliseconds of one plain decoding step with B requests in flight, for each B in sizes:
    (time for 1 + steps tokens - time for 1 token) / steps, on prompts cut to `context` tokens
    (a step's cost hardly depends on it; the prefill of long ones would dominate the time this
    takes), their prefill cached alike in both calls, the faster of two tries."""
    ms = []
    for b in sizes:
        # distinct requests: each prompt ends in its own token, so no two share their last block
        batch = [prompts[i % len(prompts)][:context] + [i] for i in range(b)]
        generate(llm, batch, 1)  # caches the prompts' blocks for both timed calls
        best = float("inf")
        for _ in range(2):
            _, short = generate(llm, batch, 1)
            _, long = generate(llm, batch, 1 + steps)
            best = min(best, 1000.0 * (long - short) / steps)
        ms.append(round(max(best, 0.01), 3))
    for i in range(1, len(ms)):  # a bigger step never costs less
        ms[i] = max(ms[i], ms[i - 1])
    return {"sizes": list(sizes), "ms": ms}


def same_tokens(passes: list[dict[str, Any]]) -> bool:
    """Whether repeated passes of a batch size emitted the same tokens, request by request (greedy:
    they must; their latencies differ, of course)."""
    tokens = [[q["token_ids"] for q in p["requests"]] for p in passes]
    return all(t == tokens[0] for t in tokens)


def proposer_totals(llm: Any, stats: str | None, prompt: list[int]) -> dict[str, Any] | None:
    """The REST proposer's running totals so far. Its worker process writes them at the start
    of a step at most every FLUSH_S seconds, so one short request after a pause makes it write
    everything up to now (that request's own step or two count towards the next reading)."""
    if not stats:
        return None
    from rest_core.serve.totals import FLUSH_S

    time.sleep(FLUSH_S + 0.05)
    generate(llm, [prompt], 2)
    return json.loads(Path(stats).read_text()) if Path(stats).is_file() else None


def main(argv: list[str] | None = None) -> int:
    job_path = Path((argv or sys.argv[1:])[0])
    job = json.loads(job_path.read_text())
    check_distinct(job)
    from rest_core.serve.launch import fix_version_lookup

    fix_version_lookup()
    from vllm import LLM

    kwargs: dict[str, Any] = dict(
        model=job["model"],
        dtype=job.get("dtype", "auto"),
        max_model_len=job["max_model_len"],
        seed=job.get("seed", 0),
        disable_log_stats=False,
        **job.get("llm_kwargs", {}),
    )
    if job.get("speculative_config"):
        kwargs["speculative_config"] = job["speculative_config"]
    if job.get("additional_config"):
        kwargs["additional_config"] = job["additional_config"]
    t0 = time.perf_counter()
    llm = LLM(**kwargs)
    result: dict[str, Any] = {
        "method": job["method"],
        "load_s": time.perf_counter() - t0,
        "pid": os.getpid(),
        "batches": [],
        "loadavg_start": list(os.getloadavg()),
    }
    for prompts in job.get("warmup", []):  # untimed: kernels, allocator, the proposer's first steps
        generate(llm, prompts, job.get("warmup_tokens", 16))
    if job.get("calibrate"):
        result["cost_curve"] = step_cost(
            llm, job["warmup"][0] if job.get("warmup") else job["prompts"], job["calibrate"]
        )
    stats = job.get("proposer_stats")
    before = proposer_totals(llm, stats, job["prompts"][0])
    for b in job["batches"]:
        order = _requests(job, int(b))
        passes = [
            run_batch(llm, job["prompts"], int(b), int(job["max_tokens"]), order)
            for _ in range(max(1, int(job.get("repeats", 1))))
        ]
        run = min(passes, key=lambda r: r["wall_s"])  # the fastest pass: on a shared machine noise only adds time
        run["passes_wall_s"] = [r["wall_s"] for r in passes]
        run["passes_identical"] = same_tokens(passes)
        if stats:
            run["proposer_before"] = before  # the warm-up's steps are not this batch size's
            run["proposer"] = before = proposer_totals(llm, stats, job["prompts"][0])
        result["batches"].append(run)
    result["loadavg_end"] = list(os.getloadavg())
    Path(job["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
