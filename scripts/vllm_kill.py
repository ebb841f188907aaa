"""Kill the vLLM backend's server mid-answer (SIGKILL, as the out-of-memory killer would) and
measure what visitors see: how soon the cut answer says so, whether the next visitor is
answered (by the native engine while the server restarts, by the restarted server after), and
whether any process of the killed server is left running; and, first, what a visitor who sends
before the server is up sees meanwhile.

    python scripts/vllm_kill.py --datastores datastores    # starts the app with --backend vllm

One app on 127.0.0.1 (its vLLM server on 127.0.0.1 too), four visitors one after the other, over
the app's HTTP API; every wait is bounded (--timeout). The steps:
  1. an early visitor sends as soon as the page answers, before the server is up: the status
     line it gets, and when its first token comes;
  2. a visitor asks for a long answer; after --kill-after tokens the server's own process is
     killed: the seconds until that visitor's page says the answer was cut (target: < 10 s);
  3. the processes of the killed server's group (its engine core, workers): the seconds until
     none is left running;
  4. the next visitor, at once: answered or not, by which engine;
  5. once the restarted server is up, one more visitor (on vLLM again);
  6. the app stopped with SIGTERM: any process left of its servers.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from contention import knob_args, start_app, stat, stop_app, text  # noqa: E402
from memory_soak import ROOT  # noqa: E402

from rest_core.serve.client import SERVER_PID  # noqa: E402
from rest_core.serve.process_group import Leader, end_group, members  # noqa: E402

READY_LINE = "vLLM server ready at"


def names(leader: Leader) -> list[str]:
    """The running processes of `leader`'s group, as 'pid name'."""
    out = []
    for p in members(leader):
        try:
            out.append(f"{p.pid} {Path(f'/proc/{p.pid}/comm').read_text().strip()}")
        except OSError:
            pass
    return out


def server_leader(tmp: Path, other_than: Leader | None = None, timeout: float = 120.0) -> Leader:
    """The leader of the server the app started (in its folder under `tmp`), another than `other_than`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in tmp.glob(f"rest-vllm-*/{SERVER_PID}"):
            try:
                leader = Leader.parse(record.read_text())
            except (OSError, ValueError, IndexError):
                continue
            if leader != other_than:
                return leader
        time.sleep(0.2)
    sys.exit("the app started no vLLM server")


def plain(fragment: str) -> str:
    """An HTML fragment's text."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def tokens_of(stats_html: object) -> int:
    """The tokens figure of the stats under the chat (0 before the first)."""
    n = stat(stats_html, "tokens")
    return int(n) if n == n else 0  # NaN: not shown yet


def ready_count(log: Path) -> int:
    return log.read_text(errors="replace").count(READY_LINE) if log.is_file() else 0


def wait_ready(log: Path, count: int, timeout: float) -> float:
    """Seconds until the app's log says `count` servers were up; exits after `timeout`."""
    t0 = time.monotonic()
    while ready_count(log) < count:
        if time.monotonic() - t0 > timeout:
            sys.exit(f"no vLLM server ready in {timeout:.0f} s; see {log}")
        time.sleep(0.5)
    return time.monotonic() - t0


def visit(url: str, store: str, message: str, max_new_tokens: int, timeout: float, on_tokens=None) -> dict:
    """One answer in a fresh session, watched as it streams: when the first status line, the
    first token and the end came (seconds after the request), the statuses seen, the final
    status and chat note. `on_tokens(n)`, called with the tokens so far, may act (kill)."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    t0 = time.monotonic()
    job = client.submit(message, store, *knob_args(max_new_tokens), api_name="/respond")
    r: dict = dict(statuses=[], first_token_s=None, first_status_s=None, t0=t0)
    for out in job:
        now = time.monotonic() - t0
        status, tokens = plain(text(out[5])), tokens_of(out[1])
        if status and status not in r["statuses"]:
            r["statuses"].append(status)
            r["first_status_s"] = r["first_status_s"] or now
        if tokens and r["first_token_s"] is None:
            r["first_token_s"] = now
        if on_tokens is not None:
            on_tokens(tokens, r)
        if now > timeout:
            job.cancel()
            r["why"] = f"no answer within {timeout:g} s"
            break
    final = job.outputs()[-1] if job.outputs() else None
    r["end_s"] = time.monotonic() - t0
    if final is not None:
        r["tokens"] = tokens_of(final[1])
        r["status"] = plain(text(final[5]))
        notes = re.findall(r"generation failed:[^<]*", text(final[0]))
        r["failed"] = html.unescape(notes[-1]) if notes else ""
    r["ok"] = bool(r.get("tokens")) and not r.get("failed") and "why" not in r
    r["engine"] = "native" if any("native engine" in s for s in r["statuses"]) else "vllm"
    return r


def cut_visitor(url: str, leader: Leader, args: argparse.Namespace) -> dict:
    """A long answer, its server killed after args.kill_after tokens (step 2)."""
    killed: dict = {}

    def kill(tokens: int, r: dict) -> None:
        if not killed and tokens >= args.kill_after:
            killed.update(at_tokens=tokens, group=names(leader), t=time.monotonic())
            os.kill(leader.pid, signal.SIGKILL)
        if killed and "said_s" not in killed and (r["statuses"] and "generation failed" in r["statuses"][-1]):
            killed["said_s"] = time.monotonic() - killed["t"]

    r = visit(url, args.store, "Write a long story about a lighthouse keeper and a storm.", 512, args.timeout, kill)
    if not killed:
        sys.exit(f"the answer ended after {r.get('tokens')} tokens, before the kill: lower --kill-after")
    said = killed.get("said_s", r["t0"] + r["end_s"] - killed["t"])  # else: said in its last output
    return dict(
        kill_t=killed["t"],
        killed_at_tokens=killed["at_tokens"],
        group_at_kill=killed["group"],
        message_s=round(said, 2),
        message=r.get("failed") or r.get("status", ""),
        tokens_kept=r.get("tokens"),
    )


def group_gone(leader: Leader, timeout: float) -> tuple[float | None, list[str]]:
    """Seconds until nothing of `leader`'s group runs (None: still some after `timeout`), and what is left."""
    t0 = time.monotonic()
    while members(leader):
        if time.monotonic() - t0 > timeout:
            return None, names(leader)
        time.sleep(0.1)
    return round(time.monotonic() - t0, 2), []


