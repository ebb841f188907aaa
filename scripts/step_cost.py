"""Where one step's time goes in the app, at given retrieval settings (default: the slider-legal
worst case K=5000, n_min = n_max = 1, m=32, c=2 on the `chat` store): the engine's parts
(retrieve, draft, forward, accept), then what the app adds per step (`compact_event`, the trie
figure). Means over the steps of one answer.

    python scripts/step_cost.py                       # the worst case
    python scripts/step_cost.py --m 1 --k 1           # the same prompt with almost no retrieval
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig  # noqa: E402

PROMPT = "Tell me about your favourite city and why people like to visit it."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datastore", type=Path, default=ROOT / "datastores" / "chat")
    p.add_argument("--n-min", type=int, default=1)
    p.add_argument("--n-max", type=int, default=1)
    p.add_argument("--m", type=int, default=32)
    p.add_argument("--k", type=int, default=5000)
    p.add_argument("--c", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the cores this process may use)")
    args = p.parse_args(argv)

    import torch

    from rest_core.cpus import available_cpus
    from rest_core.decode.engine import Engine
    from rest_core.decode.models import load_model
    from rest_core.store.datastore import Datastore
    from rest_core.ui.tree_layout import compact_event
    from rest_core.ui.trie_view import trie_figure

    torch.set_num_threads(args.threads or available_cpus())
    lm = load_model("embedded", device="cpu")
    engine = Engine(lm.model, lm.tokenizer, Datastore.open(args.datastore), reuse_cache=False)
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        retrieval=RetrievalConfig(n_min=args.n_min, n_max=args.n_max, m=args.m, max_matches=args.k),
        draft=DraftConfig(c=args.c, budget="fixed", use_context=True),
    )
    ids = engine.encode([{"role": "user", "content": PROMPT}], chat=True)
    sums: dict[str, float] = {}
    steps = 0
    last = time.perf_counter()
    for ev in engine.generate(ids, config):
        t0 = time.perf_counter()
        small = compact_event(ev)
        t1 = time.perf_counter()
        trie_figure(small, lm.tokenizer)
        t2 = time.perf_counter()
        tm = ev.timings
        parts = dict(
            step=(t0 - last) * 1e3 + (t1 - t0) * 1e3,  # the engine's step and the compact event
            retrieve=tm.retrieve_ms,
            draft=tm.draft_ms,
            forward=tm.forward_ms,
            accept=tm.accept_ms,
            compact=(t1 - t0) * 1e3,
            figure=(t2 - t1) * 1e3,  # drawn at most once a second while streaming
            trie_nodes=len(ev.trie) if ev.trie is not None else 0,
        )
        for k, v in parts.items():
            sums[k] = sums.get(k, 0.0) + v
        steps += 1
        last = time.perf_counter()
    print(f"K={args.k} n={args.n_min}..{args.n_max} m={args.m} c={args.c}: {steps} steps, mean per step")
    for k, v in sums.items():
        print(f"  {k:10} {v / steps:9.1f}{'' if k == 'trie_nodes' else ' ms'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
