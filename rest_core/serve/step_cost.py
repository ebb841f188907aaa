"""Learns what one engine step costs, from the time between two propose() calls.

That time is one verify step over the tokens the proposer asked it to verify (each row's last
token and its drafts); it corrects a prior cost curve."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rest_core.budget.cost_curve import CostCurve, ShapedCorrection

COST_HALF_LIFE = 256  # steps: how fast what a step costs is relearned (a load change, a new batch size)
_OUTLIER = 20.0  # a step this many times slower than predicted is not learned (the process was paused)


@dataclass
class ProposeCall:
    """One propose() call: when it ended and how many tokens each row's request verifies next."""

    end: float
    drafted: dict[Any, int] = field(default_factory=dict)  # request key -> draft length
    clean: bool = True  # only decoding rows, every one known before (no prefill in the batch)
    explored: bool = False  # drafted because retrieving was tried again (`RetrievalPolicy.decide`)


class StepCost:
    """The prior curve corrected by every step timed (`ShapedCorrection`: a fitted line, with the
    own cost of each size timed often enough blended in)."""

    def __init__(self, prior: CostCurve) -> None:
        self.cost = ShapedCorrection(prior, half_life=COST_HALF_LIFE)

    def learn(self, previous: ProposeCall, start: float, keys: list[Any]) -> tuple[bool, bool]:
        """The time from `previous`'s end to `start` was one engine step verifying each of these
        requests' last token and drafts. Returns (whether it was learned, whether it was a
        recheck's step that cost well under the prediction)."""
        cost = self.cost
        tokens = sum(1 + previous.drafted[k] for k in keys)
        ms = 1000.0 * (start - previous.end)
        if tokens == 0 or ms <= 0.0:
            return False, False  # nothing verified
        # The fitted line is enough to tell a pause from a step, and costs no rebuild of the curve.
        if cost.observations > 16 and ms > _OUTLIER * float(cost.line(tokens)):
            return False, False  # a hiccup (a pause of the whole process), not what such a step costs
        overstated = previous.explored and ms < 0.8 * float(cost(tokens))
        cost.observe(tokens, ms)
        return True, overstated
