"""A server's whole process group: who is in it, ending all of it, and knowing it again after the
process that started it was killed. Linux /proc only; standard library only.

A vLLM server is more than one process: the API server this app starts (in a session and process
group of its own, whose id is its pid) forks the engine core, which forks its workers. When the
API server dies (SIGKILL, the out-of-memory killer) its children live on as orphans, holding
gigabytes, unless someone ends the group. So the group is ended, not the process.

Which processes are ours: those whose process group and session are the leader's pid. The kernel
does not hand out a pid again while a process group or session still carries it, so while any of
them lives, that id names our group; a leader pid that runs again with another start time is a
reused pid, and then nothing is ours. (The engine core renames itself, so its command line, and
its environment, which the renaming overwrites, cannot tell.)
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    """A running process as /proc/<pid>/stat tells it; `start` is in clock ticks after boot."""

    pid: int
    pgid: int
    sid: int
    start: int


@dataclass(frozen=True)
class Leader:
    """A group's leader as recorded when it started: its pid (the group's and session's id),
    its start time, and the boot it started in (a pid of an earlier boot means nothing)."""

    pid: int
    start: int | None = None
    boot: str = ""

    def text(self) -> str:
        return f"{self.pid} {self.start} {self.boot}"

    @classmethod
    def parse(cls, text: str) -> Leader:
        """From `text()`, or from a bare pid (an older record: start and boot unknown)."""
        parts = text.split()
        start = int(parts[1]) if len(parts) > 1 and parts[1] != "None" else None
        return cls(int(parts[0]), start, parts[2] if len(parts) > 2 else "")


def boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def proc_info(pid: int) -> Proc | None:
    """The process `pid`, or None if it is gone or a zombie (ended, waiting for its parent)."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command's name: state ppid pgrp session ... starttime (the 22nd field, 20th here)
    if fields[0] in ("Z", "X"):
        return None
    return Proc(pid, int(fields[2]), int(fields[3]), int(fields[19]))


def leader_of(pid: int) -> Leader:
    """The record of a process this one just started."""
    info = proc_info(pid)
    return Leader(pid, info.start if info is not None else None, boot_id())


def members(leader: Leader) -> list[Proc]:
    """The running processes of `leader`'s group (the leader too, if it runs); none if its pid
    now runs a process started at another time (a reused pid) or it is of another boot."""
    if leader.pid <= 1 or (leader.boot and leader.boot != boot_id()):
        return []
    head = proc_info(leader.pid)
    if head is not None and leader.start is not None and head.start != leader.start:
        return []
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        info = proc_info(int(entry.name))
        if info is None or info.pgid != leader.pid or info.sid != leader.pid:
            continue
        if leader.start is None or info.start >= leader.start:
            found.append(info)
    return found


def end_group(leader: Leader, wait_s: float = 20.0, kill_wait_s: float = 5.0) -> list[Proc]:
    """End every process of `leader`'s group: SIGTERM (vLLM shuts its engine down), then SIGKILL
    for whatever still runs after `wait_s`. What is still running after that (nothing, unless
    this user may not signal it)."""
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, kill_wait_s)):
        if not members(leader):
            return []
        try:
            os.killpg(leader.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(leader.pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and members(leader):
            time.sleep(0.1)  # each look reads every process's stat: not much more often
    return members(leader)
