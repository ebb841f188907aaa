"""Contention: how fast one answer streams through the app's HTTP API while the app's own other
work shares the cores: idle, while a default datastore builds (first start), while an uploaded
corpus builds, and while a second session runs Compare.

    python scripts/contention.py --datastores datastores      # starts the app(s) on 127.0.0.1

Each measurement is one answer in a fresh session (the same message and the default settings,
so every answer is the same tokens): its tokens/s as the stats under the chat report it (model
time, from its first step) and its time to first token as a visitor sees it. Each condition is
reported as a ratio of idle. For the store build, a second app is started on a datastores folder
that lacks the `code` store (the `chat` store linked in), so it builds `code` at start, and the
answer is measured while that build runs. The last line is one JSON object: `idle_tok_s` and a
`ratio_<condition>` per condition. Exit 1 when a ratio is below --min-ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_soak import ROOT, free_port, wait_up  # noqa: E402

from rest_core.config import PRESETS  # noqa: E402
from rest_core.knobs import APP_KNOBS  # noqa: E402

MESSAGE = "Explain how a hash table works, with a short example in Python."


def knob_args(max_new_tokens: int) -> list:
    values = {k.name: k.default(PRESETS["cpu"]) for k in APP_KNOBS} | dict(max_new_tokens=max_new_tokens)
    return [values[k.name] for k in APP_KNOBS]


def start_app(datastores: Path, log: Path, build: bool, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """The app in a session of its own (its store builds, and a vLLM server it starts, are its
    children: stopped with it); `extra`: more of the app's flags."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "--datastores", str(datastores), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--device", "cpu", "--max-seconds", "0"] + ([] if build else ["--no-build"])
    cmd += list(extra)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    return proc, wait_up(proc, port, log, lambda: stop_app(proc))


def stop_app(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def text(value: object) -> str:
    """An output's HTML: gradio_client gives a component update as a dict with its value."""
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, str) else ""


def stat(stats_html: object, key: str) -> float:
    m = re.search(r'<div class="v">([\d.]+)</div><div class="k">' + re.escape(key) + "</div>", text(stats_html))
    return float(m.group(1)) if m else float("nan")


def ask(url: str, message: str, max_new_tokens: int, timeout: float = 0.0, headers: dict | None = None) -> dict:
    """One answer in a fresh session: ok (or why not), its tokens, tokens/s (the stats' figure),
    the time of the request, of its first token and of its end (perf_counter seconds).
    `headers`: sent with every request (a proxy's X-Forwarded-For, say)."""
    from gradio_client import Client

    client = Client(url, verbose=False, headers=headers)
    t0 = time.perf_counter()
    job = client.submit(message, "chat", *knob_args(max_new_tokens), api_name="/respond")
    first = None
    for out in job:
        if first is None and stat(out[1], "tokens") > 0:
            first = time.perf_counter()
        if timeout and time.perf_counter() - t0 > timeout:
            job.cancel()
            return dict(ok=False, why=f"no answer within {timeout:g} s")
    final = job.outputs()[-1]
    end = time.perf_counter()
    status, tokens = text(final[5]), int(stat(final[1], "tokens") or 0)
    if "err" in status or tokens <= 0:
        return dict(ok=False, why=status or "no tokens")
    return dict(ok=True, tokens=tokens, tok_s=stat(final[1], "tokens/s"), start=t0, first=first or end, end=end)


def answer(url: str, max_new_tokens: int) -> dict:
    """The measured answer: tokens/s, tokens, time to first token, wall time."""
    r = ask(url, MESSAGE, max_new_tokens)
    if not r["ok"]:
        sys.exit(f"the answer failed: {r['why']}")
    return dict(tok_s=r["tok_s"], tokens=r["tokens"], ttft_s=r["first"] - r["start"], wall_s=r["end"] - r["start"])


