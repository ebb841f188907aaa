"""The vLLM backend's answers while its server starts, dies and restarts (VllmCalls over the
Supervisor), on the stand-in server of tests/fake_vllm.py: an early answer says what the engine
waits for, an answer the server cuts says so, later answers run on the native engine (saying so)
until a restarted server is up, and after the last restart for good; nothing waits forever and
no process of a killed server is left."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rest_core.decode.events import StepEvent
from rest_core.serve.client import ServerError
from rest_core.serve.supervisor import GAVE_UP, RESTARTING
from rest_core.ui.model_calls import ModelCalls, Notice
from rest_core.ui.vllm_calls import VllmBackend, VllmCalls
from tests.fake_vllm import ANSWER, FakeServer, gone
from tests.ui.test_vllm_calls import fake_backend, job

pytestmark = pytest.mark.skipif(not os.path.isfile("/proc/self/stat"), reason="Linux /proc only")


def tokens(items) -> list[int]:
    return [t for e in items if isinstance(e, StepEvent) for t in e.tokens]


@pytest.fixture
def native(monkeypatch):
    """The native engine, as a marker: the jobs it was given."""
    jobs = []
    monkeypatch.setattr(ModelCalls, "answer", lambda self, j: jobs.append(j) or iter(["native answer"]))
    monkeypatch.setattr(ModelCalls, "compare", lambda self, j: iter(["native compare"]))
    return jobs


def test_an_answer_sent_while_the_engine_starts_says_what_it_waits_for(tmp_path):
    built = threading.Event()
    with fake_backend(tmp_path, before=built.wait) as b:
        while "datastores" not in b.state.waiting:
            b.supervisor.wait_change(0.5)
        items = VllmCalls(b).answer(job())
        first = next(items)
        assert isinstance(
            first, Notice
        ) and "Starting the serving engine (vLLM): waiting for the default datastores'" in (first.text)
        threading.Timer(1.5, built.set).start()
        rest = list(items)
    notices = [n for n in rest if isinstance(n, Notice)]
    assert len(notices) >= 2 and notices[-1] == Notice("")  # said again while it waits, cleared once up
    assert tokens(rest) == ANSWER


def test_an_answer_waits_for_the_start_no_longer_than_start_timeout(tmp_path, native):
    with fake_backend(tmp_path, before=lambda: time.sleep(1.5), start_timeout=0.5) as b:
        t0 = time.monotonic()
        items = list(VllmCalls(b).answer(job()))
        assert time.monotonic() - t0 < 1.2
    assert "still starting" in items[-2].text and items[-1] == "native answer" and len(native) == 1


def test_a_killed_server_cuts_its_answer_then_the_native_engine_answers_until_it_is_back(tmp_path, native):
    server = FakeServer(workdir=tmp_path / "rest-vllm-1-k")
    server.delay = 0.4
    b = VllmBackend(server, ("code",), start_timeout=30, restarts=1)
    calls = VllmCalls(b)
    b.start()
    engines = []
    try:
        b.wait(30)
        engines.append(server.engine_pid())
        items = calls.answer(job())
        assert next(items) == Notice("") and isinstance(next(items), StepEvent)
        (server.workdir / "hold").touch()  # the restarted server waits, as a loading model does
        killed = time.monotonic()
        os.kill(server.proc.pid, signal.SIGKILL)
        with pytest.raises(ServerError, match="cut after 1 tokens.*closed the stream.*send again"):
            list(items)
        assert time.monotonic() - killed < 10
        while b.state.name != RESTARTING:
            b.supervisor.wait_change(0.5)
        meanwhile = list(calls.answer(job()))
        assert meanwhile[0].kind == "warn" and "was killed (SIGKILL)) and is restarting" in meanwhile[0].text
        assert meanwhile[1:] == ["native answer"] and gone(engines[0], 5)
        (server.workdir / "hold").unlink()
        b.wait(30)
        engines.append(server.engine_pid())
        assert tokens(calls.answer(job())) == ANSWER and len(native) == 1  # the restarted server answers
        os.kill(server.proc.pid, signal.SIGKILL)  # once more: no restart left
        while b.state.name != GAVE_UP:
            b.supervisor.wait_change(0.5)
        off = list(calls.answer(job()))
        assert "is off (the vLLM server was killed (SIGKILL); 1 restarts did not keep it up)" in off[0].text
        assert off[1:] == ["native answer"] and list(calls.compare(job())) == ["native compare"]
    finally:
        b.stop()
    assert all(gone(pid, 5) for pid in engines)


def test_an_answer_the_server_refuses_as_it_dies_runs_on_the_native_engine(tmp_path, native, monkeypatch):
    """The server dies between the routing and the request, before its watch noticed: nothing
    was streamed yet, so the native engine answers instead of an error."""
    from rest_core.ui import vllm_calls

    server = FakeServer(workdir=tmp_path / "rest-vllm-1-r")
    b = VllmBackend(server, ("code",), start_timeout=30)
    b.supervisor.poll_s = 60.0  # the watch does not see the death during this test
    b.start()
    try:
        b.wait(30)
        engine = server.engine_pid()
        real = vllm_calls.vllm_answer

        def dies_first(backend, j, off=False):
            os.kill(server.proc.pid, signal.SIGKILL)
            server.proc.wait(5)
            yield from real(backend, j, off)

        monkeypatch.setattr(vllm_calls, "vllm_answer", dies_first)
        items = list(VllmCalls(b).answer(job()))
        assert items[-1] == "native answer" and "runs on the native engine meanwhile" in items[-2].text
    finally:
        b.stop()
    assert gone(engine, 5)