def early_visitor(url: str, args: argparse.Namespace, into: dict) -> threading.Thread:
    def run() -> None:
        into.update(visit(url, args.store, "What is a lighthouse? Two sentences.", 48, args.timeout))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def brief(r: dict) -> dict:
    keys = ("ok", "engine", "tokens", "first_status_s", "first_token_s", "end_s", "failed")
    return {k: (round(r[k], 2) if isinstance(r.get(k), float) else r.get(k)) for k in keys} | {
        "statuses": [s[:170] for s in r.get("statuses", [])[:3]]
    }


def run(args: argparse.Namespace, tmp: Path) -> dict:
    os.environ["TMPDIR"] = str(tmp)  # the app's server folder (rest-vllm-<pid>-*) goes here
    log = tmp / "app.log"
    t0 = time.monotonic()
    proc, url = start_app(args.datastores, log, False, ("--backend", "vllm"))
    out: dict = {"page_up_s": round(time.monotonic() - t0, 1)}
    leaders = [server_leader(tmp)]
    try:
        early: dict = {}
        thread = early_visitor(url, args, early)  # step 1
        out["server_ready_s"] = round(wait_ready(log, 1, args.timeout), 1)
        thread.join(args.timeout)
        out["early"] = brief(early)
        out |= cut_visitor(url, leaders[0], args)  # step 2
        out["group_gone_s"], out["group_left"] = group_gone(leaders[0], 30.0)  # step 3
        out["next"] = brief(visit(url, args.store, "Name three colours.", 32, args.timeout))  # step 4
        wait_ready(log, 2, args.timeout)
        out["restarted_ready_s"] = round(time.monotonic() - out.pop("kill_t"), 1)  # after the kill
        leaders.append(server_leader(tmp, other_than=leaders[0]))
        out["after_restart"] = brief(visit(url, args.store, "Name three animals.", 32, args.timeout))  # step 5
    finally:
        stop_app(proc)  # step 6: SIGTERM, as docker stop or a Space restart would
        out["left_after_app_stop"] = [n for leader in leaders for n in names(leader)]
        for leader in leaders:  # never leave one behind, whatever happened above
            end_group(leader, 5.0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datastores", type=Path, default=ROOT / "datastores", help="the app's datastores (read only)")
    p.add_argument("--store", default="chat", help="the visitors' datastore (none: the conversation only)")
    p.add_argument("--kill-after", type=int, default=24, help="tokens of the long answer before the kill")
    p.add_argument("--timeout", type=float, default=900, help="seconds any one wait may take")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rest-kill-") as tmp:
        out = run(args, Path(tmp))
    print(f"early visitor: {out['early']}")
    print(f"server ready {out['server_ready_s']} s after the page was up")
    print(f"killed at {out['killed_at_tokens']} tokens; its group then: {out['group_at_kill']}")
    print(f"the cut visitor was told in {out['message_s']} s: {out['message']}")
    print(f"killed server's group gone in {out['group_gone_s']} s; left: {out['group_left']}")
    print(f"next visitor: {out['next']}")
    print(f"restarted server ready {out['restarted_ready_s']} s after the kill; then: {out['after_restart']}")
    print(f"left after the app stopped: {out['left_after_app_stop']}")
    print(json.dumps(out))
    ok = out["message_s"] < 10 and out["next"]["ok"] and not out["group_left"] and not out["left_after_app_stop"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
