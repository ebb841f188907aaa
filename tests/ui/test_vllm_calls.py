"""The app's vLLM backend (rest_core.ui.vllm_calls, rest_core.serve.client) against the stand-in
vLLM server of tests/fake_vllm.py (a mock; the real server is tests/serve/test_vllm.py): answers
as step events, limits, errors, Compare, the server's start, death and restarts as answers see
them, and the folders of killed apps."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rest_core.config import GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.serve.client import ServerError, VllmServer, check_loopback
from rest_core.ui.model_calls import ModelCalls, ModelJob, TimeLimit
from rest_core.ui.runtime import StoreSet
from rest_core.ui.settings import parse_args
from rest_core.ui.vllm_calls import VllmBackend, VllmCalls, vllm_answer
from tests.fake_vllm import ANSWER, PROMPT, STEPS, Fake, serve


@contextlib.contextmanager
def fake_backend(folder: Path, before=None, start_timeout: float = 900.0) -> Iterator[VllmBackend]:
    """A started backend on a stand-in server (in a thread, given by url) that answers with
    ANSWER; `before` runs before the backend waits for it (a store build); stopped on exit."""
    fake = Fake(folder / "drafts.jsonl")
    fake.log.touch()
    http = serve(fake)
    b = VllmBackend(VllmServer(url=f"http://127.0.0.1:{http.server_port}", log=fake.log), ("code",), start_timeout)
    b.start(before)
    b.fake = fake
    try:
        yield b
    finally:
        b.stop()
        http.shutdown()


@pytest.fixture
def backend(tmp_path):
    with fake_backend(tmp_path) as b:
        b.wait(10)
        yield b


def job(max_new_tokens=64, stores=("code",), max_seconds=0.0, **cfg) -> ModelJob:
    config = GenerationConfig(max_new_tokens=max_new_tokens, **cfg)
    return ModelJob(
        stores=StoreSet(tuple(stores), tuple(Path(s) for s in stores)),
        prompt_ids=PROMPT,
        config=config,
        max_seconds=max_seconds,
    )


def test_an_answer_from_vllm_becomes_step_events_with_its_accepted_drafts_highlighted(backend):
    events = list(vllm_answer(backend, job()))
    assert all(isinstance(e, StepEvent) for e in events)
    assert [t for e in events for t in e.tokens] == ANSWER
    assert [e.accepted_len for e in events] == [a for _, a in STEPS]  # one event per engine step
    assert events[1].token_sources == (1, 2, 3, 0) and events[3].token_sources == (1, 2, 0)
    assert (
        events[2].draft is not None and len(events[2].draft) == 2 and events[2].accepted == ()
    )  # rejected chain shown
    last = events[-1]
    assert last.finished and last.finish_reason == "eos" and not any(e.finished for e in events[:-1])
    assert last.totals.new_tokens == len(ANSWER) and last.totals.steps == len(STEPS)
    assert last.totals.draft_tokens == sum(a for _, a in STEPS)
    body = backend.fake.bodies[0]
    assert body["prompt"] == list(PROMPT) and body["model"] == "fake-model" and body["temperature"] == 0.0
    # the session's store; GenerationConfig's default does not draft from the context; never from
    # the server's earlier answers (other visitors' text would show in the page's drafted chains)
    assert body["vllm_xargs"] == {"rest_stores": "code", "rest_context": 0, "rest_answers": "off"}


def test_the_length_limit_plain_decoding_and_the_time_limit(backend):
    events = list(vllm_answer(backend, job(max_new_tokens=5)))
    assert sum(len(e.tokens) for e in events) == 5 and events[-1].finish_reason == "length"
    list(vllm_answer(backend, job(method="ar")))
    assert backend.fake.bodies[-1]["vllm_xargs"]["rest_off"] == 1
    backend.fake.delay = 0.3
    items = list(vllm_answer(backend, job(max_seconds=0.4)))
    assert isinstance(items[-1], TimeLimit) and len(items) < len(STEPS)


def test_a_refused_request_is_a_clear_error(backend):
    backend.fake.fail = "This model's maximum context length is 2048 tokens"
    with pytest.raises(ServerError, match="maximum context length"):
        list(vllm_answer(backend, job()))


def test_an_answer_the_server_cuts_says_so(backend):
    """A server killed mid-answer closes the stream without a finish reason: that is an error
    saying where the answer was cut, not an answer that just ends mid-sentence."""
    backend.fake.cut_after = 2  # 1 + 4 tokens sent
    with pytest.raises(ServerError, match="cut after 5 tokens.*closed the stream before the answer's end"):
        list(vllm_answer(backend, job()))


def test_compare_runs_both_lanes_on_the_same_server_and_unserved_stores_go_native(backend, monkeypatch):
    calls = VllmCalls(backend)
    lanes = list(calls.compare(job()))
    assert [lane.method for lane in lanes] == ["rest", "ar", "lookup"]
    assert [t for e in lanes[0].events for t in e.tokens] == [t for e in lanes[1].events for t in e.tokens]
    assert "rest_off" not in backend.fake.bodies[0]["vllm_xargs"] and backend.fake.bodies[1]["vllm_xargs"]["rest_off"]
    assert all(e.accepted_len == 0 for e in lanes[1].events) and lanes[2].lookup is None
    native = []
    monkeypatch.setattr(ModelCalls, "answer", lambda self, j: native.append(j) or iter(()))
    sent = len(backend.fake.bodies)
    list(calls.answer(job(stores=("my-upload",))))
    assert native and len(backend.fake.bodies) == sent  # a store the server does not have: the native engine
    own = ModelJob(
        stores=StoreSet(("code",), (Path("code"),), owner="session-1"), prompt_ids=PROMPT, config=GenerationConfig()
    )
    list(calls.answer(own))
    assert len(native) == 2 and len(backend.fake.bodies) == sent  # a session's own upload, whatever its name
    unknown = VllmBackend(VllmServer(url="http://127.0.0.1:9"), None)  # a server given by url
    assert unknown.serves(StoreSet(("chat", "code"))) and not unknown.serves(own.stores)


def test_a_server_that_exits_at_start_says_why(tmp_path):
    class Broken(VllmServer):
        def command(self, port):
            return [sys.executable, "-c", "print('no vLLM here: run make serve-env'); raise SystemExit(3)"]

    b = VllmBackend(Broken(workdir=tmp_path / "w"), ())
    b.start()
    with pytest.raises(ServerError, match="exited \\(code 3\\).*make serve-env"):
        b.wait(60)  # its restarts end the same way: the app gives up on it
    with pytest.raises(ServerError, match="not started"):
        VllmBackend(VllmServer(url="http://127.0.0.1:9"), ()).wait(0)


def test_a_killed_apps_server_is_stopped_and_its_folder_removed_at_the_next_start(tmp_path):
    """The app killed with SIGKILL leaves its rest-vllm-<pid>-* folder and the server it started
    (its own process group). The next start stops that server, only if the recorded pid still
    runs a command naming that folder (never a reused pid), and removes the folder; a running
    instance's folder is left alone."""
    import os
    import subprocess

    from rest_core.ui.vllm_calls import WORKDIR_PREFIX, remove_stale_workdirs

    class Sleeper(VllmServer):  # the real command's shape: its draft log in the folder, on the command line
        def command(self, port):
            return [sys.executable, "-c", "import time; time.sleep(120)", "--draft-log", str(self.log)]

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    killed = Sleeper(workdir=tmp_path / f"{WORKDIR_PREFIX}{dead}-k")
    killed.start()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    reused = tmp_path / f"{WORKDIR_PREFIX}{dead}-r"  # its pid now another process's
    reused.mkdir()
    (reused / "server.pid").write_text(str(other.pid))
    running = Sleeper(workdir=tmp_path / f"{WORKDIR_PREFIX}{os.getpid()}-a")  # this process: alive
    running.start()
    try:
        assert sorted(remove_stale_workdirs(tmp_path)) == [killed.workdir, reused]
        assert killed.proc.wait(5) is not None and not killed.workdir.exists()
        assert other.poll() is None  # not signalled
        assert running.proc.poll() is None and running.workdir.is_dir()
    finally:
        for proc in (killed.proc, other, running.proc):
            proc.kill()
            proc.wait()


def test_only_a_server_on_this_machine_and_the_flags():
    assert check_loopback("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    with pytest.raises(ValueError, match="this machine"):
        check_loopback("http://example.com:8000")
    s = parse_args(["--backend", "vllm", "--vllm-max-seqs", "8"], env={})
    assert (s.backend, s.vllm_max_seqs, s.vllm_url) == ("vllm", 8, "")
    assert parse_args([], env={"REST_BACKEND": "vllm", "REST_VLLM_URL": "http://127.0.0.1:1"}).vllm_url
    with pytest.raises(ValueError, match="REST_BACKEND"):
        parse_args([], env={"REST_BACKEND": "gpu"})
