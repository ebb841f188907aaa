"""Plans how much of each request's chain to draft in one step.

The lengths that make the next verify step yield the most tokens per millisecond, pushed off that
optimum now and then so that other step sizes get timed."""

from __future__ import annotations

from rest_core.budget.auto import EXPLORE_EVERY
from rest_core.budget.chain import BatchPlan, ChainDraft, batch_lengths
from rest_core.budget.cost_curve import ShapedCorrection


class BatchPlanner:
    """Plans each step's draft lengths over `cost`, the learned cost of a verify step."""

    def __init__(self, k: int, cost: ShapedCorrection) -> None:
        self.k, self.cost = k, cost
        self.idle = 0  # retrieving steps in a row that had candidates but drafted nothing
        self._since_explore = 0  # steps since the plan was last pushed off its optimum

    def at_least(self, retrieve: bool, at_least: int, drafting: int) -> int:
        """The drafted tokens this step must try at least: after EXPLORE_EVERY retrieving steps
        in a row that had candidates but drafted nothing, one per drafting row (as `AutoBudget`
        explores); steps that skipped retrieval are the retrieval policy's business."""
        if retrieve and self.idle >= EXPLORE_EVERY:
            return max(at_least, drafting)
        return at_least

    def plan(self, chains: list[ChainDraft], overhead_ms: float, at_least: int) -> tuple[BatchPlan, BatchPlan, bool]:
        """(the best plan, the plan to draft, whether it was halved to explore): each chain's
        length for the next step. Only sizes that are verified get timed, so the cost curve's
        slope is learned only if the batch's token count varies: the plan drafted is pushed off
        the best one, up to `at_least` tokens (when exploring) or, every EXPLORE_EVERY steps,
        down to half the best plan's drafts, so that a prior that overstates or understates how
        the cost grows is corrected either way. `overhead_ms`: what retrieving cost this step."""
        curve = self.cost.curve()
        probs = [c.p for c in chains]
        best = batch_lengths(probs, curve, overhead_ms=overhead_ms, limit=self.k)
        drafted = best.tokens - len(chains)
        plan, halved = best, False
        if at_least > drafted:
            self._since_explore = 0
            plan = batch_lengths(probs, curve, overhead_ms=overhead_ms, at_least=at_least, limit=self.k)
        else:
            self._since_explore += 1
            if drafted >= 2 and self._since_explore >= EXPLORE_EVERY:
                self._since_explore = 0
                plan = batch_lengths(probs, curve, overhead_ms=overhead_ms, at_most=drafted // 2, limit=self.k)
                halved = True
        # Retrieving steps that had candidates but drafted nothing count towards exploring.
        had = any(len(c) for c in chains)
        self.idle = self.idle + 1 if (had and plan.tokens == len(chains)) else 0
        return best, plan, halved

    def skipped(self) -> None:
        """A step that did not retrieve: counted as `plan` counts a step that drafted nothing."""
        self._since_explore += 1
