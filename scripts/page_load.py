"""Page-load cost: after an answer, N visitors open the page at once (GET /config and GET /, as a
browser does); each load's time and the server's resident memory before and after.

    python scripts/page_load.py --datastores datastores     # starts the app on 127.0.0.1

Issue 19 saw one GET /config after the first answer take 2.5-10 s and add 3 GB, and ten at once
take the server down (Gradio deep-copied the runtime with the page config). Exit 1 when a load
takes longer than --max-s or the server grows by more than --max-mb.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_soak import ROOT, knob_values, rss_mb, start_app  # noqa: E402


def load_page(url: str) -> float:
    """One visitor opening the page: the HTML, then its config (what the browser fetches first)."""
    t0 = time.perf_counter()
    for path in ("", "config"):
        httpx.get(url + path, timeout=120).raise_for_status()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datastores", type=Path, default=ROOT / "datastores")
    p.add_argument("--store", default="chat")
    p.add_argument("--visitors", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-seconds", type=float, default=0)
    p.add_argument("--expire", type=float, default=0)
    p.add_argument("--log", help="file for the started app's output")
    p.add_argument("--max-s", type=float, default=1.0, help="longest acceptable page load")
    p.add_argument("--max-mb", type=float, default=10.0, help="largest acceptable growth of the server")
    args = p.parse_args(argv)

    from gradio_client import Client

    proc, url = start_app(args)
    try:
        Client(url, verbose=False).predict(
            "Explain tuples in Python.", args.store, *knob_values(32), api_name="/respond"
        )
        load_page(url)  # one load first: what Gradio caches on the first request is not a visitor's cost
        before = rss_mb(proc.pid)["VmRSS"]
        with ThreadPoolExecutor(args.visitors) as pool:
            times = sorted(pool.map(load_page, [url] * args.visitors))
        after = rss_mb(proc.pid)["VmRSS"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result = {
        "visitors": args.visitors,
        "max_load_s": round(times[-1], 3),
        "median_load_s": round(times[len(times) // 2], 3),
        "rss_before_mb": round(before, 1),
        "rss_growth_mb": round(after - before, 1),
    }
    print(
        f"{args.visitors} page loads at once after an answer: slowest {times[-1]:.2f} s, median "
        f"{times[len(times) // 2]:.2f} s; server {before:.0f} MB -> {after:.0f} MB"
    )
    print(json.dumps(result))
    return 0 if times[-1] <= args.max_s and after - before <= args.max_mb else 1


if __name__ == "__main__":
    sys.exit(main())
