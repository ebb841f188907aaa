"""The draft budget "auto": per step, the number of draft nodes that maximises expected tokens
per second, from the trie's weights, a forward-cost curve and what earlier steps taught.

Pure numpy; the engine measures the curve (`rest_core.engine.measure_cost_curve`) and feeds
every step's outcome back through `AutoBudget.learn`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from rest_core.trie import Trie

if TYPE_CHECKING:
    from rest_core.draft import Draft

RANK_BUCKETS = 9  # calibration per node rank: 1, 2-3, 4-7, ..., 256+


@dataclass(frozen=True)
class CostCurve:
    """Median milliseconds of one forward over q tokens (with a few hundred cached tokens)."""

    sizes: tuple[int, ...]
    ms: tuple[float, ...]

    def __call__(self, q: np.ndarray | int) -> np.ndarray:
        """Interpolated cost; linear extrapolation past the largest measured size."""
        q = np.asarray(q, dtype=np.float64)
        s, m = np.asarray(self.sizes, np.float64), np.asarray(self.ms, np.float64)
        out = np.interp(q, s, m)
        if len(s) >= 2:
            slope = (m[-1] - m[-2]) / (s[-1] - s[-2])
            out = np.where(q > s[-1], m[-1] + slope * (q - s[-1]), out)
        return out


def rank_buckets(n: int) -> np.ndarray:
    """(n,) bucket of the ranks 1..n: floor(log2(rank)), capped."""
    return np.minimum(np.log2(np.arange(1, n + 1)).astype(np.int64), RANK_BUCKETS - 1)


def choose_budget(
    trie: Trie, c_max: int, curve: CostCurve, overhead_ms: float, calibration: float | np.ndarray
) -> tuple[int, float]:
    """The c in [0, c_max] maximising expected tokens per second, and its predicted accepted count.

    A node's share of the root's weight estimates the chance that the model's own path runs
    through it; summed over the top-c nodes it is the expected number of accepted drafts
    (the accepted path is a chain, so accepted = sum over nodes of [node accepted]).
    `calibration` (a number, or one per rank bucket, see `rank_buckets`) scales that estimate
    by what was actually accepted so far at that rank.
    """
    if len(trie) == 0 or c_max <= 0:
        return 0, 0.0
    root_weight = float(trie.weights[trie.depths == 1].sum())
    if root_weight <= 0:
        return 0, 0.0
    w = trie.weights
    if w.shape[0] > c_max:  # only the c_max heaviest matter (tries reach tens of thousands of nodes)
        w = np.partition(w, w.shape[0] - c_max)[w.shape[0] - c_max :]
    w = np.sort(w)[::-1]
    cal = np.asarray(calibration, dtype=np.float64)
    if cal.ndim:
        cal = cal[rank_buckets(w.shape[0])]
    gain = np.concatenate(([0.0], np.cumsum(cal * w / root_weight)))  # expected accepted, c = 0..
    cs = np.arange(gain.shape[0])
    rate = (1.0 + gain) / (overhead_ms + curve(cs + 1))
    best = int(np.argmax(rate))
    return best, float(gain[best])


class AutoBudget:
    """What the auto budget knows: the measured cost curve, and what steps taught since.

    Learns, per rank bucket, the drafts accepted vs those the trie weights predicted; the
    per-step time outside the forward; and the forward time actually seen per size q (the
    machine's load changes, and the one-off measurement may have been unlucky).
    """

    def __init__(self, curve: CostCurve | None = None) -> None:
        self.curve = curve  # set (measured) by the engine before the first choice
        # The prior (ratio 1) must not be pessimistic: a budget of 0 drafts nothing and learns nothing.
        self._accepted_sum = np.full(RANK_BUCKETS, 0.5)
        self._predicted_sum = np.full(RANK_BUCKETS, 0.5)
        self.overhead_ms = 1.0  # per-step time outside the forward, running mean
        self._observed: dict[int, tuple[int, float]] = {}  # q -> (count, mean forward ms)

    def calibration(self) -> np.ndarray:
        """(RANK_BUCKETS,) accepted / predicted so far, per rank bucket, kept in [0.05, 1.5]."""
        return np.clip(self._accepted_sum / self._predicted_sum, 0.05, 1.5)

    def corrected_curve(self) -> CostCurve:
        """The measured curve with sizes seen at least 3 times replaced by their observed cost,
        and the other sizes scaled by how far observation drifted from measurement overall."""
        if self.curve is None:
            raise ValueError("AutoBudget has no cost curve yet")
        curve = self.curve
        seen = {q: ms for q, (n, ms) in self._observed.items() if n >= 3}
        if not seen:
            return curve
        drift = float(np.median([ms / float(curve(q)) for q, ms in seen.items()]))
        points = {q: ms * drift for q, ms in zip(curve.sizes, curve.ms)}
        points.update(seen)
        sizes = sorted(points)
        return CostCurve(tuple(sizes), tuple(np.maximum.accumulate([points[q] for q in sizes]).tolist()))

    def choose(self, pool: Trie, c_max: int) -> int:
        """The budget for a step whose candidate nodes are `pool`."""
        c, _ = choose_budget(pool, c_max, self.corrected_curve(), self.overhead_ms, self.calibration())
        return c

    def learn(self, draft: "Draft", accepted: Sequence[int], *, overhead_ms: float, forward_ms: float) -> None:
        """One step's outcome: `accepted` (indices into draft.nodes) of the verified draft, the
        step's time outside the forward, and the forward's time over draft.q tokens."""
        if draft.trie is not None and draft.nodes is not None and len(draft.nodes):
            nodes = draft.nodes
            root_weight = float(draft.trie.weights[draft.trie.depths == 1].sum())
            order = np.lexsort((np.arange(len(nodes)), -nodes.weights))  # rank order, as selected
            buckets = rank_buckets(len(nodes))
            hit = np.zeros(len(nodes))
            hit[list(accepted)] = 1.0
            np.add.at(self._predicted_sum, buckets, nodes.weights[order] / root_weight)
            np.add.at(self._accepted_sum, buckets, hit[order])
        self.overhead_ms += 0.1 * (overhead_ms - self.overhead_ms)
        n, mean = self._observed.get(draft.q, (0, 0.0))
        self._observed[draft.q] = (n + 1, mean + (forward_ms - mean) / min(n + 1, 20))  # mean, then EMA
