"""Measure the acceptance model's warm-start table on the training split, never on evaluation
problems (HumanEval 100-163, MT-Bench questions 101-160).

    python scripts/fit_acceptance.py collect --suite humaneval --datastore datastores/code \
        --limit 10 --max-new-tokens 64 --c 24 --out /tmp/acc-he.npz
    python scripts/fit_acceptance.py collect --suite mtbench --datastore datastores/chat \
        --limit 5 --max-new-tokens 64 --c 24 --out /tmp/acc-mt.npz
    # datastore-only steps too, so REST without the context source is predicted from its own kind
    python scripts/fit_acceptance.py collect --suite humaneval --datastore datastores/code \
        --limit 6 --max-new-tokens 64 --c 24 --no-context --out /tmp/acc-he-ds.npz
    python scripts/fit_acceptance.py collect --suite mtbench --datastore datastores/chat \
        --limit 4 --max-new-tokens 64 --c 24 --no-context --out /tmp/acc-mt-ds.npz
    python scripts/fit_acceptance.py fit /tmp/acc-he.npz /tmp/acc-mt.npz /tmp/acc-he-ds.npz \
        /tmp/acc-mt-ds.npz --out rest_core/budget/acceptance_prior.json

(These four collections made the shipped prior.)

`collect` runs the engine with a generous fixed budget (top-c by weight, both sources, greedy)
and records, for every verified draft node whose parent was accepted (only those outcomes are
observable), its features and whether the model's own path ran through it. `fit` fits the
logistic model of `rest_core.budget.acceptance` to those records and writes its weights as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rest_core.budget.acceptance import (  # noqa: E402
    FEATURE_NAMES,
    AcceptanceModel,
    NodeFeatures,
    SourceMatch,
    fit_logistic,
    node_features,
    observable,
    reliability,
)


def _event_records(event) -> tuple[NodeFeatures, np.ndarray] | None:
    """Features of the verified nodes whose parent was accepted, and whether each was accepted."""
    if event.draft is None or event.trie is None or not len(event.draft):
        return None
    matches = [SourceMatch(m.source_bit, m.suffix_len, m.occurrences) for m in event.matches]
    idx = np.asarray(event.draft_idx, dtype=np.int64)
    feats = node_features(event.trie, matches, idx)
    rows, outcome = observable(event.draft.parents, event.accepted)
    return feats.take(rows), outcome


def collect(args: argparse.Namespace) -> int:
    import torch

    from rest_core.bench.suites import load_suite
    from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig
    from rest_core.decode.engine import Engine
    from rest_core.decode.models import load_model

    torch.set_num_threads(args.threads)
    loaded = load_model("embedded", device="cpu")
    engine = Engine(loaded.model, loaded.tokenizer, args.datastore, reuse_cache=False)
    config = GenerationConfig(
        method="rest",
        max_new_tokens=args.max_new_tokens,
        retrieval=RetrievalConfig(),
        draft=DraftConfig(
            c=args.c, budget="fixed", use_datastore=not args.no_datastore, use_context=not args.no_context
        ),
    )
    problems = load_suite(args.suite, limit=args.limit, split="train")
    parts: list[NodeFeatures] = []
    outcomes: list[np.ndarray] = []
    t0 = time.time()
    for problem in problems:
        history: list[dict] = []
        for text in problem.turns[: args.turns]:
            if problem.kind == "chat":
                prompt = engine.encode(history + [{"role": "user", "content": text}], chat=True)
            else:
                prompt = engine.encode(text)
            ids = []
            for event in engine.generate(prompt, config):
                ids.extend(event.tokens)
                rec = _event_records(event)
                if rec is not None:
                    parts.append(rec[0])
                    outcomes.append(rec[1])
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": engine.decode(ids)}]
        n = sum(o.shape[0] for o in outcomes)
        print(f"{problem.id}: {n} nodes so far, {time.time() - t0:.0f}s", flush=True)
    feats = NodeFeatures.concat(parts)
    np.savez_compressed(args.out, accepted=np.concatenate(outcomes), **feats.arrays())
    print(f"wrote {args.out}: {feats.n} observable nodes")
    return 0


def fit(args: argparse.Namespace) -> int:
    parts, outcomes = [], []
    for path in args.records:
        with np.load(path) as f:
            parts.append(NodeFeatures.from_arrays(f))
            outcomes.append(f["accepted"].astype(bool))
    feats = NodeFeatures.concat(parts)
    y = np.concatenate(outcomes)
    # Hold out every fifth node to report calibration on data the fit did not see.
    rng = np.random.default_rng(0)
    test = rng.random(y.shape[0]) < 0.2
    x = feats.design()
    w = fit_logistic(x[~test], y[~test], l2=args.l2)
    model = AcceptanceModel(w)
    p = model.conditional(feats.take(np.flatnonzero(test)))
    yt = y[test]
    eps = 1e-6
    logloss = -float(np.mean(yt * np.log(p + eps) + (1 - yt) * np.log(1 - p + eps)))
    base = float(y[~test].mean())
    base_loss = -float(np.mean(yt * np.log(base) + (1 - yt) * np.log(1 - base)))
    print(f"{y.shape[0]} nodes, {y.mean():.3f} accepted; held-out log loss {logloss:.4f} (constant {base_loss:.4f})")
    for row in reliability(p, yt):
        print(
            f"  p in [{row['lo']:.1f}, {row['hi']:.1f}): n={row['n']:5d} predicted {row['predicted']:.3f} observed {row['observed']:.3f}"
        )
    w = fit_logistic(x, y, l2=args.l2)  # the shipped weights use every record
    out = {
        "about": "Acceptance model prior (rest_core.budget.acceptance): logistic weights over FEATURE_NAMES, "
        "fitted by scripts/fit_acceptance.py on the training split (HumanEval 100-163, "
        "MT-Bench 101-160), SmolLM2-135M-Instruct, greedy.",
        "records": [str(Path(p).name) for p in args.records],
        "nodes": int(y.shape[0]),
        "held_out_log_loss": round(logloss, 4),
        "features": list(FEATURE_NAMES),
        "weights": [round(float(v), 5) for v in w],
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    for name, v in zip(FEATURE_NAMES, w):
        print(f"  {name:>22s} {v:+.3f}")
    print(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="record node features and outcomes on the training split")
    c.add_argument("--suite", choices=("humaneval", "mtbench"), required=True)
    c.add_argument("--datastore", required=True)
    c.add_argument("--limit", type=int, default=8)
    c.add_argument("--turns", type=int, default=2)
    c.add_argument("--max-new-tokens", type=int, default=64)
    c.add_argument("--c", type=int, default=24)
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--no-context", action="store_true")
    c.add_argument("--no-datastore", action="store_true")
    c.add_argument("--out", required=True)
    f = sub.add_parser("fit", help="fit the logistic model to recorded nodes and write its JSON")
    f.add_argument("records", nargs="+")
    f.add_argument("--l2", type=float, default=1.0)
    f.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[1] / "rest_core" / "budget" / "acceptance_prior.json")
    )
    args = parser.parse_args(argv)
    return collect(args) if args.command == "collect" else fit(args)


if __name__ == "__main__":
    sys.exit(main())
