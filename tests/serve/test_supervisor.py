"""The vLLM server kept serving (rest_core.serve.supervisor), on the stand-in server of
tests/fake_vllm.py run as a process group of its own: a server that dies, or stops answering,
is ended whole and started again, a bounded number of times, and then given up on."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rest_core.serve.supervisor import GAVE_UP, READY, RESTARTING, STARTING, Supervisor
from tests.fake_vllm import FakeServer, gone, running

pytestmark = pytest.mark.skipif(not os.path.isfile("/proc/self/stat"), reason="Linux /proc only")


def until(sup: Supervisor, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while sup.state.name != name:
        assert time.monotonic() < deadline, f"still {sup.state} after {timeout} s, waiting for {name}"
        sup.wait_change(0.5)


@pytest.fixture
def supervised(tmp_path):
    server = FakeServer(workdir=tmp_path / "rest-vllm-1-s")
    ready = []
    sup = Supervisor(server, start_timeout=30, restarts=1, poll_s=0.05, health_s=1.0, on_ready=lambda: ready.append(1))
    engines: list[int] = []
    yield sup, server, engines, ready
    sup.stop()
    assert all(gone(pid, 5) for pid in engines)


def test_a_killed_server_is_ended_whole_restarted_then_given_up_on(supervised):
    sup, server, engines, ready = supervised
    sup.start()
    until(sup, READY)
    assert sup.serving() and ready == [1]
    engines.append(server.engine_pid())
    first = server.proc.pid
    os.kill(first, signal.SIGKILL)  # the server's own process, as the out-of-memory killer would
    until(sup, RESTARTING, 5)
    assert not sup.serving() and "was killed (SIGKILL)" in sup.state.reason and sup.state.restarts == 1
    until(sup, READY)
    assert gone(engines[0], 5)  # the first server's engine went with it
    assert server.proc.pid != first and ready == [1, 1]
    engines.append(server.engine_pid())
    os.kill(server.proc.pid, signal.SIGKILL)
    until(sup, GAVE_UP, 10)
    assert "1 restarts did not keep it up" in sup.state.reason and not sup.serving()
    assert gone(engines[1], 5)


def test_a_server_that_stops_answering_counts_as_dead(supervised):
    sup, server, engines, _ = supervised
    sup.start()
    until(sup, READY)
    engines.append(server.engine_pid())
    os.kill(server.proc.pid, signal.SIGSTOP)  # alive, but answers nothing
    until(sup, RESTARTING, 10)
    assert "stopped answering" in sup.state.reason
    until(sup, READY)
    assert gone(engines[0], 5)


def test_stop_while_it_starts_leaves_nothing_running(tmp_path):
    server = FakeServer(workdir=tmp_path / "rest-vllm-2-s")
    server.workdir.mkdir()
    (server.workdir / "hold").touch()  # the stand-in waits, as a loading model does
    sup = Supervisor(server, start_timeout=30, poll_s=0.05)
    sup.start(before=lambda: time.sleep(0.2))
    assert sup.state.name == STARTING
    until_waiting = time.monotonic() + 10
    while "load the model" not in sup.state.waiting:
        assert time.monotonic() < until_waiting
        sup.wait_change(0.5)
    engine = server.engine_pid()
    leader = server.proc.pid
    sup.stop()
    assert gone(engine, 5) and not running(leader) and server.proc is None
    time.sleep(0.3)
    assert server.proc is None  # no restart after stop
