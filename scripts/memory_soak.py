"""Memory soak: drive the running app over its HTTP API (gradio_client, as "Use via API" shows)
with several sessions at the worst slider-legal settings and read the server's resident memory.

    python scripts/memory_soak.py --datastores datastores            # starts the app on 127.0.0.1
    python scripts/memory_soak.py --url http://127.0.0.1:7860 --pid 1234   # an app already running
    python scripts/memory_soak.py --datastores datastores --step-through --sessions 5 [--expire 60 | --disconnect]

Chat (the default): each session (its own client, so its own page session) asks `--answers`
questions in one conversation at n_min = n_max = 1, m = 32, K = 5000, c = 2 on the `chat` store.
The server's VmRSS (/proc/PID/status) is read after the first answer, after all answers, and
after every session pressed Clear (or, with --expire, after their state expired: the app is
started with --session-ttl). Exit 1 when the targets are missed: less than --grow-mb above the
level after the first answer once all answers are in, and within --back-mb of it once cleared /
expired.

Step-through (--step-through): each session, one after the other, presses Run to end
(/run_to_end) on a long story at the same settings with the step-through's c = 16 and 512 new
tokens, again after each cut at the server's --max-seconds (60 by default here, as on a Space),
until its answer is finished or holds as many steps as the step-through keeps. VmRSS is read
after the first session's first call (the baseline: the model is loaded by then), after each
session's answer, and once all sessions' answers are in (they live: with --expire, the finished
sessions press Back every --expire / 4 s so that none expires early); then the sessions are
freed: Clear on each (then Back, which must show no step), or with --expire S their state
expires (the app runs with --session-ttl S), or with --disconnect their clients close (Gradio's
heartbeat ends, the page's unload frees it). Exit 1 when the targets are missed: less than
--session-grow-mb per session above the baseline while they live, and less than
--session-back-mb per session above it once freed.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def parse_args(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--datastores", type=Path, default=ROOT / "datastores", help="the app's datastores folder (read only)"
    )
    p.add_argument("--store", default="chat")
    p.add_argument("--sessions", type=int, default=10)
    p.add_argument("--answers", type=int, default=3, help="answers per session (one conversation)")
    p.add_argument("--max-new-tokens", type=int, help="tokens per answer (default 128; 512 with --step-through)")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--max-seconds",
        type=float,
        help="the app's time limit (default 0: none, so every answer is whole; 60 with --step-through, the app's own)",
    )
    p.add_argument(
        "--expire",
        type=float,
        default=0,
        help="start the app with this --session-ttl and wait for expiry instead of pressing Clear",
    )
    p.add_argument("--step-through", action="store_true", help="Run to end in the step-through instead of Send")
    p.add_argument("--disconnect", action="store_true", help="step-through: close the clients instead of Clear")
    p.add_argument("--max-calls", type=int, default=30, help="step-through: Run to end calls per session at most")
    p.add_argument("--url", help="an app already running (with --pid)")
    p.add_argument("--pid", type=int, help="the process id of that app")
    p.add_argument("--log", help="file for the started app's output")
    p.add_argument("--grow-mb", type=float, default=300)
    p.add_argument("--back-mb", type=float, default=100)
    p.add_argument("--session-grow-mb", type=float, default=60, help="step-through: growth per live session")
    p.add_argument("--session-back-mb", type=float, default=10, help="step-through: growth per session once freed")
    args = p.parse_args(argv)
    if args.max_new_tokens is None:
        args.max_new_tokens = 512 if args.step_through else 128
    if args.max_seconds is None:
        args.max_seconds = 60.0 if args.step_through else 0.0
    if args.disconnect and (args.expire or not args.step_through):
        p.error("--disconnect goes with --step-through, without --expire")
    if args.step_through and args.expire and args.expire < args.max_seconds + 20:
        print(
            f"note: a Run to end call lasts up to --max-seconds ({args.max_seconds:g} s) and more: with a session "
            f"ttl of {args.expire:g} s the session may expire while its own call runs",
            flush=True,
        )
    return p, args


def main(argv: list[str] | None = None) -> int:
    p, args = parse_args(argv)
    from gradio_client import Client

    proc = None
    if args.url:
        if not args.pid:
            p.error("--url needs --pid (the server process, whose memory is read)")
        url, pid = args.url, args.pid
    else:
        proc, url = start_app(args)
        pid = proc.pid
    try:
        clients = [Client(url, verbose=False) for _ in range(args.sessions)]
        started = ("started (model not loaded)", rss_mb(pid))
        if args.step_through:
            return step_soak(args, clients, pid, started)
        return chat_soak(args, clients, pid, started)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


def chat_soak(args: argparse.Namespace, clients: list, pid: int, started: tuple) -> int:
    """The chat soak (see the module's docstring); 0 when its targets are met."""
    rows: list[tuple[str, dict[str, float]]] = [started]
    knobs = knob_values(args.max_new_tokens)
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
    base = rows[1][1]["VmRSS"]
    print_table(rows, base)
    grown = rows[2][1]["VmRSS"] - base
    back = rows[3][1]["VmRSS"] - base
    ok = grown < args.grow_mb and abs(back) <= args.back_mb
    print(
        f"\ngrowth over all answers {grown:+.0f} MB (target < {args.grow_mb:g}); "
        f"after {'expiry' if args.expire else 'Clear'} {back:+.0f} MB vs the first answer (target within {args.back_mb:g}): {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


def print_table(rows: list[tuple[str, dict[str, float]]], base: float) -> None:
    width = max(34, *(len(label) for label, _ in rows))
    print(f"\n{'':{width}} {'VmRSS MB':>9} {'vs base':>9} {'RssAnon':>9} {'RssFile':>9}")
    for label, r in rows:
        print(
            f"{label:{width}} {r['VmRSS']:9.0f} {r['VmRSS'] - base:+9.0f} {r.get('RssAnon', 0):9.0f} {r.get('RssFile', 0):9.0f}"
        )


# -- step-through --

STEP_C = 16  # the step-through's c at its worst setting here (the target's; its slider goes to 64)
STORY = "Write a long story about a lighthouse keeper and the ships she guides through storms, chapter {n}."
HEADER = re.compile(r"Step (\d+)(?: of \d+)?</b>.*?(\d+) so far(.*?)</div>", re.S)
CUT = "Press Run to end again"  # the status of a call the server's time limit stopped
ENDS = ("The answer is complete.", "steps of one answer, and this one has them all")


def step_settings(max_new_tokens: int) -> dict:
    """/run_to_end's settings by name: the worst slider-legal ones, the step-through's c."""
    return {k: v for k, v in WORST.items() if k != "c"} | dict(c=STEP_C, max_new_tokens=max_new_tokens)


class KeepAlive:
    """Back, every `period` s, in each finished session, so that Gradio's state time to live
    (counted from the state's last update) starts again; nothing when period is 0."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.last: dict[int, float] = {}
        self.clients: list = []

    def add(self, client: Any) -> None:
        if self.period:
            self.clients.append(client)
            self.last[id(client)] = time.time()

    def __call__(self) -> None:
        for client in self.clients:
            if time.time() - self.last[id(client)] >= self.period:
                client.predict(api_name="/back")
                self.last[id(client)] = time.time()


def run_call(client: Any, message: str, args: argparse.Namespace, alive: KeepAlive) -> tuple[str, str]:
    """One /run_to_end (bounded: the server's time limit plus 600 s of queue and model loading);
    (its step header, its status), HTML."""
    job = client.submit(message=message, store=args.store, api_name="/run_to_end", **step_settings(args.max_new_tokens))
    limit = (args.max_seconds or 3000) + 600
    deadline = time.time() + limit
    while not job.done():
        if time.time() > deadline:
            job.cancel()
            raise TimeoutError(f"/run_to_end gave no answer in {limit:g} s")
        alive()
        time.sleep(0.5)
    out = job.result()
    return out[0] or "", out[8] or ""


def run_session(i: int, client: Any, args: argparse.Namespace, alive: KeepAlive, first: Callable) -> str:
    """Session i's answer, Run to end until it ends (`first` after its first call); a summary, or
    raises RuntimeError with the status that stopped it otherwise."""
    t0 = time.time()
    had = 0  # tokens after the previous call
    for call in range(1, args.max_calls + 1):
        header, status = run_call(client, STORY.format(n=i + 1), args, alive)
        if call == 1:
            first()
        m = HEADER.search(header)
        steps, tokens = (int(m[1]), int(m[2])) if m else (0, 0)
        print(f"  session {i + 1} call {call}: step {steps}, {tokens} tokens ({time.time() - t0:.0f} s)", flush=True)
        if tokens <= had:
            raise RuntimeError(
                f"session {i + 1} call {call}: the answer went from {had} to {tokens} tokens: the session's "
                "step-through was lost between calls (its state expired while a call ran?)"
            )
        had = tokens
        if any(end in status for end in ENDS):
            how = "finished" if "complete" in status else "step bound"
            return f"{call} calls, {steps} steps, {tokens} tokens, {how}"
        if CUT not in status:
            raise RuntimeError(f"session {i + 1} call {call}: {re.sub('<[^>]+>', '', status) or 'no status'}")
    raise RuntimeError(f"session {i + 1}: not finished after {args.max_calls} calls")


def step_soak(args: argparse.Namespace, clients: list, pid: int, started: tuple) -> int:
    """The step-through soak (see the module's docstring); 0 when its targets are met."""
    rows: list[tuple[str, dict[str, float]]] = [started]
    alive = KeepAlive(args.expire / 4)
    t0 = time.time()
    try:
        for i, client in enumerate(clients):
            first = (
                (lambda: rows.append(("after session 1's first call (base)", rss_mb(pid))))
                if i == 0
                else (lambda: None)
            )
            done = run_session(i, client, args, alive, first)
            rows.append((f"session {i + 1} answered ({done})", rss_mb(pid)))
            alive.add(client)
    except (RuntimeError, TimeoutError) as exc:
        print("step-through failed:", exc, file=sys.stderr)
        return 1
    print(f"  all answers in ({time.time() - t0:.0f} s)", flush=True)
    rows.append((f"all {args.sessions} sessions live", rss_mb(pid)))
    how, shown = free_sessions(args, clients)
    rows.append((f"after {how}", rss_mb(pid)))
    base = rows[1][1]["VmRSS"]
    print_table(rows, base)
    return judge(args, rows, base, how, shown)


def free_sessions(args: argparse.Namespace, clients: list) -> tuple[str, int]:
    """Free the sessions as args say; (how, sessions whose Back still shows a step after Clear)."""
    if args.expire:
        time.sleep(args.expire + 5)  # the last Back or answer was at most now; Gradio sweeps every second
        for client in clients:
            client.close()
        return f"expiry (ttl {args.expire:g} s)", 0
    if args.disconnect:
        for client in clients:
            client.close()  # its heartbeat stream ends at its next beat (15 s), then the page's unload runs
        time.sleep(35)
        return "the clients disconnected (+35 s)", 0
    for client in clients:
        client.predict(current=[], api_name="/clear")
    time.sleep(2)
    shown = sum(bool(HEADER.search(client.predict(api_name="/back")[0] or "")) for client in clients)
    return "Clear in every session", shown


def judge(args: argparse.Namespace, rows: list, base: float, how: str, shown: int) -> int:
    n = args.sessions
    live = rows[-2][1]["VmRSS"] - base
    freed = rows[-1][1]["VmRSS"] - base
    ok_live = live / n < args.session_grow_mb
    ok_freed = freed / n < args.session_back_mb and not shown
    print(
        f"\nbase: VmRSS after session 1's first call (the model loaded; that call's steps, up to {args.max_seconds:g} s of them, held)\n"
        f"live:  {live:+.0f} MB, {live / n:+.1f} MB per session (target < {args.session_grow_mb:g}): "
        f"{'OK' if ok_live else 'MISSED'}\n"
        f"after {how}: {freed:+.0f} MB, {freed / n:+.1f} MB per session (target < {args.session_back_mb:g}): "
        f"{'OK' if ok_freed else 'MISSED'}"
    )
    if shown:
        print(f"after Clear, Back still showed a step in {shown} of {n} sessions")
    return 0 if ok_live and ok_freed else 1


if __name__ == "__main__":
    sys.exit(main())
