"""Why an answer stopped at the server's time limit: how much it made in its model time, and
whether the machine was busy (its steps much slower than this server's fastest at the same
size), so a visitor knows whether the limit or the load cut the answer short."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Sequence

from rest_core.decode.events import StepEvent

BUSY_FACTOR = 2.0  # steps this many times slower than the fastest seen at their size: busy


def _q(event: StepEvent) -> int:
    """The step's forward size: its verified draft nodes plus the root."""
    return 1 + (len(event.draft) if event.draft is not None else 0)


class FastestSteps:
    """The fastest forward this server has seen per forward size (milliseconds), from every
    answer's steps: the yardstick an answer's own steps are held against. Thread-safe."""

    def __init__(self) -> None:
        self._best: dict[int, float] = {}
        self._lock = threading.Lock()

    def observe(self, events: Sequence[StepEvent]) -> None:
        with self._lock:
            for ev in events:
                ms = ev.timings.forward_ms
                if ms > 0 and ms < self._best.get(_q(ev), float("inf")):
                    self._best[_q(ev)] = ms

    def slowdown(self, events: Sequence[StepEvent]) -> tuple[float, float, float] | None:
        """(median slowdown, the answer's median step ms, the fastest's median ms) over the
        steps whose size was seen before; None when none was."""
        with self._lock:
            pairs = [(ev.timings.forward_ms, self._best[_q(ev)]) for ev in events if _q(ev) in self._best]
        if not pairs:
            return None
        return (
            statistics.median(ms / best for ms, best in pairs),
            statistics.median(ms for ms, _ in pairs),
            statistics.median(best for _, best in pairs),
        )


def time_limit_message(max_seconds: float, events: Sequence[StepEvent], clock: FastestSteps | None) -> str:
    """The status line of an answer cut by the time limit (plain text)."""
    tokens = events[-1].totals.new_tokens if events else 0
    said = (
        f"The answer stopped after {max_seconds:g} s (server limit) with {tokens} new token"
        f"{'' if tokens == 1 else 's'}: the model is shared, so one request may use it for {max_seconds:g} s at most."
    )
    slow = clock.slowdown(events) if clock is not None and events else None
    if slow is not None and slow[0] >= BUSY_FACTOR:
        said += (
            f" The machine is busy: its steps took {slow[1]:,.0f} ms, {slow[0]:.1f}x this server's fastest "
            f"({slow[2]:,.0f} ms), because other work shares the cores. Send again later for a longer answer."
        )
    return said
