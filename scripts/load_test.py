"""Load test: N simulated visitors ask the running app one question each, all at once, over its
HTTP API (as "Use via API" shows); time to first token and tokens/s per visitor (p50, p95)
and the total tokens/s, for each N.

    python scripts/load_test.py --datastores datastores --visitors 1,4,16   # starts the app
    python scripts/load_test.py --backend native,vllm --visitors 1,4,16  # both, one after the other
    python scripts/load_test.py --url http://127.0.0.1:7860/ --visitors 4  # an app already running

Loopback only (the visitors are this machine's threads, never another host), bounded in count
(--max-visitors) and time (--timeout per visitor). A visitor's tokens/s is its tokens over the
time from its first token to its last; the total is every visitor's tokens over the wall time
from the first request to the last answer. Visitors ask different questions (so no answer is
another's cache), in fresh sessions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from contention import ask, start_app, stop_app  # noqa: E402
from memory_soak import QUESTIONS  # noqa: E402

from rest_core.serve.client import LOOPBACK  # noqa: E402


def visit(url: str, message: str, max_new_tokens: int, timeout: float) -> dict:
    r = ask(url, message, max_new_tokens, timeout)
    if r["ok"]:
        r |= dict(ttft_s=r["first"] - r["start"], tok_s=r["tokens"] / max(r["end"] - r["first"], 1e-3))
    return r


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def run_load(url: str, n: int, args: argparse.Namespace) -> dict:
    messages = [f"{QUESTIONS[i % len(QUESTIONS)]} (visitor {i + 1})" for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda m: visit(url, m, args.max_new_tokens, args.timeout), messages))
    done = [r for r in results if r["ok"]]
    row = dict(visitors=n, answered=len(done), failed=[r["why"] for r in results if not r["ok"]])
    if done:
        wall = max(r["end"] for r in done) - min(r["start"] for r in done)
        ttft, rate = [r["ttft_s"] for r in done], [r["tok_s"] for r in done]
        row |= dict(
            ttft_p50_s=statistics.median(ttft),
            ttft_p95_s=percentile(ttft, 0.95),
            tok_s_p50=statistics.median(rate),
            tok_s_p95=percentile(rate, 0.05),  # the slow tail: 95% of visitors were at least this fast
            total_tok_s=sum(r["tokens"] for r in done) / wall,
        )
    return row


def run_backend(backend: str, counts: list[int], args: argparse.Namespace) -> list[dict]:
    """Every visitor count on one app (started here with --backend `backend`, or args.url)."""
    with tempfile.TemporaryDirectory(prefix="rest-load-") as tmp:
        extra = ("--backend", backend)
        proc, url = (None, args.url) if args.url else start_app(args.datastores, Path(tmp) / "app.log", False, extra)
        try:
            run_load(url, 1, args)  # the model (and a vLLM server) loads, the kernels compile: not counted
            return [{"backend": backend, **run_load(url, n, args)} for n in counts]
        finally:
            if proc is not None:
                stop_app(proc)


def report(rows: list[dict]) -> None:
    print(
        f"\n{'backend':>8} {'visitors':>8} {'TTFT p50':>9} {'TTFT p95':>9} {'tok/s p50':>10} {'tok/s p95':>10} {'total':>8}"
    )
    for r in rows:
        if "total_tok_s" in r:
            print(
                f"{r['backend']:>8} {r['visitors']:8d} {r['ttft_p50_s']:8.1f}s {r['ttft_p95_s']:8.1f}s "
                f"{r['tok_s_p50']:10.1f} {r['tok_s_p95']:10.1f} {r['total_tok_s']:8.1f}"
            )
        if r["failed"]:
            print(f"  {len(r['failed'])} visitor(s) failed: {r['failed'][0]}")
    by = {(r["backend"], r["visitors"]): r for r in rows if "total_tok_s" in r}
    for (backend, n), r in sorted(by.items()):
        base = by.get(("native", n))
        if backend != "native" and base is not None:
            print(
                f"{backend} / native at {n} visitors: total tok/s {r['total_tok_s'] / base['total_tok_s']:.2f}x, "
                f"TTFT p95 {r['ttft_p95_s'] / base['ttft_p95_s']:.2f}x"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="an app already running on this machine (loopback)")
    p.add_argument("--datastores", type=Path, default=Path(__file__).resolve().parents[1] / "datastores")
    p.add_argument("--visitors", default="1,4,16", help="comma-separated visitor counts")
    p.add_argument("--max-visitors", type=int, default=32)
    p.add_argument(
        "--backend",
        default="native",
        help="the app's --backend, or several one after the other: native,vllm (vllm: make serve-env first)",
    )
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--timeout", type=float, default=900, help="seconds a visitor waits for its whole answer")
    args = p.parse_args(argv)
    counts = [int(x) for x in args.visitors.split(",") if x.strip()]
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    if not counts or min(counts) < 1 or max(counts) > args.max_visitors:
        p.error(f"--visitors: counts between 1 and --max-visitors ({args.max_visitors})")
    if not backends or any(b not in ("native", "vllm") for b in backends) or (args.url and len(backends) > 1):
        p.error("--backend: native, vllm or native,vllm (one only with --url)")
    if args.url and urlparse(args.url).hostname not in LOOPBACK:
        p.error("--url: loopback only (127.0.0.1, localhost, ::1)")
    rows = [row for backend in backends for row in run_backend(backend, counts, args)]
    report(rows)
    print(json.dumps(rows))
    return 0 if all(not r["failed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
