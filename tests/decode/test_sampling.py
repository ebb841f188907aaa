"""Sampling and acceptance on hand-made logits and trees, checked by exact enumeration."""

from __future__ import annotations

import math

import pytest
import torch

from rest_core.config import SamplingConfig
from rest_core.decode.sampling import Uniforms, accept, process_logits, sample_index
from tests.tiny_models import torch_threads


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


def test_process_logits_matches_transformers_warpers():
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    gen = torch.Generator().manual_seed(0)
    for temperature, top_k, top_p in [(1.0, 0, 1.0), (0.7, 0, 0.9), (1.3, 5, 1.0), (0.5, 8, 0.8), (2.0, 3, 0.3)]:
        logits = torch.randn(4, 50, generator=gen, dtype=torch.float64) * 3
        cfg = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
        ours = process_logits(logits, cfg)
        ref = TemperatureLogitsWarper(temperature)(None, logits.clone())
        if top_k:
            ref = TopKLogitsWarper(top_k)(None, ref)
        if top_p < 1.0:
            ref = TopPLogitsWarper(top_p)(None, ref)
        torch.testing.assert_close(ours, ref.softmax(-1), rtol=0, atol=1e-12)


def test_sample_index_is_an_exact_inverse_cdf():
    probs = torch.tensor([0.0, 0.25, 0.0, 0.5, 0.25], dtype=torch.float64)
    cdf = probs.cumsum(0)
    for t in range(5):
        if probs[t] == 0:
            continue
        lo = float(cdf[t] - probs[t])
        for u in (lo, lo + 1e-9, (lo + float(cdf[t])) / 2, float(cdf[t]) - 1e-9):
            assert sample_index(probs, u) == t
    assert sample_index(probs, 0.0) == 1  # zero-probability token 0 is skipped
    assert sample_index(probs, 1.0 - 1e-16) == 4


def test_uniforms_are_reproducible():
    a, b = Uniforms(7), Uniforms(7)
    xs = [a() for _ in range(5)]
    assert xs == [b() for _ in range(5)]
    assert all(0.0 <= x < 1.0 for x in xs)


# A hand-made draft tree over a 4-token vocabulary. Rows: 0 = root; children keyed (row, token).
#   root -> 1 (row 1) -> 2 (row 3) -> 0 (row 5)
#        -> 2 (row 2) -> 3 (row 4)
CHILDREN = {(0, 1): 1, (0, 2): 2, (1, 2): 3, (2, 3): 4, (3, 0): 5}
PARENT_PATH = {0: (), 1: (1,), 2: (2,), 3: (1, 2), 4: (2, 3), 5: (1, 2, 0)}  # row -> tokens from root
ROW_OF = {path: row for row, path in PARENT_PATH.items()}
VOCAB = 4


