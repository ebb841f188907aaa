"""How many cores this process may actually use, and how to start background work that leaves
them to the model.

`os.cpu_count()` is the machine's cores, not this process's: a Hugging Face Space or a container
gets a CPU quota (cgroup `cpu.max`), a `taskset` gets an affinity mask. torch's default thread
count follows the machine, so on a 2-vCPU quota over a 16-core host the model's OpenMP threads
outnumber the cores it may run on, and every forward waits on descheduled threads.

Background work (datastore builds at first start, uploaded corpora) is started with a bounded
number of threads and a lower priority (`background_env`, `lower_priority`): two jobs that each
spread threads over all cores slow each other down many times over (seen here: a forward of
70 ms became 1,448 ms).
"""

from __future__ import annotations

import math
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path

THREADS_ENV = "REST_THREADS"  # an explicit thread count for the model wins over what is detected
BUILD_NICE = 10  # background builds: this much lower priority than the serving process
# The variables the thread pools we use read (torch/OpenMP and MKL, the tokenizers' Rayon pool,
# numba); a background build gets one thread each.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS")


def cgroup_quota(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup in cores (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
    `cpu.cfs_period_us`), or None when there is none or it cannot be read."""
    for path in _cgroup_dirs(root, proc_cgroup):
        quota = _read_quota(path)
        if quota is not None:
            return quota
    return None


def _cgroup_dirs(root: Path, proc_cgroup: Path) -> list[Path]:
    dirs = []
    try:
        for line in proc_cgroup.read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if controllers in ("", "cpu", "cpu,cpuacct", "cpuacct,cpu"):
                base = root if controllers == "" else root / controllers
                dirs.append(base / rel.lstrip("/"))
    except (OSError, ValueError):
        pass
    return dirs + [root, root / "cpu"]


def _read_quota(path: Path) -> float | None:
    try:
        fields = (path / "cpu.max").read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        pass
    try:
        quota = int((path / "cpu.cfs_quota_us").read_text())
        period = int((path / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def available_cpus(env: Mapping[str, str] = os.environ, quota: float | None = -1.0) -> int:
    """The threads the model should use: REST_THREADS if set (a whole number >= 1), else the
    cores of this process's affinity mask, capped by its cgroup quota (rounded up), at least 1.
    `quota` is for tests (-1: read it from the system)."""
    raw = env.get(THREADS_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise ValueError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads >= 1") from None
        if n < 1:
            raise ValueError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads >= 1")
        return n
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if quota == -1.0:
        quota = cgroup_quota()
    if quota is not None and quota > 0:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def background_env(base: Mapping[str, str] = os.environ, threads: int = 1) -> dict[str, str]:
    """The environment of a background build's process: each thread pool bounded to `threads`."""
    env = dict(base)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def lower_priority(nice: int = BUILD_NICE) -> None:
    """Lower the calling thread's priority by `nice` (Linux: each thread has its own nice value,
    and threads it starts later inherit it; a process's first thread stands for the process).
    Nothing where that cannot be done."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except (AttributeError, OSError):
        pass


def niced(cmd: list[str], nice: int = BUILD_NICE) -> list[str]:
    """`cmd` run at `nice` lower priority (through nice(1) where it exists; else unchanged)."""
    tool = shutil.which("nice")
    return [tool, "-n", str(nice), *cmd] if tool else list(cmd)
