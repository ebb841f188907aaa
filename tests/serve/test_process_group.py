"""A vLLM server's whole process group goes with it (rest_core.serve.process_group, VllmServer.stop,
stop_orphan_server): the stand-in server of tests/fake_vllm.py starts a child that outlives it,
as vLLM's engine core does, so killing the server's own process (SIGKILL, as the out-of-memory
killer would) leaves an orphan unless the group is ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rest_core.serve.client import SERVER_PID, stop_orphan_server
from rest_core.serve.process_group import Leader, leader_of, members
from tests.fake_vllm import FakeServer, gone, running

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="Linux /proc only")


@pytest.fixture
def server(tmp_path):
    s = FakeServer(workdir=tmp_path / "rest-vllm-1-x")
    s.start()
    engine = s.engine_pid()
    yield s, engine
    s.stop(wait_s=2)
    for pid in (engine,):  # never leave one behind, whatever the test did
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_stop_ends_the_engine_the_killed_server_left_behind(server):
    s, engine = server
    assert {p.pid for p in members(s.leader)} == {s.proc.pid, engine}
    os.kill(s.proc.pid, signal.SIGKILL)  # the server's own process only
    s.proc.wait(5)
    assert running(engine) and "was killed (SIGKILL)" in s.exited()
    assert s.stop(wait_s=5) == [] and gone(engine, 1)


def test_stop_ends_the_whole_group_of_a_running_server(server):
    s, engine = server
    leader = s.proc.pid
    assert s.stop(wait_s=5) == [] and gone(engine, 1) and not running(leader)


def test_the_next_start_ends_the_orphans_of_a_killed_apps_server(server):
    """The app was killed after its server died: the engine it left is found by its group and
    session (its command line and environment no longer name the folder) and ended."""
    s, engine = server
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(5)
    s.proc = None  # the app is gone: nobody stops it but the next start
    assert Leader.parse((s.workdir / SERVER_PID).read_text()) == s.leader
    assert stop_orphan_server(s.workdir, wait_s=5) and gone(engine, 1)
    assert not stop_orphan_server(s.workdir)  # nothing left


def test_a_reused_pid_or_another_boots_record_is_never_signalled(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        real = leader_of(other.pid)
        folder = tmp_path / "rest-vllm-2-y"
        folder.mkdir()
        for record in (Leader(other.pid, real.start - 1, real.boot), Leader(other.pid, real.start, "another-boot")):
            assert members(record) == []
            (folder / SERVER_PID).write_text(record.text())
            assert not stop_orphan_server(folder)
        (folder / SERVER_PID).write_text(str(other.pid))  # an older record: its command must name the folder
        assert not stop_orphan_server(folder)
        assert other.poll() is None
        assert [p.pid for p in members(real)] == [other.pid]  # the right record finds it
    finally:
        other.kill()
        other.wait()