def _tree_logits(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(len(PARENT_PATH), VOCAB, generator=gen, dtype=torch.float64) * 2


def _enumerate_accept(logits: torch.Tensor, cfg: SamplingConfig, max_tokens: int, stop_ids=(), process=None) -> dict:
    """Exact output distribution of `accept`: run it on scripted uniforms, branching at every
    draw over every token with positive probability (u at the middle of its CDF interval)."""
    out: dict[tuple[int, ...], float] = {}

    def explore(prefix_u: list[float], prob: float) -> None:
        draws: list[int] = []

        def uniforms() -> float:
            i = len(draws)
            draws.append(i)
            if i < len(prefix_u):
                return prefix_u[i]
            raise _NeedBranch

        try:
            tokens, rows = accept(
                logits, CHILDREN, cfg, uniforms, max_tokens=max_tokens, stop_ids=stop_ids, process=process
            )
        except _NeedBranch:
            # The row being sampled is the one reached by the tokens emitted so far.
            path = tuple(_emitted(logits, cfg, prefix_u, process))
            p = process_logits(_scores(logits, path, process), cfg)
            cdf = p.cumsum(0)
            for t in range(VOCAB):
                if p[t] > 0:
                    mid = float((cdf[t] - p[t] / 2) / cdf[-1])
                    explore(prefix_u + [mid], prob * float(p[t] / cdf[-1]))
            return
        assert len(draws) == len(tokens)  # one uniform per emitted token
        key = tuple(tokens)
        out[key] = out.get(key, 0.0) + prob

    explore([], 1.0)
    return out


class _NeedBranch(Exception):
    pass


def _scores(logits, path: tuple[int, ...], process=None) -> torch.Tensor:
    """The scores plain decoding sees after `path`: the tree row holding it, processed with it."""
    row = logits[ROW_OF[path]]
    return row if process is None else process(list(path), row)


def _emitted(logits, cfg, us, process=None):
    """Tokens emitted by the first len(us) draws (inverse CDF along the tree)."""
    tokens: list[int] = []
    for u in us:
        tokens.append(sample_index(process_logits(_scores(logits, tuple(tokens), process), cfg), u))
        if tuple(tokens) not in ROW_OF:
            break
    return tokens


def _autoregressive_prob(logits, cfg, tokens, process=None) -> float:
    """P(tokens) under plain sampling, where the model's distribution after a prefix is the
    tree row holding that prefix (all prefixes asked for lie in the tree)."""
    prob, path = 1.0, ()
    for t in tokens:
        p = process_logits(_scores(logits, path, process), cfg)
        prob *= float(p[t] / p.sum())
        path = path + (t,)
    return prob


@pytest.mark.parametrize(
    "cfg",
    [
        SamplingConfig(temperature=1.0),
        SamplingConfig(temperature=0.6, top_p=0.8),
        SamplingConfig(temperature=1.5, top_k=2),
        SamplingConfig(temperature=0.9, top_k=3, top_p=0.7),
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_acceptance_is_exact_by_enumeration(cfg, seed):
    logits = _tree_logits(seed)
    dist = _enumerate_accept(logits, cfg, max_tokens=10)
    assert math.isclose(sum(dist.values()), 1.0, abs_tol=1e-12)
    for tokens, p in dist.items():
        # Each outcome follows the tree and leaves it exactly at its last token...
        *head, last = tokens
        assert tuple(head) in ROW_OF and (ROW_OF[tuple(head)], last) not in CHILDREN
        # ...and has exactly the probability plain sampling gives that prefix.
        assert math.isclose(p, _autoregressive_prob(logits, cfg, tokens), rel_tol=1e-9, abs_tol=1e-15)


CONTEXT = (3,)  # the ids before the root's children, for the path-dependent processor below


def _penalise_seen(path, row_logits):
    """A repetition penalty: tokens already in the context or on the path lose 1.5 logits. It
    depends on the prefix, so each tree row must be processed with its own path."""
    out = row_logits.clone()
    out[sorted(set(CONTEXT) | set(path))] -= 1.5
    return out


@pytest.mark.parametrize("cfg", [SamplingConfig(temperature=1.0), SamplingConfig(temperature=0.7, top_k=3, top_p=0.9)])
@pytest.mark.parametrize("seed", [0, 1])
def test_acceptance_with_a_prefix_dependent_processor_is_exact(cfg, seed):
    logits = _tree_logits(seed)
    dist = _enumerate_accept(logits, cfg, max_tokens=10, process=_penalise_seen)
    assert math.isclose(sum(dist.values()), 1.0, abs_tol=1e-12)
    for tokens, p in dist.items():
        assert math.isclose(p, _autoregressive_prob(logits, cfg, tokens, _penalise_seen), rel_tol=1e-9, abs_tol=1e-15)
    # The processor matters here: without it the distribution is another one.
    plain = _enumerate_accept(logits, cfg, max_tokens=10)
    assert any(not math.isclose(plain.get(t, 0.0), p, abs_tol=1e-9) for t, p in dist.items())


def test_greedy_acceptance_processes_each_row_with_its_own_path():
    logits = torch.full((6, VOCAB), -5.0, dtype=torch.float64)
    logits[0, 1] = 1  # root -> 1 (row 1)
    logits[1, 2] = 1  # -> 2 (row 3)
    logits[3, 1] = 1.0  # row 3 prefers 1, which is already on its path...
    logits[3, 0] = 0.5  # ...so with the penalty it takes 0 (a drafted child: row 5)
    logits[5, 2] = 1  # row 5: every token is in context + path, all lose the same: still 2
    seen = []

    def penalise(path, row_logits):
        seen.append(list(path))
        return _penalise_seen(path, row_logits)

    assert accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=10) == ([1, 2, 1], [1, 3])
    tokens, rows = accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=10, process=penalise)
    assert (tokens, rows) == ([1, 2, 0, 2], [1, 3, 5])
    assert seen == [[], [1], [1, 2], [1, 2, 0]]  # each visited row saw its own prefix


def test_acceptance_respects_max_tokens_and_stop_ids():
    logits = _tree_logits(3)
    cfg = SamplingConfig(temperature=1.0)
    for tokens in _enumerate_accept(logits, cfg, max_tokens=2):
        assert 1 <= len(tokens) <= 2
    stop = 2
    for tokens in _enumerate_accept(logits, cfg, max_tokens=10, stop_ids=(stop,)):
        assert stop not in tokens[:-1]
    # The distribution truncated at max_tokens is still exact: prefix probabilities match.
    dist = _enumerate_accept(logits, cfg, max_tokens=2)
    for tokens, p in dist.items():
        assert math.isclose(p, _autoregressive_prob(logits, cfg, tokens), rel_tol=1e-9)


def test_greedy_acceptance_walks_the_argmax_path():
    logits = torch.full((6, VOCAB), -5.0, dtype=torch.float64)
    logits[0, 1] = 1  # root -> 1 (row 1)
    logits[1, 2] = 1  # -> 2 (row 3)
    logits[3, 3] = 1  # -> 3: not a child of row 3 -> emitted, stop
    tokens, rows = accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=10)
    assert tokens == [1, 2, 3] and rows == [1, 3]
    tokens, rows = accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=2)
    assert tokens == [1, 2] and rows == [1, 3]
    tokens, rows = accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=10, stop_ids=(2,))
    assert tokens == [1, 2] and rows == [1, 3]  # stopped at EOS, which was drafted
    logits[0] = torch.tensor([0.0, 0.0, 0.0, 9.0])  # root's own choice is not drafted
    tokens, rows = accept(logits, CHILDREN, SamplingConfig(), None, max_tokens=10)
    assert tokens == [3] and rows == []


def test_no_draft_is_one_plain_token():
    logits = torch.tensor([[0.1, 2.0, 0.3]], dtype=torch.float64)
    assert accept(logits, {}, SamplingConfig(), None, max_tokens=5) == ([1], [])
    cfg = SamplingConfig(temperature=1.0, seed=0)
    seen = {accept(logits, {}, cfg, Uniforms(s), max_tokens=5)[0][0] for s in range(50)}
    assert seen == {0, 1, 2}


def test_all_outcomes_enumerated_for_small_tree():
    # Sanity of the enumerator itself: outcome count = number of (tree path, off-tree token) pairs.
    logits = torch.zeros(len(PARENT_PATH), VOCAB, dtype=torch.float64)  # uniform everywhere
    dist = _enumerate_accept(logits, SamplingConfig(temperature=1.0), max_tokens=10)
    expected = set()
    for path, row in ROW_OF.items():
        for t in range(VOCAB):
            if (row, t) not in CHILDREN:
                expected.add(path + (t,))
    assert set(dist) == expected
    for toks, p in dist.items():
        assert math.isclose(p, 0.25 ** len(toks))
