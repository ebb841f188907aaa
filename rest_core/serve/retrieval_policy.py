"""Decides whether a step looks for drafts at all, and when to check again after it did not.

A step that retrieves must yield more tokens per millisecond than one that does not even look;
rechecked now and then, ever more rarely while rechecks keep finding that drafting does not pay."""

from __future__ import annotations

import numpy as np

from rest_core.budget.auto import EXPLORE_EVERY
from rest_core.budget.chain import BatchPlan
from rest_core.budget.cost_curve import ShapedCorrection

MAX_CHECK_EVERY = 256  # skipped steps: the longest wait before retrieving is tried again
CHECKS_BEFORE_BACKOFF = 4  # tries that did not pay before the wait between them doubles


class RetrievalPolicy:
    """Retrieval and scoring cost time per row (`full_ms`, against `bare_ms` for a step that only
    keeps the contexts up to date); `cost` is what a verify step costs (learned elsewhere)."""

    def __init__(self, k: int, cost: ShapedCorrection) -> None:
        self.k, self.cost = k, cost
        self.full_ms = 0.5  # running mean of propose()'s time per row when it retrieves
        self.bare_ms = 0.05  # ... and when it only keeps the contexts up to date
        self._verdicts: dict[int, float] = {}  # batch size class -> retrieving's rate over skipping's
        self._since_check = 0  # skipped steps since retrieving was last tried
        self._failed_checks: dict[int, int] = {}  # batch size class -> tries in a row that did not pay

    def decide(self, b: int, rows: int) -> tuple[bool, int]:
        """(whether this step of `b` drafting rows looks for drafts at all, how many drafted
        tokens it must try at least: > 0 on a recheck). The choice is the plan's own rate, one
        level up. No when even certain drafts could not pay for their verify, or when recent
        steps of a batch this size drafted less than their retrieval cost (`judge`); either is
        rechecked after EXPLORE_EVERY skipped steps, an interval that doubles (up to
        MAX_CHECK_EVERY) once CHECKS_BEFORE_BACKOFF rechecks in a row found that drafting does
        not pay (at a full batch on a CPU a verify step with a few drafts cost 2.6x a plain one,
        so rechecking every 16 steps cost about 10%), drafting a quarter as many tokens as there
        are rows at least, so that a bigger step is timed and a cost curve that says "never" can
        be proved wrong."""
        if b == 0:
            return False, 0
        key = _size_class(b)
        verdict = self._verdicts.get(key)
        if (verdict is None or verdict >= 1.0) and self._could_pay(b, rows):
            self._failed_checks.pop(key, None)
            return True, 0
        self._since_check += 1
        failed = self._failed_checks.get(key, 0)
        if self._since_check >= min(EXPLORE_EVERY << max(0, failed - CHECKS_BEFORE_BACKOFF), MAX_CHECK_EVERY):
            self._since_check = 0
            self._failed_checks[key] = failed + 1
            return True, -(-b // 4)
        return False, 0

    def _could_pay(self, b: int, rows: int) -> bool:
        """Whether any number of drafted tokens, all accepted, would yield more tokens per
        millisecond than a step that does not look for drafts."""
        curve = self.cost.curve()
        bare = b / (self.bare_ms * rows + float(curve(b)))
        n = np.arange(1, b * self.k + 1)
        return bool(np.any((b + n) / (self.full_ms * rows + curve(b + n)) > bare))

    def judge(self, plan: BatchPlan, b: int, rows: int) -> None:
        """A retrieving step's expected rate against a step that skips retrieval, as a running
        mean per batch size class (>= 1: retrieving pays)."""
        bare = b / (self.bare_ms * rows + float(self.cost(b)))
        ratio = plan.rate / bare if bare > 0 else 1.0
        key = _size_class(b)
        old = self._verdicts.get(key)
        self._verdicts[key] = ratio if old is None else old + 0.2 * (ratio - old)

    def timed(self, retrieved: bool, ms: float, rows: int) -> None:
        """What one propose() call cost, per row."""
        per_row = ms / max(rows, 1)
        if retrieved:
            self.full_ms += 0.1 * (per_row - self.full_ms)
        else:
            self.bare_ms += 0.1 * (per_row - self.bare_ms)

    def cost_overstated(self) -> None:
        """A recheck's step came in cheaper than predicted: try again at the usual pace."""
        self._failed_checks.clear()


def _size_class(b: int) -> int:
    """Batch sizes judged together: 1, 2, 3-4, 5-8, 9-16, ..."""
    return int(np.ceil(np.log2(max(b, 1))))