def corpus_file(folder: Path, mb: float) -> Path:
    """About `mb` MB of real text for an upload: this machine's Python standard library sources."""
    out = folder / "upload.txt"
    size = 0
    with open(out, "w", encoding="utf-8") as f:
        for path in sorted(Path(os.__file__).parent.rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            f.write(text + "\n")
            size += len(text.encode("utf-8"))
            if size >= mb * 1e6:
                break
    return out


def during_upload(url: str, args: argparse.Namespace, folder: Path) -> dict:
    """An answer while another session's upload of --upload-mb MB builds."""
    from gradio_client import Client, handle_file

    uploader = Client(url, verbose=False)
    job = uploader.submit(
        [handle_file(str(corpus_file(folder, args.upload_mb)))], "", "load", [], api_name="/build_corpus"
    )
    time.sleep(args.settle_s)  # the file is sent and its build has started
    out = answer(url, args.max_new_tokens)
    out["overlapped"] = not job.done()  # the build was still running when the answer ended
    job.result(timeout=1800)
    return out


def during_compare(url: str, args: argparse.Namespace) -> dict:
    """An answer sent while a second session's Compare runs (both wait for the one model)."""
    from gradio_client import Client

    other = Client(url, verbose=False)
    job = other.submit(
        "Write a haiku about the sea, then explain it.", "chat", *knob_args(args.max_new_tokens), api_name="/compare"
    )
    time.sleep(args.settle_s)
    out = answer(url, args.max_new_tokens)
    out["overlapped"] = True
    job.result(timeout=1800)
    return out


def during_store_build(args: argparse.Namespace, folder: Path) -> dict:
    """A second app, started on a datastores folder without `code`: it builds `code` at start
    (as on a fresh Space) while the answer is measured."""
    from rest_core.ui.runtime import is_store

    stores = folder / "datastores"
    stores.mkdir()
    (stores / "chat").symlink_to((args.datastores / "chat").resolve())
    proc, url = start_app(stores, folder / "app-build.log", build=True)
    try:
        answer(url, args.max_new_tokens)  # the model loads while the build runs
        out = answer(url, args.max_new_tokens)
        out["overlapped"] = not is_store(stores / "code")
    finally:
        stop_app(proc)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datastores", type=Path, default=ROOT / "datastores", help="with the chat store (read only)")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--upload-mb", type=float, default=15.0)
    p.add_argument("--settle-s", type=float, default=3.0, help="wait this long after starting the other work")
    p.add_argument("--min-ratio", type=float, default=0.5)
    args = p.parse_args(argv)
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="rest-contention-") as tmp:
        folder = Path(tmp)
        proc, url = start_app(args.datastores, folder / "app.log", build=False)
        try:
            answer(url, args.max_new_tokens)  # the model loads, the kernels compile
            rows["idle"] = answer(url, args.max_new_tokens)
            rows["upload_build"] = during_upload(url, args, folder)
            rows["compare"] = during_compare(url, args)
            rows["idle_again"] = answer(url, args.max_new_tokens)
        finally:
            stop_app(proc)
        rows["store_build"] = during_store_build(args, folder)
    idle = (rows["idle"]["tok_s"] + rows["idle_again"]["tok_s"]) / 2
    print(f"\n{'condition':14} {'tokens/s':>9} {'ratio':>6} {'first token s':>14} {'tokens':>7} {'overlapped':>10}")
    for name, r in rows.items():
        over = "" if "overlapped" not in r else ("yes" if r["overlapped"] else "NO")
        print(f"{name:14} {r['tok_s']:9.2f} {r['tok_s'] / idle:6.2f} {r['ttft_s']:14.1f} {r['tokens']:7d} {over:>10}")
    result = {"idle_tok_s": round(idle, 2)}
    result |= {f"ratio_{k}": round(r["tok_s"] / idle, 3) for k, r in rows.items() if not k.startswith("idle")}
    result |= {f"ttft_s_{k}": round(r["ttft_s"], 2) for k, r in rows.items()}
    ok = all(v >= args.min_ratio for k, v in result.items() if k.startswith("ratio_"))
    ok = ok and all(r.get("overlapped", True) for r in rows.values())
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
