"""A stand-in vLLM server for the app's vLLM backend tests. A mock, said plainly: vLLM does not
install in the app's environment (it pins another torch and transformers), so this serves vLLM
0.32's streaming completion format (`return_token_ids` chunks, "data: [DONE]") from a small HTTP
server and appends the proposer's draft log lines before each chunk, as the proposer does. The
same path on a real vLLM server is tests/serve/test_vllm.py (`make test-vllm`).

In a thread (`serve`), or as a process of its own, shaped like a real server's process group:
`python -m tests.fake_vllm --port P --draft-log FILE [--delay S] [--engine]` (--engine: it first
starts a child that outlives it, as vLLM's engine core does, and writes its pid to engine.pid
beside the draft log; while a file `hold` is there too, it waits before it answers, as a
loading model does). `FakeServer` is a VllmServer that starts it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rest_core.serve.client import VllmServer
from rest_core.serve.process_group import proc_info

PROMPT = (1, 2, 3, 4)
ANSWER = list(range(100, 112))
# The script: per engine step, (drafted chain, accepted); then the model's own token.
STEPS = [((), 0), ((101, 102, 103), 3), ((105, 9), 0), ((106, 107), 2), ((), 0), ((110, 111, 5), 2)]


class Fake:
    """One stand-in server: the requests it got, the chunks it sends, a delay per chunk."""

    def __init__(self, log: Path) -> None:
        self.log, self.bodies, self.delay, self.fail = log, [], 0.0, None
        self.cut_after: int | None = None  # chunks sent before the connection drops (a server killed mid-answer)

    def chunks(self, n: int, prompt_len: int = len(PROMPT)) -> list[tuple[list[int], str | None]]:
        """(token ids, finish reason) per step for an answer of at most n tokens; the draft log
        gains each step's resolved chain before its chunk is sent."""
        out, pos = [], 0
        for drafted, accepted in STEPS:
            if pos >= n:
                break
            toks = ANSWER[pos : min(pos + accepted + 1, n)]
            if drafted:
                line = {"kind": "draft", "req": f"cmpl-{self.rid}-0-1a2b3c4d", "context_len": prompt_len + pos}
                line |= {"drafted": list(drafted), "bits": [1, 2, 3][: len(drafted)], "accepted": accepted}
                out.append((toks, None, json.dumps(line)))
            else:
                out.append((toks, None, None))
            pos += len(toks)
        last = out[-1]
        out[-1] = (last[0], "length" if pos >= n and n < len(ANSWER) else "stop", last[2])
        return out


def serve(fake: Fake, port: int = 0) -> ThreadingHTTPServer:
    """`fake` served on 127.0.0.1:`port` (0: any free port) from a thread."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_GET(self):
            body = json.dumps({"data": [{"id": "fake-model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.bodies.append(body)
            if fake.fail:
                msg = json.dumps({"error": {"message": fake.fail}}).encode()
                self.send_response(400)
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)
                return
            fake.rid = f"r{len(fake.bodies)}"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunks = fake.chunks(body["max_tokens"], len(body["prompt"]))
            if body["vllm_xargs"].get("rest_off"):  # the proposer drafts nothing: one token a step
                toks = [t for c in chunks for t in c[0]]
                chunks = [([t], chunks[-1][1] if i == len(toks) - 1 else None, None) for i, t in enumerate(toks)]
            for sent, (toks, finish, line) in enumerate(chunks):
                if sent == fake.cut_after:
                    return  # no finish reason, no [DONE]: the connection just closes
                if line is not None:
                    with open(fake.log, "a") as f:
                        f.write(line + "\n")
                time.sleep(fake.delay)
                event = {"id": f"cmpl-{fake.rid}", "choices": [{"token_ids": toks, "finish_reason": finish}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class FakeServer(VllmServer):
    """A VllmServer whose command is this stand-in server, with an 'engine core' child in its group."""

    delay: float = 0.0

    def command(self, port: int) -> list[str]:
        cmd = [sys.executable, "-m", "tests.fake_vllm", "--port", str(port), "--draft-log", str(self.log)]
        return cmd + ["--engine", "--delay", str(self.delay)]

    def engine_pid(self, timeout: float = 30.0) -> int:
        """The pid of the engine child of the server started last."""
        path = self.workdir / "engine.pid"
        deadline = time.monotonic() + timeout
        while not path.is_file() or not path.read_text():
            assert time.monotonic() < deadline, "the stand-in server did not start its engine"
            time.sleep(0.05)
        return int(path.read_text())


def running(pid: int) -> bool:
    return proc_info(pid) is not None


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether `pid` ends within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--draft-log", type=Path, required=True)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--engine", action="store_true")
    args, _ = p.parse_known_args(argv)
    if args.engine:
        engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        (args.draft_log.parent / "engine.pid").write_text(str(engine.pid))
    hold = args.draft_log.parent / "hold"
    deadline = time.monotonic() + 60
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    fake = Fake(args.draft_log)
    fake.delay = args.delay
    serve(fake, args.port)
    time.sleep(300)  # bounded: a test's server never outlives it by more


if __name__ == "__main__":
    main()
