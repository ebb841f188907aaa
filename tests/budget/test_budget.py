"""The auto budget cannot lock itself out of drafting: a load spike while forward costs were
observed (or measured), or an acceptance model that learned pessimism, must not stop it drafting
for good once drafting pays again. Pure numpy (no model): each step drafts through
`build_draft(plan=budget.plan)` and feeds back a forward time from a stated cost function."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rest_core.budget.acceptance import FEATURE_NAMES, AcceptanceModel
from rest_core.budget.auto import PROBE_GAP, AutoBudget
from rest_core.budget.cost_curve import CostCurve
from rest_core.drafting.draft import Draft, build_draft
from rest_core.drafting.source import Retrieved
from rest_core.sources import SOURCE_DATASTORE

GPU_LIKE = CostCurve((1, 2, 4, 8, 16), (10.0, 10.5, 11.0, 12.0, 14.0))  # a few nodes are nearly free
CPU_LIKE = CostCurve((1, 64), (10.0, 136.0))  # each node costs 2 ms on a 10 ms step
# A star of 8 first tokens seen 8, 7, ..., 1 times.
STAR = [Retrieved(SOURCE_DATASTORE, 1, (0,), 36, np.array([[t] for t in range(8) for _ in range(8 - t)], np.int64))]


def share_model() -> AcceptanceModel:
    """A model that believes each node's share of its parent's weight."""
    w = np.zeros(len(FEATURE_NAMES))
    w[FEATURE_NAMES.index("logit_share")] = 1.0
    return AcceptanceModel(w)


def run(
    budget: AutoBudget,
    steps: int,
    forward_ms: Callable[[int], float] = lambda q: float(GPU_LIKE(q)),
    accepted: Callable[[Draft], tuple[int, ...]] | None = None,
) -> list[int]:
    """Draft `steps` steps, feeding each one's forward time (and, when `accepted` is given, its
    outcome) back; the number of nodes drafted per step."""
    sizes = []
    for _ in range(steps):
        draft = build_draft(STAR, 8, plan=budget.plan)
        if accepted is None:  # the acceptance model is left as it is: only costs are learned
            budget.learn(draft, (), overhead_ms=1.0, forward_ms=forward_ms(draft.q))
        else:
            budget.learn(draft, accepted(draft), overhead_ms=1.0, forward_ms=forward_ms(draft.q), retrieved=STAR)
        sizes.append(len(draft))
    return sizes


def spike(budget: AutoBudget, ms: float = 100.0) -> None:
    """Three forwards of each draft size (q = 2..9) during a load spike."""
    for q in range(2, 10):
        for _ in range(3):
            budget.learn(build_draft(STAR, q - 1), (), overhead_ms=1.0, forward_ms=ms)


def test_drafting_resumes_after_a_spike_in_observed_costs():
    budget = AutoBudget(GPU_LIKE, share_model())
    before = run(budget, 5)
    assert before[-1] > 0  # drafting pays on this curve
    spike(budget)
    for _ in range(3):  # then plain steps (nothing retrieved, or nothing paid), at the curve's cost
        budget.learn(build_draft([], 8), (), overhead_ms=1.0, forward_ms=float(GPU_LIKE(1)))
    # The load is gone: every forward costs what the curve says again.
    after = run(budget, 200)
    drafted = [n for n in after[-50:] if n]  # (a probe now and then drafts nothing to time q = 1)
    assert len(drafted) >= 50 - 50 // PROBE_GAP and min(drafted) >= before[-1] - 1
    fixed = budget.corrected_curve()
    assert np.allclose(fixed(np.arange(1, 10)), GPU_LIKE(np.arange(1, 10)), rtol=0.05)


def test_drafting_resumes_when_the_curve_was_measured_during_a_spike():
    spiked = CostCurve((1, 2, 4, 8, 16), (10.0, 60.0, 60.0, 60.0, 60.0))  # only q > 1 was unlucky
    budget = AutoBudget(spiked, share_model())
    sizes = run(budget, 300)  # the true cost is GPU_LIKE's
    assert sizes[0] == 0
    assert sum(n > 0 for n in sizes[-100:]) >= 90  # (a plain step now and then re-observes q = 1)


def test_a_pessimistic_acceptance_model_is_tried_again():
    budget = AutoBudget(CPU_LIKE, share_model())
    # Nothing drafted is ever accepted: the model learns that, and drafts nothing.
    cpu = lambda q: float(CPU_LIKE(q))  # noqa: E731
    run(budget, 40, forward_ms=cpu, accepted=lambda d: ())
    assert run(budget, 1, forward_ms=cpu, accepted=lambda d: ()) == [0]

    def token_0(draft: Draft) -> tuple[int, ...]:  # from now on the model always emits token 0
        return tuple(np.flatnonzero(draft.nodes.tokens == 0).tolist()) if draft.nodes is not None else ()

    sizes = run(budget, 300, forward_ms=cpu, accepted=token_0)
    # The model learned that token 0 is always accepted (a probe now and then drafts nothing).
    assert sum(n > 0 for n in sizes[-50:]) >= 50 - 50 // PROBE_GAP


def test_exploration_is_deterministic_and_rare():
    """With nothing worth drafting, one step in EXPLORE_EVERY + 1 drafts its best node anyway;
    the same inputs give the same steps."""
    from rest_core.budget.auto import EXPLORE_EVERY

    def pessimist() -> AutoBudget:
        budget = AutoBudget(CPU_LIKE, share_model())
        run(budget, 40, forward_ms=lambda q: float(CPU_LIKE(q)), accepted=lambda d: ())
        return budget

    a, b = pessimist(), pessimist()
    cpu = lambda q: float(CPU_LIKE(q))  # noqa: E731
    sizes = run(a, 3 * (EXPLORE_EVERY + 1), forward_ms=cpu, accepted=lambda d: ())
    assert sizes == run(b, 3 * (EXPLORE_EVERY + 1), forward_ms=cpu, accepted=lambda d: ())
    assert sorted(set(sizes)) == [0, 1]
    assert sizes.count(1) <= 3


def test_a_plain_step_is_timed_so_drafts_that_lose_stop():
    """The curve was measured fast for drafted steps (in use q > 1 costs 30 ms more and 3 ms a
    token: a matrix product where one token takes a vector's fast path, the output head's
    chains, a busier machine); a budget that drafts every step never times a plain step,
    scales its cost up with the drift it sees and keeps drafting where drafting loses. A probe
    (a marginal step drafting nothing) times q = 1: most steps then draft nothing, and the true
    rate is at least plain decoding's. Seen red with the probe off (PROBE_BELOW = 0)."""
    measured = CostCurve((1, 2, 4, 8, 16), (40.0, 41.0, 43.0, 47.0, 55.0))

    def true_ms(q: int) -> float:
        return 40.0 if q == 1 else 70.0 + 3.0 * q

    budget = AutoBudget(measured, share_model())
    sizes = run(budget, 200, forward_ms=true_ms)
    # STAR's shares: the n likeliest first tokens are accepted with probability sum of their shares.
    shares = np.sort(np.bincount(STAR[0].continuations[:, 0]) / len(STAR[0].continuations))[::-1]
    rate = [(1 + shares[:n].sum()) / (1.0 + true_ms(1 + n)) for n in sizes[-100:]]
    plain = 1 / (1.0 + true_ms(1))
    assert np.mean(rate) >= 0.97 * plain, (np.mean(rate) / plain, sizes[-20:])  # without probes: 0.85
    assert sum(n == 0 for n in sizes[-100:]) >= 80


def test_plain_decoding_on_the_engine_times_a_plain_step():
    """A step without drafts from another run (plain decoding, drafting=False) is what q = 1 costs."""
    budget = AutoBudget(CostCurve((1, 16), (40.0, 55.0)), share_model())
    empty = build_draft([], 8)
    for _ in range(3):
        budget.step_done(empty, (), 30.0, 31.0, [], drafting=False)
    assert abs(float(budget.corrected_curve()(1)) - 30.0) < 1e-6
    budget.step_done(build_draft(STAR, 4), (), 99.0, 100.0, STAR, drafting=False)  # a fixed c's draft: not timed
    assert budget.costs.seen.keys() == {1}
