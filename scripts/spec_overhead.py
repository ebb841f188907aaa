"""What vLLM's speculative path costs per step when nothing is drafted: the `ar` job of a
`bench --engine vllm` run, run again on the same prompts as three jobs, one engine each, in turn:

- `ar`: no speculation (vLLM's default: async scheduling on);
- `ar-sync`: no speculation, async scheduling off (speculation with a custom drafter turns it off);
- `null`: speculation through the `custom_class` hook with `NullProposer`, a drafter that never
  drafts (K as given), so only vLLM's own speculative machinery runs.

    python -m rest_core bench --engine vllm --suite mtbench --split eval --limit 10 --batch 32 \\
        --methods ar --out bench_results/mt-b32
    python scripts/spec_overhead.py --run bench_results/mt-b32 --batch 32

Prints each job's pass times (wall seconds, `--repeats` passes each) and writes
`spec_overhead.json` in the run folder. Needs the vLLM environment (`make serve-env`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class NullProposer:
    """A vLLM `custom_class` drafter that drafts nothing."""

    def __init__(self, vllm_config: object, *args: object, **kwargs: object) -> None:
        pass

    def load_model(self, *args: object, **kwargs: object) -> None:
        pass

    def propose(self, sampled_token_ids: list, *args: object, **kwargs: object) -> list[list[int]]:
        return [[] for _ in range(len(sampled_token_ids))]


def variants(job: dict, k: int) -> dict[str, dict]:
    """The three jobs made from a run's `ar` job."""
    # ar and the null drafter keep no earlier answers, so their repeated passes may ask a prompt again
    base = {**job, "calibrate": None, "proposer_stats": None, "additional_config": None, "distinct": False}
    kwargs = dict(job.get("llm_kwargs") or {})
    null = {"method": "custom_class", "model": "scripts.spec_overhead.NullProposer", "num_speculative_tokens": k}
    return {
        "ar": {**base, "method": "ar", "speculative_config": None, "llm_kwargs": kwargs},
        "ar-sync": {
            **base,
            "method": "ar-sync",
            "speculative_config": None,
            "llm_kwargs": {**kwargs, "async_scheduling": False},
        },
        "null": {**base, "method": "null", "speculative_config": null, "llm_kwargs": kwargs},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, required=True, help="a `bench --engine vllm` output folder with an ar job")
    p.add_argument("--batch", default="32", help="batch sizes, comma-separated")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--k", type=int, default=16, help="num_speculative_tokens of the null drafter")
    args = p.parse_args(argv)
    from rest_core.serve.env import vllm_environ, vllm_python

    job = json.loads((args.run / "work" / "ar-0.job.json").read_text())
    batches = [int(b) for b in args.batch.split(",")]
    out: dict[str, list] = {}
    for name, v in variants(job, args.k).items():
        path = args.run / "work" / f"overhead-{name}.job.json"
        result = args.run / "work" / f"overhead-{name}.json"
        path.write_text(json.dumps({**v, "batches": batches, "repeats": args.repeats, "out": str(result)}))
        with open(args.run / "work" / f"overhead-{name}.log", "w") as log:
            done = subprocess.run(
                [vllm_python(), "-m", "rest_core.serve.bench_worker", str(path)],
                env=vllm_environ(),
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            print(f"{name}: failed (rc {done.returncode}), see {log.name}", file=sys.stderr)
            return 1
        runs = json.loads(result.read_text())["batches"]
        out[name] = [{"batch": r["batch"], "passes_wall_s": r["passes_wall_s"]} for r in runs]
        print(
            name,
            ", ".join(f"batch {r['batch']}: " + " / ".join(f"{w:.1f} s" for w in r["passes_wall_s"]) for r in runs),
        )
    (args.run / "spec_overhead.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
