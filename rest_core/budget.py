"""The draft budget "auto": per step, the draft subtree that maximises expected tokens per
millisecond, from each node's predicted acceptance (`rest_core.acceptance`), a forward-cost
curve and what earlier steps taught (`rest_core.selection` finds the subtree).

Pure numpy; the engine measures the curve (`rest_core.engine.measure_cost_curve`) and feeds
every step's outcome back through `AutoBudget.learn`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from rest_core.acceptance import AcceptanceModel, SourceMatch, node_features, observable
from rest_core.selection import choose_draft
from rest_core.trie import Trie

if TYPE_CHECKING:
    from rest_core.draft import Draft
    from rest_core.retrieval import Retrieved


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


class AutoBudget:
    """What the auto budget knows: the measured cost curve, the acceptance model, and what
    steps taught since.

    Learns each step's outcome into the acceptance model (which drafted nodes the model's own
    path ran through); the per-step time outside the forward; and the forward time actually
    seen per size q (the machine's load changes, and the one-off measurement may have been
    unlucky). `acceptance` defaults to the shipped prior (`acceptance_prior.json`); each set of
    enabled sources (datastore alone, context alone, both) recalibrates its own copy of it,
    since a datastore node means more when the context has no say.
    """

    def __init__(self, curve: CostCurve | None = None, acceptance: AcceptanceModel | None = None) -> None:
        self.curve = curve  # set (measured) by the engine before the first choice
        self.acceptance = acceptance or AcceptanceModel.load()
        self._by_sources: dict[tuple[int, ...], AcceptanceModel] = {}
        self.overhead_ms = 1.0  # per-step time outside the forward, running mean
        self._observed: dict[int, tuple[int, float]] = {}  # q -> (count, mean forward ms)

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

    def model_for(self, retrieved: Sequence["Retrieved"]) -> AcceptanceModel:
        """The acceptance model recalibrated for this set of sources (a fresh copy of the prior
        the first time)."""
        key = tuple(sorted(int(r.source_bit) for r in retrieved))
        if key not in self._by_sources:
            a = self.acceptance
            self._by_sources[key] = AcceptanceModel(a.weights, prior_strength=a.prior_strength, forget=a.forget)
        return self._by_sources[key]

    def plan(self, pool: Trie, retrieved: Sequence["Retrieved"], c_max: int) -> tuple[np.ndarray, np.ndarray]:
        """The step's draft among the candidate nodes `pool`: (sorted indices into it, each
        one's predicted path probability), at most c_max nodes, possibly none."""
        matches = [SourceMatch.of(r) for r in retrieved]
        model = self.model_for(retrieved)
        chosen, p = choose_draft(pool, matches, model, c_max, self.corrected_curve(), self.overhead_ms)
        return chosen.idx, p

    def learn(
        self,
        draft: "Draft",
        accepted: Sequence[int],
        *,
        overhead_ms: float,
        forward_ms: float,
        retrieved: Sequence["Retrieved"] = (),
    ) -> None:
        """One step's outcome: `accepted` (indices into draft.nodes) of the verified draft, what
        the sources retrieved for it, the step's time outside the forward, and the forward's
        time over draft.q tokens."""
        if draft.trie is not None and draft.nodes is not None and len(draft.nodes) and retrieved:
            rows, outcome = observable(draft.nodes.parents, accepted)
            feats = node_features(draft.trie, [SourceMatch.of(r) for r in retrieved], draft.idx[rows])
            self.model_for(retrieved).learn(feats, outcome)
        self.overhead_ms += 0.1 * (overhead_ms - self.overhead_ms)
        n, mean = self._observed.get(draft.q, (0, 0.0))
        self._observed[draft.q] = (n + 1, mean + (forward_ms - mean) / min(n + 1, 20))  # mean, then EMA
