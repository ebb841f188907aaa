"""The forward-cost curve: what a verify forward of q tokens costs on this device and model, and
its correction by the forward times actually observed.

Pure numpy. The decode layer measures it (`rest_core.decode.cost`); the auto budget
(`rest_core.budget.auto`) and the vLLM proposer (`rest_core.serve.proposer`, where q is the
tokens of a whole batch) plan with it and correct it: the auto budget through `ObservedCosts`,
the proposer through `ShapedCorrection` (a linear correction with the often-timed sizes' own
costs blended in).

A correction must not lock drafting out: a load spike can inflate the observed cost of every
size q > 1 (or the one-off measurement of the curve); if drafting then stops paying, no q > 1 is
observed again and the inflated costs would stay. So an observed size's cost fades back, with a
half-life of `HALF_LIFE` observations since it was last seen, towards the curve scaled by the
drift of the sizes observed lately (a plain step, q = 1, is observed whenever nothing is drafted,
so that drift stays fresh).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    # how it was measured, for saying what its figures are: the cached tokens the forwards ran
    # over and the runs per size it took the fastest of (0: not measured so, e.g. a preset)
    cache_len: int = 0
    reps: int = 0

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

    Each `observe` is one tick of the clock that ages every size's observations; an observation
    `half_life` ticks old is trusted half as much.
    """

    def __init__(self, half_life: float = HALF_LIFE) -> None:
        self.seen: dict[int, _Observed] = {}  # q -> the forward time seen for q tokens
        self.clock = 0  # observations so far, of any size
        self.half_life = float(half_life)

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
        least MIN_SEEN times, each weighted by how fresh it is), with those sizes' own observed
        cost blended in as far as it is fresh. The observed sizes bound the scaled curve between
        them (a bigger forward never costs less), so a curve whose shape was measured wrong gives
        way to what was seen. `curve` itself when nothing is trusted yet."""
        seen = {q: o for q, o in self.seen.items() if o.n >= MIN_SEEN}
        if not seen:
            return curve
        trust = {q: _fade(self.clock - o.step, self.half_life) for q, o in seen.items()}
        drift = _weighted_median([o.ms / float(curve(q)) for q, o in seen.items()], list(trust.values()))
        obs_q = np.array(sorted(seen))
        t = np.array([trust[q] for q in obs_q])
        obs_ms = t * np.array([seen[q].ms for q in obs_q]) + (1.0 - t) * curve(obs_q) * drift
        # Each measured size's scaled cost, between the largest observed below it and the
        # smallest observed above it.
        sizes, scaled = np.array(curve.sizes), np.array(curve.ms) * drift
        below = np.searchsorted(obs_q, sizes, side="left")  # observed sizes smaller than q
        above = np.searchsorted(obs_q, sizes, side="right")  # index of the first one larger
        floor = np.concatenate(([-np.inf], np.maximum.accumulate(obs_ms)))[below]
        ceiling = np.concatenate((np.minimum.accumulate(obs_ms[::-1])[::-1], [np.inf]))[above]
        points = dict(zip(sizes.tolist(), np.minimum(np.maximum(scaled, floor), ceiling).tolist()))
        points.update(zip(obs_q.tolist(), obs_ms.tolist()))
        q_all = sorted(points)
        return CostCurve(tuple(q_all), tuple(np.maximum.accumulate([points[q] for q in q_all]).tolist()))


class LinearCorrection:
    """A prior cost curve corrected online by a linear model of what steps were seen to cost:

        C(T) = b * prior(T) + a + g * T,   b >= 0, g >= 0

    fitted by least squares to every observed (T, ms), older observations fading with a
    half-life of `half_life` observations, and pulled towards the prior itself (b = 1, a = g = 0)
    as strongly as `strength` observations would. Three numbers cover what a prior measured
    elsewhere, or only guessed, gets wrong: a fixed cost per step it did not include (a: vLLM's
    speculative-decoding machinery, the scheduler), a uniformly slower or faster machine (b), and
    a cost per token that grows faster or slower than it says (g: a prior that calls the device
    flat when it is not). Unlike `ObservedCosts` (sizes seen a few times each, the shape of a
    measured curve kept), it uses every step's exact size, which a batched verify rarely repeats.
    """

    T_UNIT = 16.0  # T is fitted in units of 16 tokens and ms in units of the prior's one-token step

    def __init__(self, prior: CostCurve, *, half_life: float = 256.0, strength: float = 1.0) -> None:
        self.prior = prior
        self.unit = max(float(prior(1)), 1e-6)
        self.decay = 0.5 ** (1.0 / float(half_life))
        self.strength = float(strength)
        self.theta0 = np.array([1.0, 0.0, 0.0])
        self._xx = np.zeros((3, 3))
        self._xy = np.zeros(3)
        self.observations = 0
        self.largest = int(prior.sizes[-1])  # the largest T seen or measured
        self._theta: np.ndarray | None = self.theta0.copy()
        self._curve: CostCurve | None = prior

    def _x(self, t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, np.float64)
        return np.stack([self.prior(t) / self.unit, np.ones_like(t), t / self.T_UNIT], axis=-1)

    def observe(self, tokens: int, ms: float) -> None:
        """One step over `tokens` tokens took `ms` milliseconds."""
        x, y = self._x(float(tokens)), ms / self.unit
        self._xx = self.decay * self._xx + np.outer(x, x)
        self._xy = self.decay * self._xy + x * y
        self.observations += 1
        self.largest = max(self.largest, int(tokens))
        self._theta = self._curve = None

    @property
    def params(self) -> tuple[float, float, float]:
        """(b, a in ms, g in ms per token)."""
        b, a, g = self._solve()
        return float(b), float(a * self.unit), float(g * self.unit / self.T_UNIT)

    def _solve(self) -> np.ndarray:
        if self._theta is None:
            ridge = self.strength * np.eye(3)
            theta = np.linalg.solve(self._xx + ridge, self._xy + ridge @ self.theta0)
            if theta[0] < 0 or theta[2] < 0:  # keep C non-decreasing: refit with the offending slope at 0
                keep = [i for i in range(3) if not (i in (0, 2) and theta[i] < 0)]
                sub = np.linalg.solve((self._xx + ridge)[np.ix_(keep, keep)], (self._xy + ridge @ self.theta0)[keep])
                theta = np.zeros(3)
                theta[keep] = np.maximum(sub, [0.0 if i != 1 else -np.inf for i in keep])
            self._theta = theta
        return self._theta

    def __call__(self, tokens: np.ndarray | int) -> np.ndarray:
        """The corrected cost of a step over `tokens` tokens (ms), at least a tenth of the
        prior's one-token step."""
        return self._linear(tokens)

    def line(self, tokens: np.ndarray | int) -> np.ndarray:
        """The linear correction alone (what `__call__` is here; a subclass may refine it)."""
        return self._linear(tokens)

    def _linear(self, tokens: np.ndarray | int) -> np.ndarray:
        t = np.asarray(tokens, np.float64)
        return np.maximum((self._x(t) @ self._solve()) * self.unit, 0.1 * self.unit)

    def curve(self) -> CostCurve:
        """The corrected cost as a curve, on the prior's sizes and powers of two up to the largest
        T seen (cached until the next observation)."""
        if self._curve is None:
            top = max(self.largest, 1)
            sizes = np.union1d(np.array(self.prior.sizes), 2 ** np.arange(0, int(np.ceil(np.log2(top))) + 1))
            ms = np.maximum.accumulate(self._linear(sizes))
            self._curve = CostCurve(tuple(int(x) for x in sizes), tuple(float(x) for x in ms))
        return self._curve


