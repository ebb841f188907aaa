"""A vLLM server for the app, from the app's own environment: start one (`VllmServer`, the
`serve` command in a process group of its own, on loopback) or use one already running, and
stream completions from it (`stream_completion`). Standard library only: no vLLM, no HTTP
package.

The app asks with token ids (the prompt exactly as its native engine encodes it) and reads token
ids back (`return_token_ids`), so an answer from vLLM is comparable token for token with the
native engine's.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rest_core.serve.process_group import Leader, Proc, boot_id, end_group, leader_of, members, proc_info

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ServerError(RuntimeError):
    """The vLLM server could not start, went away, or refused a request (the message says why)."""


@dataclass(frozen=True)
class Chunk:
    """One streamed piece of a completion: its new token ids, and the finish reason on the last."""

    stream_id: str
    token_ids: tuple[int, ...]
    finish_reason: str | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_loopback(url: str) -> str:
    """`url` if its host is this machine's loopback; the app never sends a visitor's text elsewhere."""
    host = urlparse(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"the vLLM server must be on this machine (127.0.0.1, localhost, ::1), got {url!r}")
    return url.rstrip("/")


def _connection(url: str, timeout: float) -> http.client.HTTPConnection:
    u = urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)


def get_json(url: str, path: str, timeout: float = 5.0) -> Any:
    conn = _connection(url, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise ServerError(f"GET {path}: HTTP {resp.status}")
        return json.loads(body) if body else None
    finally:
        conn.close()


def sse_events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream ("data: {...}" lines, "data: [DONE]" last)."""
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


def stream_completion(url: str, body: dict[str, Any], timeout: float = 600.0) -> Iterator[Chunk]:
    """POST /v1/completions with stream on; a Chunk per streamed piece. Closing the generator
    closes the connection, and vLLM aborts the request."""
    conn = _connection(url, timeout)
    try:
        payload = json.dumps({**body, "stream": True, "return_token_ids": True}).encode()
        conn.request("POST", "/v1/completions", payload, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            detail = resp.read(2000).decode("utf-8", "replace")
            raise ServerError(f"vLLM refused the request (HTTP {resp.status}): {_message(detail)}")
        finished = False
        for event in sse_events(iter(resp.readline, b"")):
            if "error" in event:
                raise ServerError(f"vLLM: {_message(json.dumps(event))}")
            for choice in event.get("choices", ()):
                finished = finished or choice.get("finish_reason") is not None
                yield Chunk(
                    str(event.get("id", "")),
                    tuple(int(t) for t in choice.get("token_ids") or ()),
                    choice.get("finish_reason"),
                )
        if not finished:  # the connection closed mid-answer: the server went away (or was killed)
            raise ServerError(f"the vLLM server at {url} closed the stream before the answer's end")
    except (OSError, http.client.HTTPException) as exc:
        raise ServerError(f"the vLLM server at {url} did not answer: {exc}") from None
    finally:
        conn.close()


def _message(text: str) -> str:
    try:
        raw = json.loads(text)
        err = raw.get("error", raw)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:500]
    except (ValueError, AttributeError):
        return text[:500]


SERVER_PID = "server.pid"  # in a VllmServer's workdir: its process group's leader (Leader.text)


def stop_orphan_server(workdir: Path, wait_s: float = 10.0) -> bool:
    """Stop the server a VllmServer started in `workdir`, and every process it started (its
    engine core, workers), when the process that started it was killed before it could: the
    group lives on, holding memory and a port. Only the group of the recorded leader, and only
    if that pid has not been reused (process_group.members); a record without a start time (an
    older one) counts only while its pid runs a command naming this very folder. Whether any
    process was stopped."""
    try:
        leader = Leader.parse((workdir / SERVER_PID).read_text())
    except (OSError, ValueError, IndexError):
        return False
    if leader.start is None:
        try:
            cmdline = Path(f"/proc/{leader.pid}/cmdline").read_bytes()
        except OSError:
            return False
        info = proc_info(leader.pid)
        if info is None or str(workdir).encode() not in cmdline:
            return False
        leader = Leader(leader.pid, info.start, boot_id())
    if not members(leader):
        return False
    end_group(leader, wait_s)
    return True


