"""Memory soak: drive the running app over its HTTP API (gradio_client, as "Use via API" shows)
with several sessions at the worst slider-legal settings and read the server's resident memory.

    python scripts/memory_soak.py --datastores datastores            # starts the app on 127.0.0.1
    python scripts/memory_soak.py --url http://127.0.0.1:7860 --pid 1234   # an app already running

Each session (its own client, so its own page session) asks `--answers` questions in one
conversation at n_min = n_max = 1, m = 32, K = 5000, c = 2 on the `chat` store. The server's
VmRSS (/proc/PID/status) is read after the first answer, after all answers, and after every
session pressed Clear (or, with --expire, after their state expired: the app is started with
--session-ttl). Exit 1 when the targets are missed: less than --grow-mb above the level after
the first answer once all answers are in, and within --back-mb of it once cleared / expired.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rest_core.config import PRESETS  # noqa: E402
from rest_core.knobs import APP_KNOBS  # noqa: E402
from rest_core.serve.client import free_port  # noqa: E402

WORST = dict(
    n_min=1, n_max=1, m=32, max_matches=5000, c=2, budget="fixed", use_datastore=True, use_context=True, temperature=0.0
)
QUESTIONS = [
    "Tell me about your favourite city and why people like to visit it.",
    "What are three tips for staying productive when working from home?",
    "Explain the difference between a list and a tuple in Python.",
    "How do I make a good cup of coffee?",
    "Write a short story about a robot learning to paint.",
]
FOLLOW_UPS = ["Tell me more about that.", "Can you summarise it in two sentences?", "What else should I know?"]


def rss_mb(pid: int) -> dict[str, float]:
    """VmRSS and its parts (anonymous, file-backed: the mapped datastore pages) in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def knob_values(max_new_tokens: int) -> list:
    values = {k.name: k.default(PRESETS["cpu"]) for k in APP_KNOBS} | WORST | dict(max_new_tokens=max_new_tokens)
    return [values[k.name] for k in APP_KNOBS]


def start_app(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [
        sys.executable,
        str(ROOT / "app.py"),
        "--datastores",
        str(args.datastores),
        "--no-build",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        args.device,
        "--max-seconds",
        str(args.max_seconds),
    ]
    if args.expire:
        cmd += ["--session-ttl", str(args.expire)]
    print("starting:", " ".join(cmd[1:]), flush=True)
    log = open(args.log, "w") if args.log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return proc, wait_up(proc, port, args.log or "its output", proc.kill)


def wait_up(proc: subprocess.Popen, port: int, log: object, stop: Callable[[], object]) -> str:
    """The started app's URL once it listens on `port` (at most 300 s); exits when it died
    (see `log`) or never came up (`stop` ends it then)."""
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the app exited ({proc.returncode}); see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(1)
    stop()
    sys.exit("the app did not come up in 300 s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--datastores", type=Path, default=ROOT / "datastores", help="the app's datastores folder (read only)"
    )
    p.add_argument("--store", default="chat")
    p.add_argument("--sessions", type=int, default=10)
    p.add_argument("--answers", type=int, default=3, help="answers per session (one conversation)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--max-seconds", type=float, default=0, help="the app's time limit (0: none, so every answer is whole)"
    )
    p.add_argument(
        "--expire",
        type=float,
        default=0,
        help="start the app with this --session-ttl and wait for expiry instead of pressing Clear",
    )
    p.add_argument("--url", help="an app already running (with --pid)")
    p.add_argument("--pid", type=int, help="the process id of that app")
    p.add_argument("--log", help="file for the started app's output")
    p.add_argument("--grow-mb", type=float, default=300)
    p.add_argument("--back-mb", type=float, default=100)
    args = p.parse_args(argv)

    from gradio_client import Client

    proc = None
    if args.url:
        if not args.pid:
            p.error("--url needs --pid (the server process, whose memory is read)")
        url, pid = args.url, args.pid
    else:
        proc, url = start_app(args)
        pid = proc.pid
    rows: list[tuple[str, dict[str, float]]] = []
    knobs = knob_values(args.max_new_tokens)
    try:
        clients = [Client(url, verbose=False) for _ in range(args.sessions)]
        rows.append(("started (model not loaded)", rss_mb(pid)))
        t0 = time.time()
        for turn in range(args.answers):
            for i, client in enumerate(clients):
                message = QUESTIONS[i % len(QUESTIONS)] if turn == 0 else FOLLOW_UPS[(turn - 1) % len(FOLLOW_UPS)]
                out = client.predict(message, args.store, *knobs, api_name="/respond")
                status = out[5]
                if status and "err" in status:
                    print("answer failed:", status, file=sys.stderr)
                    return 1
                if turn == 0 and i == 0:
                    rows.append(("after the first answer", rss_mb(pid)))
                print(f"  session {i + 1} answer {turn + 1} done ({time.time() - t0:.0f} s)", flush=True)
        rows.append((f"after {args.sessions} x {args.answers} answers", rss_mb(pid)))
        if args.expire:
            time.sleep(args.expire + 5)  # Gradio deletes expired state every second
            rows.append((f"after expiry (ttl {args.expire:g} s)", rss_mb(pid)))
        else:
            for client in clients:
                client.predict(api_name="/clear")
            time.sleep(2)
            rows.append(("after Clear in every session", rss_mb(pid)))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)

    base = rows[1][1]["VmRSS"]
    print(f"\n{'':34} {'VmRSS MB':>9} {'vs first':>9} {'RssAnon':>9} {'RssFile':>9}")
    for label, r in rows:
        print(
            f"{label:34} {r['VmRSS']:9.0f} {r['VmRSS'] - base:+9.0f} {r.get('RssAnon', 0):9.0f} {r.get('RssFile', 0):9.0f}"
        )
    grown = rows[2][1]["VmRSS"] - base
    back = rows[3][1]["VmRSS"] - base
    ok = grown < args.grow_mb and abs(back) <= args.back_mb
    print(
        f"\ngrowth over all answers {grown:+.0f} MB (target < {args.grow_mb:g}); "
        f"after {'expiry' if args.expire else 'Clear'} {back:+.0f} MB vs the first answer (target within {args.back_mb:g}): {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
