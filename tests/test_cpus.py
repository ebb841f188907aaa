"""The cores this process may use (affinity, cgroup quota, REST_THREADS) and how background
builds are started (bounded thread pools, lower priority)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from rest_core.cpus import THREAD_VARS, available_cpus, background_env, cgroup_quota, lower_priority, niced


def _cgroup(tmp_path, v2: str | None = None, v1: tuple[int, int] | None = None):
    root = tmp_path / "cg"
    (root / "app").mkdir(parents=True, exist_ok=True)
    if v2 is not None:
        (root / "app" / "cpu.max").write_text(v2 + "\n")
    if v1 is not None:
        (root / "app" / "cpu.cfs_quota_us").write_text(f"{v1[0]}\n")
        (root / "app" / "cpu.cfs_period_us").write_text(f"{v1[1]}\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/app\n")
    return root, proc


def test_cgroup_v2_quota_in_cores(tmp_path):
    assert cgroup_quota(*_cgroup(tmp_path, v2="200000 100000")) == 2.0
    assert cgroup_quota(*_cgroup(tmp_path, v2="max 100000")) is None


def test_cgroup_v1_quota_in_cores(tmp_path):
    assert cgroup_quota(*_cgroup(tmp_path, v1=(150000, 100000))) == 1.5
    assert cgroup_quota(*_cgroup(tmp_path, v1=(-1, 100000))) is None


def test_unreadable_cgroup_is_no_quota(tmp_path):
    assert cgroup_quota(tmp_path / "none", tmp_path / "missing") is None


def test_threads_follow_affinity_and_quota():
    cores = len(os.sched_getaffinity(0))
    assert available_cpus({}, quota=None) == cores
    assert available_cpus({}, quota=0.5) == 1  # a fraction of a core still runs one thread
    assert available_cpus({}, quota=1.2) == min(cores, 2)
    assert available_cpus({}, quota=1000.0) == cores  # the quota never adds cores


def test_rest_threads_wins_and_is_checked():
    assert available_cpus({"REST_THREADS": "3"}, quota=1.0) == 3
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="REST_THREADS"):
            available_cpus({"REST_THREADS": bad})


def test_a_background_build_gets_one_thread_per_pool():
    env = background_env({"PATH": "/bin", "OMP_NUM_THREADS": "16"})
    assert all(env[v] == "1" for v in THREAD_VARS)
    assert env["TOKENIZERS_PARALLELISM"] == "false" and env["PATH"] == "/bin"


def test_a_niced_command_runs_at_lower_priority():
    cmd = niced([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"], nice=5)
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert int(out) == min(19, mine + 5)


def test_lower_priority_changes_only_the_calling_thread():
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = {}

    def work():
        lower_priority(4)
        seen["tid"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["tid"] == min(19, mine + 4)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine
