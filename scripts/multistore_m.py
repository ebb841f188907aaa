"""Does drafting from two stores at once draft at least as well as the better single store?

Measures M (mean generated length: new tokens per forward step) of greedy REST on a few code
prompts (HumanEval training split) and chat prompts (MT-Bench training split, first turn) with
the `code` store alone, the `chat` store alone, and both together at several weight splits,
at fixed budgets c. Greedy output is the same whatever drafts (checked here too), so M is the
only thing that changes. The context source is off unless --context: the stores are compared.

    .venv/bin/python scripts/multistore_m.py --datastores datastores            # the table
    .venv/bin/python scripts/multistore_m.py --datastores datastores --json out.json

Measured 2026-11-30 (2-core CPU, SmolLM2-135M embedded, chat = ShareGPT 22M tokens, code =
Python sources 79M tokens; HumanEval 100-103, MT-Bench 101-103; context off):

| c | prompts | code | chat | both 1:1 | both 3:1 | both 1:3 |
|---|---|---|---|---|---|---|
| 2 | code | 1.384 | 1.497 | 1.561 | 1.455 | 1.542 |
| 2 | chat | 1.234 | 1.339 | 1.295 | 1.295 | 1.317 |
| 8 | code | 1.515 | 1.741 | 1.766 | 1.652 | 1.766 |
| 8 | chat | 1.264 | 1.463 | 1.386 | 1.374 | 1.450 |

Code prompts: both (1:1) beat the better single store (which is `chat`: ShareGPT holds much
code). Chat prompts: both stay below `chat` alone (the code store's continuations take draft
slots); leaning the split towards chat (1:3) closes most of the gap.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rest_core.bench.suites import load_suite  # noqa: E402
from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig  # noqa: E402


def open_store(path: Path, tokenizer, tries: int = 5):
    """Open a store, waiting a minute between tries (it may be being rebuilt)."""
    from rest_core.store.datastore import Datastore

    for attempt in range(tries):
        try:
            return Datastore.open(path, tokenizer)
        except (OSError, ValueError) as exc:
            if attempt == tries - 1:
                raise
            print(f"cannot open {path} yet ({exc}); retrying in 60 s", file=sys.stderr, flush=True)
            time.sleep(60)


def selections(splits: list[str]) -> dict[str, tuple[tuple[str, float], ...]]:
    """Which stores draft, with their shares: each alone, then both at each code:chat split."""
    out = {"code": (("code", 1.0),), "chat": (("chat", 1.0),)}
    for split in splits:
        a, b = (float(x) for x in split.split(":"))
        out[f"both {split}"] = (("code", a), ("chat", b))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datastores", default="datastores", help="folder holding the 'code' and 'chat' stores")
    p.add_argument("--model", default="embedded")
    p.add_argument("--device", default="cpu")
    p.add_argument("--code-prompts", type=int, default=4, help="HumanEval training problems (100, 101, ...)")
    p.add_argument("--chat-prompts", type=int, default=3, help="MT-Bench training questions (101, 102, ...)")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--c", default="2,8", help="fixed budgets, comma-separated")
    p.add_argument("--splits", default="1:1,3:1,1:3", help="code:chat weight splits for 'both'")
    p.add_argument("--context", action="store_true", help="also draft from the context")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)

    import torch

    from rest_core.decode.engine import Engine, collect
    from rest_core.decode.models import load_model

    torch.set_num_threads(args.threads)
    lm = load_model(args.model, device=args.device)
    folder = Path(args.datastores)
    stores = {name: open_store(folder / name, lm.tokenizer) for name in ("code", "chat")}
    engine = Engine(lm.model, lm.tokenizer, datastores=stores, reuse_cache=False)

    prompts = [
        ("code", p.id, engine.encode(p.turns[0], chat=False))
        for p in load_suite("humaneval", limit=args.code_prompts, split="train")
    ]
    prompts += [
        ("chat", p.id, engine.encode(p.turns[0], chat=True))
        for p in load_suite("mtbench", limit=args.chat_prompts, split="train")
    ]
    budgets = [int(c) for c in args.c.split(",")]
    chosen = selections([s for s in args.splits.split(",") if s])
    retrieval = RetrievalConfig()

    rows = []  # one per (c, selection, prompt)
    outputs: dict[str, list[int]] = {}  # greedy output per prompt: must not depend on the drafts
    for c in budgets:
        for label, shares in chosen.items():
            draft = DraftConfig(c=c, budget="fixed", use_context=args.context, stores=shares)
            cfg = GenerationConfig(
                max_new_tokens=args.tokens, retrieval=retrieval, draft=draft, sampling=SamplingConfig()
            )
            for kind, pid, ids in prompts:
                res = collect(engine.generate(ids, cfg))
                same = outputs.setdefault(pid, res.token_ids) == res.token_ids
                by_store = engine.source_table.count_sources(s for ev in res.events for s in ev.token_sources)
                rows.append(
                    {
                        "c": c,
                        "stores": label,
                        "kind": kind,
                        "prompt": pid,
                        "new_tokens": res.totals.new_tokens,
                        "steps": res.totals.steps,
                        "accepted_by_store": by_store,
                        "same_output": same,
                    }
                )
                print(
                    f"c={c} {label:<11} {pid:<16} M={res.totals.mean_generated_length:.2f} {by_store}",
                    file=sys.stderr,
                    flush=True,
                )

    def m(c: int, label: str, kind: str) -> float:
        sel = [r for r in rows if r["c"] == c and r["stores"] == label and r["kind"] == kind]
        return sum(r["new_tokens"] for r in sel) / sum(r["steps"] for r in sel)

    print(
        f"\nM (new tokens per step, pooled over prompts), greedy, {args.tokens} new tokens, "
        f"{args.code_prompts} code + {args.chat_prompts} chat prompts, context {'on' if args.context else 'off'}\n"
    )
    print("| c | prompts | " + " | ".join(chosen) + " |")
    print("|---|---|" + "---|" * len(chosen))
    for c in budgets:
        for kind in ("code", "chat"):
            print(f"| {c} | {kind} | " + " | ".join(f"{m(c, label, kind):.3f}" for label in chosen) + " |")
    identical = all(r["same_output"] for r in rows)
    print(f"\ngreedy output identical across all store selections: {identical}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
