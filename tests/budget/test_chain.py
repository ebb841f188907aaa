"""Chain drafts and the batch length rule (rest_core.budget.chain), on hand-made tries,
probabilities and cost curves: no model, no vLLM."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.budget.acceptance import FEATURE_NAMES, AcceptanceModel
from rest_core.budget.chain import ChainDraft, batch_lengths, chain_draft, likeliest_path
from rest_core.budget.cost_curve import CostCurve
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.source import Retrieved
from rest_core.sources import SOURCE_CONTEXT, SOURCE_DATASTORE

FLAT = CostCurve((1, 1024), (10.0, 10.0))  # verifying more tokens is free (a GPU, few requests)
STEEP = CostCurve((1, 1024), (10.0, 10.0 + 1023 * 20.0))  # each token costs twice a whole step
# A fixed cost per step plus a cost per token (a CPU): extra tokens matter more as the batch grows.
LINEAR = CostCurve((1, 1024), (30.0, 30.0 + 1023 * 1.0))


def share_model() -> AcceptanceModel:
    """q(node) = the node's share of its parent's weight (clipped to 0.01..0.99)."""
    w = np.zeros(len(FEATURE_NAMES))
    w[FEATURE_NAMES.index("logit_share")] = 1.0
    return AcceptanceModel(w)


def rows(*conts: list[int]) -> np.ndarray:
    m = max(len(c) for c in conts)
    return np.array([c + [-1] * (m - len(c)) for c in conts], dtype=np.int64)


def store(*conts: list[int]) -> Retrieved:
    return Retrieved(SOURCE_DATASTORE, 2, (7, 8), len(conts), rows(*conts))


def test_the_chain_follows_the_likeliest_child_with_its_path_probabilities():
    # Root children: 1 (4 of 6 continuations) and 5 (2 of 6); under 1: 2 (3 of 4) and 4 (1 of 4).
    found = store([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 4], [5, 6], [5, 6])
    chain = chain_draft([found], share_model(), k=8)
    assert chain.tokens.tolist() == [1, 2, 3]
    assert chain.p == pytest.approx([4 / 6, 4 / 6 * 3 / 4, 4 / 6 * 3 / 4 * 0.99])  # share 1 is clipped to 0.99
    assert chain.sources.tolist() == [SOURCE_DATASTORE] * 3
    assert chain.features is not None and chain.features.n == 3
    assert chain_draft([found], share_model(), k=2).tokens.tolist() == [1, 2]  # never deeper than k


def test_the_chain_merges_sources_in_the_engines_trie():
    context = ContextSource()
    context.reset([9, 1, 2, 9])  # the context's last token 9 was followed by 1, 2 before
    from_context = context.retrieve()
    assert from_context.source_bit == SOURCE_CONTEXT
    chain = chain_draft([store([1, 2, 3], [4]), from_context], share_model(), k=8)
    assert chain.tokens.tolist()[:2] == [1, 2]
    assert chain.sources.tolist()[:2] == [SOURCE_DATASTORE | SOURCE_CONTEXT] * 2  # both proposed them
    assert len(chain.matches) == 2


def test_nothing_retrieved_is_an_empty_chain():
    assert len(chain_draft([], share_model(), k=4)) == 0
    empty = Retrieved.empty(SOURCE_DATASTORE, 10)
    chain = chain_draft([empty], share_model(), k=4)
    assert len(chain) == 0 and chain.matches[0].occurrences == 0
    assert len(chain_draft([store([1, 2])], share_model(), k=0)) == 0


def test_likeliest_path_breaks_ties_towards_the_first_child():
    parents = np.array([-1, -1, 0, 0, 1])
    p = np.array([0.5, 0.5, 0.2, 0.3, 0.5])
    assert likeliest_path(parents, p).tolist() == [0, 3]
    assert likeliest_path(np.empty(0, np.int64), np.empty(0)).tolist() == []


def test_a_cut_keeps_the_first_tokens_and_their_features():
    chain = chain_draft([store([1, 2, 3], [1, 2, 4])], share_model(), k=8)
    short = chain.cut(2)
    assert short.tokens.tolist() == [1, 2] and short.features.n == 2 and short.p.tolist() == chain.p[:2].tolist()
    assert chain.cut(99) is chain and len(chain.cut(-1)) == 0


CHAIN = np.array([0.9, 0.8, 0.6, 0.4, 0.2, 0.1])


def test_a_flat_curve_drafts_every_chain_whole():
    plan = batch_lengths([CHAIN, CHAIN[:3], np.empty(0)], FLAT)
    assert plan.lengths == (6, 3, 0)
    assert plan.tokens == 3 + 9
    assert plan.expected_tokens == pytest.approx(3 + CHAIN.sum() + CHAIN[:3].sum())


def test_a_steep_curve_drafts_nothing():
    plan = batch_lengths([CHAIN] * 4, STEEP)
    assert plan.lengths == (0, 0, 0, 0)
    assert plan.tokens == 4 and plan.expected_tokens == 4
    assert batch_lengths([CHAIN] * 4, STEEP, at_least=1).lengths == (1, 0, 0, 0)  # exploration: the likeliest token


def test_each_request_drafts_less_as_the_batch_grows():
    per_request = [batch_lengths([CHAIN] * b, LINEAR).lengths for b in (1, 8, 32, 128)]
    assert [max(x) for x in per_request] == sorted((max(x) for x in per_request), reverse=True)
    assert per_request[0] == (5,)  # alone: up to p = 0.2 pays on a 30 ms step with 1 ms per token
    assert max(per_request[-1]) < max(per_request[0])
    assert max(per_request[-1]) <= 1


def test_never_more_than_the_limit():
    plan = batch_lengths([CHAIN, CHAIN], FLAT, limit=4)
    assert plan.lengths == (4, 4)


def test_the_likeliest_tokens_go_first_across_requests():
    # A curve on which exactly two draft tokens pay: they are the two likeliest of the batch.
    curve = CostCurve((2, 4, 5, 64), (10.0, 10.0, 40.0, 400.0))
    plan = batch_lengths([np.array([0.9, 0.1]), np.array([0.7, 0.6])], curve)
    assert plan.lengths == (1, 1)
    assert plan.rate == pytest.approx((2 + 0.9 + 0.7) / 10.0)


def test_probabilities_must_not_grow_along_a_chain():
    with pytest.raises(ValueError, match="must not grow"):
        batch_lengths([np.array([0.2, 0.5])], FLAT)
    assert batch_lengths([], FLAT).lengths == ()


def test_a_chain_draft_is_empty_by_default():
    assert len(ChainDraft()) == 0


def test_the_linear_correction_learns_a_slope_a_flat_prior_does_not_have():
    from rest_core.budget.cost_curve import LinearCorrection

    true = CostCurve((1, 1024), (10.0, 10.0 + 1023 * 20.0))  # 20 ms per token
    cost = LinearCorrection(FLAT)
    assert float(cost(64)) == pytest.approx(10.0)  # nothing seen: the prior
    rng = np.random.default_rng(0)
    for t in rng.integers(8, 72, size=200):  # only steps of 8 tokens and more were timed
        cost.observe(int(t), float(true(int(t))))
    for t in (8, 16, 64):
        assert float(cost(t)) == pytest.approx(float(true(t)), rel=0.1)
    assert cost.params[2] == pytest.approx(20.0, rel=0.1)  # g: ms per token
    assert list(cost.curve().ms) == sorted(cost.curve().ms)


def test_the_linear_correction_learns_a_fixed_cost_per_step_and_forgets_an_old_load():
    from rest_core.budget.cost_curve import LinearCorrection

    measured = CostCurve((1, 2, 4, 8), (32.0, 36.0, 38.0, 43.0))  # plain decoding, measured
    cost = LinearCorrection(measured, half_life=32)
    for _ in range(100):  # a speculative step costs 15 ms more, whatever its size
        for t in (1, 3, 6):
            cost.observe(t, float(measured(t)) + 15.0)
    assert float(cost(4)) == pytest.approx(float(measured(4)) + 15.0, rel=0.05)
    for _ in range(300):  # the load went away: back to the measurement
        for t in (1, 3, 6):
            cost.observe(t, float(measured(t)))
    assert float(cost(4)) == pytest.approx(float(measured(4)), rel=0.05)
    steep = CostCurve((1, 64), (10.0, 10.0 + 63 * 20.0))
    cost = LinearCorrection(steep)
    for t in (4, 16, 40) * 50:  # the prior overstates the growth: the slope goes (never below 0)
        cost.observe(t, 10.0)
    assert float(cost(40)) < 2 * 10.0 and cost.params[0] >= 0 and cost.params[2] >= 0


# vLLM's CPU step for one request as the proposer's draft log timed it (2026-12-03, medians,
# ms for 1..17 tokens): flat up to 4 tokens, then growing by steps.
VLLM_CPU_STEP = CostCurve(
    tuple(range(1, 18)),
    (59.2, 61.9, 61.1, 60.9, 63.0, 64.8, 70.2, 71.0, 73.8, 75.3, 78.6, 79.2, 82.4, 84.1, 85.3, 87.2, 89.2),
)


def _timed(cost, true: CostCurve, sizes) -> None:
    for t in sizes:
        cost.observe(int(t), float(true(int(t))))


def test_the_shaped_correction_keeps_the_shape_a_line_cannot_follow():
    from rest_core.budget.cost_curve import LinearCorrection, ShapedCorrection

    prior = CostCurve((1, 2, 4), (53.4, 58.1, 58.8))  # plain steps of 1, 2, 4 requests, as `ar` measures
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 18, size=300)
    line, shaped = LinearCorrection(prior, half_life=256), ShapedCorrection(prior, half_life=256)
    _timed(line, VLLM_CPU_STEP, sizes)
    _timed(shaped, VLLM_CPU_STEP, sizes)
    never_less = np.maximum.accumulate(VLLM_CPU_STEP.ms)  # a bigger step is taken to cost no less
    for t in range(1, 18):
        assert float(shaped(t)) == pytest.approx(never_less[t - 1], rel=0.03)
    # The line cannot follow the flat start and the jump at 7 tokens: the plans it makes for one
    # request's chains yield fewer tokens per ms on the true cost than the shaped curve's, which
    # come within half a percent of what planning on the true cost itself would give.
    truth = CostCurve(VLLM_CPU_STEP.sizes, tuple(never_less))
    rates = {"line": [], "shaped": [], "truth": []}
    for _ in range(300):
        p = np.cumprod(rng.uniform(0.3, 0.98, size=16)) * rng.uniform(0.2, 1.0)
        for name, curve in (("line", line.curve()), ("shaped", shaped.curve()), ("truth", truth)):
            n = batch_lengths([p], curve).lengths[0]
            rates[name].append((1.0 + p[:n].sum()) / float(truth(1 + n)))
    mean = {k: float(np.mean(v)) for k, v in rates.items()}
    assert mean["line"] < mean["shaped"] and mean["shaped"] > 0.995 * mean["truth"]
    # Sizes never timed follow the line (its drift and slope), and the curve never falls.
    assert float(shaped(40)) == pytest.approx(float(line(40)), rel=0.05)
    assert list(shaped.curve().ms) == sorted(shaped.curve().ms)


def test_the_shaped_correction_is_the_prior_until_a_size_is_timed_and_forgets_an_old_load():
    from rest_core.budget.cost_curve import ShapedCorrection

    cost = ShapedCorrection(VLLM_CPU_STEP, half_life=32)
    assert float(cost(7)) == pytest.approx(70.2)
    slow = CostCurve(VLLM_CPU_STEP.sizes, tuple(2 * m for m in VLLM_CPU_STEP.ms))
    _timed(cost, slow, [1, 4, 8] * 40)  # a load doubles every step
    assert float(cost(4)) == pytest.approx(2 * 60.9, rel=0.05)
    assert float(cost(6)) == pytest.approx(2 * 64.8, rel=0.1)  # never timed: the line's drift
    _timed(cost, VLLM_CPU_STEP, [1, 4, 8] * 100)  # the load went away
    assert float(cost(4)) == pytest.approx(60.9, rel=0.05)
