"""The draft budget "auto": per step, the draft subtree that maximises expected tokens per
millisecond, from each node's predicted acceptance (`rest_core.budget.acceptance`), a forward-cost
curve and what earlier steps taught (`rest_core.budget.selection` finds the subtree).

Pure numpy; the engine measures the curve (`rest_core.decode.cost.measure_cost_curve`) and feeds
every step's outcome back through `AutoBudget.learn`.

What it learns must not lock it out of drafting. A load spike can inflate the observed cost of
every draft size q > 1 (or the one-off measurement of the curve), and an acceptance model that
once learned pessimism learns from drafted nodes only. Two things undo that, both deterministic
(they change only what is drafted, never what is emitted):
- an observed size's cost fades back towards the scaled curve (`rest_core.budget.cost_curve.ObservedCosts`,
  half-life `HALF_LIFE` steps learned);
- after `EXPLORE_EVERY` steps in a row that had candidates but drafted none, the next step
  drafts the best draft of at least one node anyway, so costs and acceptance are seen again.

What it weighs a draft against must be seen too: the cost of a step without drafts (q = 1). A
budget that drafts every step never times one, and the drift it sees in drafted steps (the
output head scoring a chain or two, and the mean of a busy machine against the curve's fastest
run) would then scale the plain step's cost up with them: it believed a plain step cost 48 ms
where one cost 38.5, and drafted 15 a step where drafting lost (seen on the app's default code
prompt). So a step whose best draft is marginal (fewer than `PROBE_BELOW` tokens expected
accepted) drafts nothing when the plain step's cost is not trusted and fresh, at most once in
`PROBE_GAP` steps: a probe. Plain decoding on the same engine times it too (`step_done`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel, SourceMatch, node_features, observable
from rest_core.budget.cost_curve import MIN_SEEN, CostCurve, ObservedCosts
from rest_core.budget.selection import choose_draft
from rest_core.drafting.trie import Trie

if TYPE_CHECKING:
    from rest_core.drafting.draft import Draft
    from rest_core.drafting.source import Retrieved


EXPLORE_EVERY = 16  # steps in a row with candidates but no draft, before one drafts anyway
PROBE_GAP = 8  # steps at least between two probes (a marginal step drafting nothing to time q = 1)
PROBE_BELOW = 1.0  # a probe only replaces a draft expected to add fewer accepted tokens than this


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

    def __init__(
        self,
        curve: CostCurve | None = None,
        acceptance: AcceptanceModel | None = None,
        costs: ObservedCosts | None = None,
    ) -> None:
        self.curve = curve  # set (measured) by the engine before the first choice
        self.acceptance = acceptance or AcceptanceModel.load()
        self._by_sources: dict[tuple[int, ...], AcceptanceModel] = {}
        self.overhead_ms = 1.0  # per-step time outside the forward, running mean
        self.costs = costs or ObservedCosts()  # the forward time seen per size q; its clock counts the steps learned
        self._observed = self.costs.seen  # q -> the forward time seen for q tokens
        self._idle = 0  # plans in a row that had candidates but drafted nothing
        self._last_probe = -PROBE_GAP  # the cost clock at the latest probe
        self.probed = False  # whether the latest plan was a probe (drafted nothing to time q = 1)

    def fresh(self) -> AutoBudget:
        """A budget that knows what this one started from (the measured curve, the acceptance
        prior) and nothing it learned since: one generation's own, to learn into and drop."""
        return AutoBudget(self.curve, self.acceptance, ObservedCosts(self.costs.half_life))

    def corrected_curve(self) -> CostCurve:
        """The measured curve corrected by the forward times observed since
        (`ObservedCosts.corrected`: scaled by the drift, observed sizes blended in as far as
        they are fresh)."""
        if self.curve is None:
            raise ValueError("AutoBudget has no cost curve yet")
        return self.costs.corrected(self.curve)

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
        self.probed = bool(
            chosen.idx.size and not explore and chosen.expected_accepted < PROBE_BELOW and self._probe_due()
        )
        if self.probed:
            self._last_probe = self.costs.clock
            return chosen.idx[:0], p[:0]
        self._idle = 0 if chosen.idx.size else self._idle + 1
        return chosen.idx, p

    def take_probe(self) -> bool:
        """Whether the plan since the last call was a probe (then forgotten: a step without a
        plan, nothing retrieved, is none)."""
        probed, self.probed = self.probed, False
        return probed

    def _probe_due(self) -> bool:
        """Whether a plain step's cost needs timing: drafted steps' costs correct the curve (a
        size q > 1 seen MIN_SEEN times), and q = 1 was seen fewer than MIN_SEEN times or not
        within the last half-life of steps; and no probe within the last PROBE_GAP steps."""
        plain, clock = self._observed.get(1), self.costs.clock
        if not any(o.n >= MIN_SEEN for q, o in self._observed.items() if q > 1):
            return False  # the curve as measured, which timed q = 1 with the rest
        if plain is not None and plain.n >= MIN_SEEN and clock - plain.step < self.costs.half_life:
            return False
        return clock - self._last_probe >= PROBE_GAP

    def step_done(
        self,
        draft: Draft,
        accepted: Sequence[int],
        forward_ms: float,
        total_ms: float,
        retrieved: Sequence[Retrieved],
        drafting: bool,
    ) -> None:
        """One engine step: learned (`learn`) where this budget chose its draft (`drafting`);
        otherwise a step without drafts (plain decoding, or a fixed c that found nothing) still
        times what a plain step costs."""
        if drafting:
            self.learn(draft, accepted, overhead_ms=total_ms - forward_ms, forward_ms=forward_ms, retrieved=retrieved)
        elif len(draft) == 0:
            self.costs.observe(1, forward_ms)

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
        self.costs.observe(draft.q, forward_ms)