@dataclass
class VllmServer:
    """A vLLM server with the REST proposer, started by this process on 127.0.0.1: the `serve`
    command with the app's model, these stores (name -> folder) and a draft log in `workdir`
    (a folder of this app's own), in a process group of its own (`leader`) that `stop` ends
    whole. `url` set instead: a server already running (loopback only), whose draft log, if it
    writes one where this process can read it, is `log`; it is never started or stopped here."""

    model: str = "embedded"
    stores: dict[str, Path] = field(default_factory=dict)
    method: str = "hybrid"
    workdir: Path | None = None
    max_seqs: int = 16
    extra: Sequence[str] = ()
    url: str = ""
    log: Path | None = None
    proc: subprocess.Popen | None = None
    leader: Leader | None = None
    model_name: str = ""
    error: str = ""
    given: bool = field(init=False)

    def __post_init__(self) -> None:
        self.given = bool(self.url)

    def command(self, port: int) -> list[str]:
        cmd = [sys.executable, "-m", "rest_core", "serve", "--model", self.model, "--method", self.method]
        for name, path in self.stores.items():
            cmd += ["--datastore", f"{name}={path}"]
        cmd += ["--draft-log", str(self.log), "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--max-num-seqs", str(self.max_seqs), "--disable-uvicorn-access-log", *self.extra]
        return cmd

    def start(self) -> None:
        """Start the server (returns at once: `wait_ready` waits for it), or adopt `url`. Again
        after `stop`: a fresh server, on a new port, with an empty draft log."""
        if self.given:
            self.url = check_loopback(self.url)
            return
        if self.workdir is None:
            raise ValueError("VllmServer needs a workdir (a folder of its own) for its draft log and output")
        self.stop()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "drafts.jsonl"
        self.log.write_bytes(b"")
        self.model_name = self.error = ""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        out = open(self.workdir / "server.log", "wb")  # noqa: SIM115 - the child's output, closed with it
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            self.command(port), cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        self.leader = leader_of(self.proc.pid)
        # Whom to stop if this process is killed before it can (stop_orphan_server, at the next start).
        (self.workdir / SERVER_PID).write_text(self.leader.text())

    def wait_ready(self, timeout: float = 600.0) -> None:
        """Wait until the server answers /v1/models (the model is loaded); ServerError if it
        exits first or takes longer than `timeout`, with the end of its output."""
        if self.model_name:
            return
        proc = self.proc  # `stop` (from another thread) clears self.proc: this wait then ends too
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                self.error = f"the vLLM server {exit_text(proc.returncode)}: {self.output_tail()}"
                raise ServerError(self.error)
            try:
                models = get_json(self.url, "/v1/models", timeout=2.0)
                self.model_name = str(models["data"][0]["id"])
                return
            except (OSError, ServerError, KeyError, IndexError, ValueError, http.client.HTTPException):
                time.sleep(0.5)
        raise ServerError(f"the vLLM server did not start within {timeout:.0f} s: {self.output_tail()}")

    def exited(self) -> str:
        """How the server this process started ended ("" while it runs, or if given by url)."""
        proc = self.proc
        if proc is None or proc.poll() is None:
            return ""
        return f"the vLLM server {exit_text(proc.returncode)}"

    def running(self) -> bool:
        """Whether the server can be running: one given by url, or one started here whose process runs."""
        proc = self.proc
        return self.given or (proc is not None and proc.poll() is None)

    def output_tail(self, chars: int = 1500) -> str:
        path = self.workdir / "server.log" if self.workdir is not None else None
        if path is None or not path.is_file():
            return ""
        return path.read_bytes()[-chars:].decode("utf-8", "replace").strip()

    def stop(self, wait_s: float = 20.0) -> list[Proc]:
        """End the server this process started and every process it started (its group), also
        when the server itself has already died and left them; a server given by url is left
        running. What could not be ended (nothing, normally)."""
        proc, leader, self.proc = self.proc, self.leader, None
        if proc is None or leader is None:
            return []
        left = end_group(leader, wait_s)
        try:
            proc.wait(1)  # reap it (end_group waited for it to end)
        except subprocess.TimeoutExpired:
            pass
        return left


def exit_text(code: int | None) -> str:
    """ "exited (code 3)", "was killed (SIGKILL)"."""
    if code is not None and code < 0:
        try:
            return f"was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed (signal {-code})"
    return f"exited (code {code})"