class ShapedCorrection(LinearCorrection):
    """`LinearCorrection` with the cost of each step size seen often enough blended in
    (`ObservedCosts`): the linear model carries a prior's shape and drift to sizes never timed,
    and the observed sizes put back the shape it cannot follow. vLLM's CPU step, for one request,
    costs about the same for 1 to 4 tokens and then grows by steps (seen: 59, 61, 61, 61, 63, 65,
    70 ms for 1 to 7 tokens); a straight line through it charges the first drafted tokens more
    than they cost, so too few are drafted where drafting is nearly free."""

    SIZE_HALF_LIFE = 128  # observations: a size not timed again for this long is trusted half as much

    def __init__(self, prior: CostCurve, *, half_life: float = 256.0, strength: float = 1.0) -> None:
        super().__init__(prior, half_life=half_life, strength=strength)
        # Slower to fade than the native engine's (`HALF_LIFE`): one request's steps spread over
        # a dozen sizes or more, each timed every dozen steps or so; a load that inflates them
        # moves the line (and its drift) within a few steps anyway.
        self.seen = ObservedCosts(half_life=self.SIZE_HALF_LIFE)
        self._shaped: CostCurve | None = prior

    def observe(self, tokens: int, ms: float) -> None:
        super().observe(tokens, ms)
        self.seen.observe(int(tokens), ms)
        self._shaped = None

    def curve(self) -> CostCurve:
        """The linear correction's curve with the observed sizes' own costs blended in (as far as
        they are fresh; a bigger step never costs less). Cached until the next observation."""
        if self._shaped is None:
            self._shaped = self.seen.corrected(super().curve())
        return self._shaped

    def __call__(self, tokens: np.ndarray | int) -> np.ndarray:
        return np.maximum(self.curve()(tokens), 0.1 * self.unit)
