"""The draft budget "auto": per step, the draft subtree that maximises expected tokens per
millisecond, from each node's predicted acceptance (`rest_core.budget.acceptance`), a forward-cost
curve and what earlier steps taught (`rest_core.budget.selection` finds the subtree).

Pure numpy; the engine measures the curve (`rest_core.decode.cost.measure_cost_curve`) and feeds
every step's outcome back through `AutoBudget.learn`.

What it learns must not lock it out of drafting. A load spike can inflate the observed cost of
every draft size q > 1 (or the one-off measurement of the curve); if drafting then stops paying,
no q > 1 is observed again, the inflated costs would stay, and so would an acceptance model
that once learned pessimism (it learns from drafted nodes only). Two things undo that, both
deterministic (they change only what is drafted, never what is emitted):
- an observed size's cost fades back, with a half-life of `HALF_LIFE` steps since it was last
  observed, towards the curve scaled by the drift of the sizes observed lately (a plain step,
  q = 1, is observed whenever nothing is drafted, so that drift stays fresh);
- after `EXPLORE_EVERY` steps in a row that had candidates but drafted none, the next step
  drafts the best draft of at least one node anyway, so costs and acceptance are seen again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel, SourceMatch, node_features, observable
from rest_core.budget.cost_curve import CostCurve
from rest_core.budget.selection import choose_draft
from rest_core.drafting.trie import Trie

if TYPE_CHECKING:
    from rest_core.drafting.draft import Draft
    from rest_core.drafting.source import Retrieved


HALF_LIFE = 16  # steps: an observed cost not seen again for this long is trusted half as much
EXPLORE_EVERY = 16  # steps in a row with candidates but no draft, before one drafts anyway
_MAX_WEIGHT = 20.0  # an observed cost is a running mean of at most about this many steps


@dataclass
class _Observed:
    """The forward time seen for one size q."""

    n: int  # observations
    weight: float  # the running mean's weight: observations, faded by age, at most _MAX_WEIGHT
    ms: float  # running mean of the forward's milliseconds
    step: int  # the step of the latest observation


def _fade(age: int) -> float:
    """How much an observation `age` steps old is trusted (1 when fresh)."""
    return 0.5 ** (age / HALF_LIFE)


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The median of `values` each counted `weights` times (equal weights: the plain median)."""
    order = np.argsort(values)
    v, w = np.asarray(values, np.float64)[order], np.asarray(weights, np.float64)[order]
    mid = np.cumsum(w) - w / 2  # each value's middle on the cumulative weight axis
    return float(np.interp(w.sum() / 2, mid, v))


class AutoBudget:
    """What the auto budget knows: the measured cost curve, the acceptance model, and what
    steps taught since.

    Learns each step's outcome into the acceptance model (which drafted nodes the model's own
    path ran through); the per-step time outside the forward; and the forward time actually
    seen per size q (the machine's load changes, and the one-off measurement may have been
    unlucky), trusted less the longer ago it was seen (see the module docstring). `acceptance`
    defaults to the shipped prior (`acceptance_prior.json`); each set of enabled sources
    (datastore alone, context alone, both) recalibrates its own copy of it, since a datastore
    node means more when the context has no say.
    """

    def __init__(self, curve: CostCurve | None = None, acceptance: AcceptanceModel | None = None) -> None:
        self.curve = curve  # set (measured) by the engine before the first choice
        self.acceptance = acceptance or AcceptanceModel.load()
        self._by_sources: dict[tuple[int, ...], AcceptanceModel] = {}
        self.overhead_ms = 1.0  # per-step time outside the forward, running mean
        self._observed: dict[int, _Observed] = {}  # q -> the forward time seen for q tokens
        self._steps = 0  # steps learned
        self._idle = 0  # plans in a row that had candidates but drafted nothing

    def corrected_curve(self) -> CostCurve:
        """The measured curve scaled by how far observation drifted from measurement (the
        median over sizes seen at least 3 times, each weighted by how fresh it is), with those
        sizes' own observed cost blended in as far as it is fresh. The observed sizes bound the
        scaled curve between them (a bigger forward never costs less), so a curve whose shape
        was measured wrong gives way to what was seen."""
        if self.curve is None:
            raise ValueError("AutoBudget has no cost curve yet")
        curve = self.curve
        seen = {q: o for q, o in self._observed.items() if o.n >= 3}
        if not seen:
            return curve
        trust = {q: _fade(self._steps - o.step) for q, o in seen.items()}
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

    def model_for(self, retrieved: Sequence[Retrieved]) -> AcceptanceModel:
        """The acceptance model recalibrated for this set of sources (a fresh copy of the prior
        the first time)."""
        key = tuple(sorted(int(r.source_bit) for r in retrieved))
        if key not in self._by_sources:
            a = self.acceptance
            self._by_sources[key] = AcceptanceModel(a.weights, prior_strength=a.prior_strength, forget=a.forget)
        return self._by_sources[key]

    def plan(self, pool: Trie, retrieved: Sequence[Retrieved], c_max: int) -> tuple[np.ndarray, np.ndarray]:
        """The step's draft among the candidate nodes `pool`: (sorted indices into it, each
        one's predicted path probability), at most c_max nodes, possibly none (but not for
        more than EXPLORE_EVERY steps in a row)."""
        matches = [SourceMatch.of(r) for r in retrieved]
        model = self.model_for(retrieved)
        explore = int(self._idle >= EXPLORE_EVERY)
        chosen, p = choose_draft(pool, matches, model, c_max, self.corrected_curve(), self.overhead_ms, explore)
        self._idle = 0 if chosen.idx.size else self._idle + 1
        return chosen.idx, p

    def learn(
        self,
        draft: Draft,
        accepted: Sequence[int],
        *,
        overhead_ms: float,
        forward_ms: float,
        retrieved: Sequence[Retrieved] = (),
    ) -> None:
        """One step's outcome: `accepted` (indices into draft.nodes) of the verified draft, what
        the sources retrieved for it, the step's time outside the forward, and the forward's
        time over draft.q tokens."""
        if draft.trie is not None and draft.nodes is not None and len(draft.nodes) and retrieved:
            rows, outcome = observable(draft.nodes.parents, accepted)
            feats = node_features(draft.trie, [SourceMatch.of(r) for r in retrieved], draft.idx[rows])
            self.model_for(retrieved).learn(feats, outcome)
        self.overhead_ms += 0.1 * (overhead_ms - self.overhead_ms)
        self._steps += 1
        seen = self._observed.get(draft.q)
        if seen is None:
            self._observed[draft.q] = _Observed(1, 1.0, forward_ms, self._steps)
            return
        # A mean, then a moving average; what was seen long ago (another load) weighs less
        # against this observation.
        seen.weight = min(seen.weight * _fade(self._steps - seen.step) + 1.0, _MAX_WEIGHT)
        seen.ms += (forward_ms - seen.ms) / seen.weight
        seen.n += 1
        seen.step = self._steps
