"""Replay a vLLM bench's greedy answers through the REST proposer at batch 1, without vLLM: each
request's answer (from the run's `ar` pass at batch 1) is verified chain by chain as vLLM would
(the longest agreeing prefix of the draft, then one token of the model's own), each step costing
what the run's own draft log timed for that many tokens, plus the proposer's real time. Greedy
answers do not depend on the drafts, so the same answers replay under any drafting setting, free
of the machine's noise: a way to compare settings before a bench, never a substitute for one
(what vLLM adds around a step and the prefills are not in it).

    python -m rest_core bench --engine vllm --suite humaneval --split eval --limit 10 --batch 1 \\
        --methods ar,hybrid --out bench_results/he-b1
    python scripts/replay_proposer.py --run bench_results/he-b1 --datastore datastores/code
    python scripts/replay_proposer.py --run bench_results/he-b1 --datastore datastores/code --answers-tokens 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rest_core.config import RetrievalConfig  # noqa: E402
from rest_core.serve.settings import DEFAULT_ANSWERS, DEFAULT_MATCHES, ServedStore, rest_config  # noqa: E402


def step_costs(log: Path) -> dict[int, float]:
    """Median ms of a one-request step per verified tokens, from a proposer's draft log (sizes
    timed at least 3 times), never falling as the tokens grow."""
    seen: dict[int, list[float]] = {}
    for line in log.read_text().splitlines():
        x = json.loads(line)
        if x.get("kind") == "step" and x["rows"] == 1 and x["clean"]:
            seen.setdefault(int(x["tokens"]), []).append(float(x["step_ms"]))
    costs, top = {}, 0.0
    for t in sorted(seen):
        if len(seen[t]) >= 3:
            top = max(top, statistics.median(seen[t]))
            costs[t] = top
    if len(costs) < 2:
        raise SystemExit(f"{log}: fewer than two step sizes timed at batch 1; run the bench with hybrid at --batch 1")
    return costs


class Runner:
    """Stands for vLLM's model runner, handed to the proposer (`attach_runner`): it holds the
    request's id."""

    def __init__(self, proposer) -> None:
        self.proposer = proposer
        self.input_batch = SimpleNamespace(req_ids=[])
        self.requests: dict = {}
        proposer.attach_runner(self)

    def propose_draft_token_ids(self, sampled, lens, ids):
        return self.proposer.propose(sampled, lens, ids)


def replay(proposer, prompts, answers, cost) -> dict[str, float]:
    now = [0.0]
    proposer.clock = lambda: now[0]
    runner = Runner(proposer)
    ids, lens = np.zeros((1, 4096), np.int32), np.zeros(1, np.int32)
    tokens = steps = 0
    spent = thinking = 0.0
    for i, (prompt, answer) in enumerate(zip(prompts, answers, strict=True)):
        runner.input_batch.req_ids = [f"req-{i}"]
        done, new = 1, answer[:1]
        while True:
            ctx = prompt + answer[:done]
            ids[0, : len(ctx)], lens[0] = ctx, len(ctx)
            t0 = time.perf_counter()
            draft = runner.propose_draft_token_ids([new], lens, ids)[0]
            ms = 1000.0 * (time.perf_counter() - t0)
            now[0] += ms / 1000.0
            spent, thinking = spent + ms, thinking + ms
            if done >= len(answer):
                break
            n = 0
            while n < len(draft) and done + n < len(answer) and draft[n] == answer[done + n]:
                n += 1
            ms = cost(1 + len(draft))
            now[0] += ms / 1000.0
            spent, steps, tokens = spent + ms, steps + 1, tokens + n + 1
            new = answer[done : done + n + 1]
            done += len(new)
    runner.input_batch.req_ids = []
    proposer.propose([], lens, ids)  # the last request ends
    return {"M": tokens / steps, "tok/s": 1000.0 * tokens / spent, "propose ms/step": thinking / steps}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, required=True, help="a `bench --engine vllm` output folder with ar at batch 1")
    p.add_argument("--datastore", type=Path, required=True)
    p.add_argument("--method", default="hybrid", choices=("rest", "hybrid", "context"))
    p.add_argument("--k", type=int, default=16, help="num_speculative_tokens")
    p.add_argument("--answers-tokens", type=int, default=DEFAULT_ANSWERS)
    p.add_argument(
        "--costs", type=Path, default=None, help="a draft log to time steps by (default: the run's hybrid, round 0)"
    )
    args = p.parse_args(argv)
    from transformers import AutoTokenizer

    from rest_core.serve.proposer import RestProposer

    work = args.run / "work"
    job = json.loads((work / "ar-0.job.json").read_text())
    ar = json.loads((work / "ar-0.json").read_text())
    first = next((b for b in ar["batches"] if b["batch"] == 1), None)
    if first is None:
        raise SystemExit(f"{work / 'ar-0.json'}: no pass at batch 1")
    answers = [q["token_ids"] for q in first["requests"]]
    prompts = [job["prompts"][q["prompt"]] for q in first["requests"]]
    logs = [work / "hybrid-0-drafts.jsonl", work / "hybrid-drafts.jsonl"]  # today's bench, and before --rounds
    costs = step_costs(args.costs or next((x for x in logs if x.is_file()), logs[0]))
    sizes, ms = np.array(sorted(costs)), np.array([costs[t] for t in sorted(costs)])
    slope = (ms[-1] - ms[0]) / max(sizes[-1] - sizes[0], 1)

    def cost(t: int) -> float:
        return float(np.interp(t, sizes, ms)) if t <= sizes[-1] else float(ms[-1] + slope * (t - sizes[-1]))

    stores = [ServedStore(str(args.datastore.resolve()), args.datastore.name)] if args.method != "context" else []
    rest = rest_config(
        args.method,
        stores,
        retrieval=RetrievalConfig(m=args.k, max_matches=DEFAULT_MATCHES),
        cost_curve=ar.get("cost_curve") or "auto",
        answers_tokens=args.answers_tokens,
    )
    config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=args.k, method="custom_class"),
        model_config=SimpleNamespace(model=job["model"], tokenizer=job["model"], max_model_len=job["max_model_len"]),
        device_config=SimpleNamespace(device_type="cpu"),
        additional_config={"rest": rest},
    )
    proposer = RestProposer(config, tokenizer=AutoTokenizer.from_pretrained(job["model"]))
    out = replay(proposer, prompts, answers, cost)
    snap = proposer.snapshot()
    print(
        f"{args.method} k={args.k} answers_tokens={args.answers_tokens}: "
        + ", ".join(f"{k} {v:.2f}" for k, v in out.items())
    )
    print(f"drafted by source {snap['drafted_by_source']}, accepted {snap['accepted_by_source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
