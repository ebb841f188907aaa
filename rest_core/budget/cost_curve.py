"""The forward-cost curve: what a verify forward of q tokens costs on this device and model, and
its correction by the forward times actually observed.

Pure numpy. The decode layer measures it (`rest_core.decode.cost`); the auto budget
(`rest_core.budget.auto`) and the vLLM proposer (`rest_core.serve.proposer`, where q is the
tokens of a whole batch) plan with it and correct it through `ObservedCosts`.

A correction must not lock drafting out: a load spike can inflate the observed cost of every
size q > 1 (or the one-off measurement of the curve); if drafting then stops paying, no q > 1 is
observed again and the inflated costs would stay. So an observed size's cost fades back, with a
half-life of `HALF_LIFE` observations since it was last seen, towards the curve scaled by the
drift of the sizes observed lately (a plain step, q = 1, is observed whenever nothing is drafted,
so that drift stays fresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

HALF_LIFE = 16  # observations: a size's cost not seen again for this long is trusted half as much
MIN_SEEN = 3  # observations of a size before its cost is trusted at all
_MAX_WEIGHT = 20.0  # an observed cost is a running mean of at most about this many observations


@dataclass(frozen=True)
class CostCurve:
    """Milliseconds of one verify forward over q tokens, at measured sizes q (each the fastest of a
    few repeats, with a few hundred cached tokens: `rest_core.decode.cost.measure_cost_curve`)."""

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


@dataclass
class _Observed:
    """The forward time seen for one size q."""

    n: int  # observations
    weight: float  # the running mean's weight: observations, faded by age, at most _MAX_WEIGHT
    ms: float  # running mean of the forward's milliseconds
    step: int  # the clock (observations of any size) at the latest observation


def _fade(age: int, half_life: float = HALF_LIFE) -> float:
    """How much an observation `age` observations old is trusted (1 when fresh)."""
    return 0.5 ** (age / half_life)


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The median of `values` each counted `weights` times (equal weights: the plain median)."""
    order = np.argsort(values)
    v, w = np.asarray(values, np.float64)[order], np.asarray(weights, np.float64)[order]
    mid = np.cumsum(w) - w / 2  # each value's middle on the cumulative weight axis
    return float(np.interp(w.sum() / 2, mid, v))


class ObservedCosts:
    """The forward times seen per size q, and the curve they correct (`corrected`).

    Each `observe` is one tick of the clock that ages every size's observations.
    """

    def __init__(self, half_life: float = HALF_LIFE, *, fit_shape: bool = False) -> None:
        self.seen: dict[int, _Observed] = {}  # q -> the forward time seen for q tokens
        self.clock = 0  # observations so far, of any size
        self.half_life = float(half_life)  # in observations (a server steps far more often than a chat)
        # Whether the drift may grow or shrink with q (a power of q fitted to the observed
        # sizes' drifts) instead of being one factor: for a curve that is only a prior guess
        # of the shape (a batched verify on an unmeasured device), not a measurement of it.
        self.fit_shape = fit_shape

    def observe(self, q: int, ms: float) -> None:
        """One forward of q tokens took `ms` milliseconds."""
        self.clock += 1
        seen = self.seen.get(q)
        if seen is None:
            self.seen[q] = _Observed(1, 1.0, ms, self.clock)
            return
        # A mean, then a moving average; what was seen long ago (another load) weighs less
        # against this observation.
        seen.weight = min(seen.weight * _fade(self.clock - seen.step, self.half_life) + 1.0, _MAX_WEIGHT)
        seen.ms += (ms - seen.ms) / seen.weight
        seen.n += 1
        seen.step = self.clock

    def corrected(self, curve: CostCurve) -> CostCurve:
        """`curve` scaled by how far observation drifted from it (the median over sizes seen at
        least MIN_SEEN times, each weighted by how fresh it is; with `fit_shape`, a power of q
        fitted to those drifts), with those sizes' own observed cost blended in as far as it is
        fresh. The observed sizes bound the scaled curve between them (a bigger forward never
        costs less), so a curve whose shape was measured wrong gives way to what was seen.
        `curve` itself when nothing is trusted yet."""
        seen = {q: o for q, o in self.seen.items() if o.n >= MIN_SEEN}
        if not seen:
            return curve
        obs_q = np.array(sorted(seen))
        t = np.array([_fade(self.clock - seen[q].step, self.half_life) for q in obs_q])
        ratios = np.array([seen[q].ms for q in obs_q]) / curve(obs_q)
        drift = self._drift(obs_q, ratios, t)
        obs_ms = t * np.array([seen[q].ms for q in obs_q]) + (1.0 - t) * curve(obs_q) * drift(obs_q)
        # Each size's scaled cost, between the largest observed below it and the smallest
        # observed above it.
        sizes = np.array(curve.sizes)
        if self.fit_shape:  # a shaped drift bends the curve between the prior's sizes too
            top = max(int(sizes[-1]), int(obs_q[-1]))
            grid = np.unique(np.round(2.0 ** (np.arange(0, 2 * np.log2(top) + 1) / 2)).astype(np.int64))
            sizes = np.union1d(sizes, grid[grid <= top])
        scaled = curve(sizes) * drift(sizes)
        below = np.searchsorted(obs_q, sizes, side="left")  # observed sizes smaller than q
        above = np.searchsorted(obs_q, sizes, side="right")  # index of the first one larger
        floor = np.concatenate(([-np.inf], np.maximum.accumulate(obs_ms)))[below]
        ceiling = np.concatenate((np.minimum.accumulate(obs_ms[::-1])[::-1], [np.inf]))[above]
        points = dict(zip(sizes.tolist(), np.minimum(np.maximum(scaled, floor), ceiling).tolist()))
        points.update(zip(obs_q.tolist(), obs_ms.tolist()))
        q_all = sorted(points)
        return CostCurve(tuple(q_all), tuple(np.maximum.accumulate([points[q] for q in q_all]).tolist()))

    def _drift(self, q: np.ndarray, ratios: np.ndarray, trust: np.ndarray):
        """observed / curve as a function of q: the trust-weighted median ratio, or (fit_shape,
        two sizes or more) ratio = a * q**b by weighted least squares in logs, b in [-1, 1.5]."""
        if not self.fit_shape or q.shape[0] < 2:
            level = _weighted_median(ratios.tolist(), trust.tolist())
            return lambda x: np.full(np.shape(x), level)
        x, y, w = np.log(q), np.log(ratios), trust + 1e-9
        xm, ym = np.average(x, weights=w), np.average(y, weights=w)
        var = np.average((x - xm) ** 2, weights=w)
        b = float(np.clip(np.average((x - xm) * (y - ym), weights=w) / var, -1.0, 1.5)) if var > 0 else 0.0
        a = ym - b * xm
        return lambda size: np.exp(a + b * np.log(np.asarray(size, np.float64)))
