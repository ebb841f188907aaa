"""Queue flood: one stranger's script queues Run to end from many fresh clients at once, and
ordinary visitors then ask a short question; were they refused, and how long did their first
token take?

    python scripts/queue_flood.py --datastores datastores            # starts the app on 127.0.0.1
    python scripts/queue_flood.py --url http://127.0.0.1:7860/       # an app already running

The flood is --flood anonymous clients (each its own `gradio_client.Client`, so its own session),
each submitting one /run_to_end at the worst slider-legal settings (n_min = n_max = 1, m = 32,
K = 5000, c = 16, --flood-tokens new tokens). After --settle seconds, --visitors ordinary
visitors each ask a short question (/respond, 32 tokens) in fresh sessions. Everyone connects
from this machine, so the app is started as if behind one proxy (--trusted-proxies 1) and each
request carries the X-Forwarded-For that proxy would write: the flood one address, each visitor
another (documentation ranges, never contacted). Reported: how many flood jobs the app queued and refused, every visitor's
refusal (if any) and time to first token (p50, p95). Loopback only, bounded in count and time
(--timeout per visitor; the flood's jobs are cancelled at the end and the app is stopped).
Exit 1 when a visitor was refused or a first token took longer than --target seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from contention import ask, start_app, stop_app  # noqa: E402
from memory_soak import ROOT, WORST  # noqa: E402

SHORT = ["What is 2+2?", "Name three colours.", "What is the capital of France?", "Say hello in Spanish."]
MAX_FLOOD = 64
FLOOD_ADDRESS = "203.0.113.66"  # what the proxy would write for the script's machine


def visitor_headers(i: int) -> dict[str, str]:
    return {"X-Forwarded-For": f"198.51.100.{i + 1}"}


def flood_job(url: str, i: int, tokens: int) -> tuple[object, object, str]:
    """One anonymous client's Run to end: (client, job, "queued" or why it was refused)."""
    from gradio_client import Client

    client = Client(url, verbose=False, headers={"X-Forwarded-For": FLOOD_ADDRESS})
    settings = {k: v for k, v in WORST.items() if k != "c"} | dict(c=16, max_new_tokens=tokens)
    try:
        job = client.submit(
            message=f"Tell me a long story about a lighthouse keeper, part {i + 1}.",
            store="chat",
            api_name="/run_to_end",
            **settings,
        )
    except Exception as exc:  # noqa: BLE001 - a refusal is what is measured
        return client, None, f"refused: {exc}"
    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline:  # until the queue took it, refused it or ran it
        code = str(getattr(job.status(), "code", "")).rsplit(".", 1)[-1]
        if code == "QUEUE_FULL":
            return client, job, "refused: queue full"
        if job.done():
            exc = job.exception()
            return client, job, f"refused: {exc}" if exc is not None else "ran"
        if code in ("IN_QUEUE", "PROCESSING", "ITERATING", "PROGRESS"):
            return client, job, "queued"
        time.sleep(0.1)
    return client, job, "queued"


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datastores", type=Path, default=ROOT / "datastores")
    p.add_argument("--url", help="an app already running")
    p.add_argument("--flood", type=int, default=36, help=f"anonymous clients queuing Run to end (at most {MAX_FLOOD})")
    p.add_argument("--flood-tokens", type=int, default=512)
    p.add_argument("--visitors", type=int, default=4)
    p.add_argument("--settle", type=float, default=15.0, help="seconds between the flood and the visitors")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds a visitor waits at most")
    p.add_argument("--target", type=float, default=20.0, help="the slowest first token allowed (seconds)")
    p.add_argument("--app-flag", action="append", default=[], help="a flag for the started app (repeatable)")
    args = p.parse_args(argv)
    if not 0 < args.flood <= MAX_FLOOD:
        p.error(f"--flood must be 1..{MAX_FLOOD}")

    proc = None
    if args.url:
        url = args.url
    else:
        log = Path(tempfile.mkdtemp(prefix="queue-flood-")) / "app.log"
        extra = ("--max-seconds", "60", "--trusted-proxies", "1", *args.app_flag)
        proc, url = start_app(args.datastores, log, build=False, extra=extra)
        print(f"app at {url} (log {log})", flush=True)
    flood = []
    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            flood = list(pool.map(lambda i: flood_job(url, i, args.flood_tokens), range(args.flood)))
        queued = sum(1 for _, _, s in flood if s in ("queued", "ran"))
        refused = [s for _, _, s in flood if s not in ("queued", "ran")]
        print(
            f"flood: {args.flood} clients in {time.perf_counter() - t0:.1f} s: {queued} queued, {len(refused)} refused"
        )
        for why in sorted(set(refused))[:3]:
            print(f"  e.g. {why[:200]}")
        time.sleep(args.settle)
        with ThreadPoolExecutor(args.visitors) as pool:
            asks = [(m, visitor_headers(i)) for i, m in enumerate(SHORT[: args.visitors])]
            visits = list(pool.map(lambda a: ask(url, a[0], 32, args.timeout, headers=a[1]), asks))
    finally:
        for _, job, _ in flood:
            if job is not None:
                job.cancel()
        if proc is not None:
            stop_app(proc)
    ok = [v for v in visits if v["ok"]]
    failed = [v["why"] for v in visits if not v["ok"]]
    ttft = [v["first"] - v["start"] for v in ok]
    if ttft:
        print(
            f"visitors: {len(ok)} of {len(visits)} answered; first token p50 {statistics.median(ttft):.1f} s, "
            f"p95 {percentile(ttft, 0.95):.1f} s (each: {', '.join(f'{t:.1f}' for t in ttft)})"
        )
    for why in failed:
        print(f"visitor refused or failed: {why[:300]}")
    return 1 if failed or not ttft or percentile(ttft, 0.95) > args.target else 0


if __name__ == "__main__":
    sys.exit(main())
