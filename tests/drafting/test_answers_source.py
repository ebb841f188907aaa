"""The server's earlier answers as a draft source (rest_core.drafting.answers_source), on hand-made
token streams, checked against a brute-force scan."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.config import RetrievalConfig
from rest_core.drafting.answers_source import AnswerHistory
from rest_core.drafting.source import PAD

CFG = RetrievalConfig(n_min=1, n_max=8, m=4, max_matches=100)


def history(*answers: list[int], capacity: int = 1000) -> AnswerHistory:
    h = AnswerHistory(capacity)
    for a in answers:
        h.add(a)
    return h


def brute(stream: list[int], tail: list[int], cfg: RetrievalConfig) -> tuple[int, list[list[int]]]:
    """The longest suffix of `tail` found in `stream` (not ending at an answer's end) and the
    continuations after its occurrences, most recent first, cut at the answer's end."""
    for n in range(min(cfg.n_max, len(tail)), cfg.n_min - 1, -1):
        key = tail[-n:]
        ends = [e for e in range(n, len(stream)) if stream[e - n : e] == key and stream[e] != PAD]
        if ends:
            rows = []
            for e in reversed(ends):
                row = []
                for t in stream[e : e + cfg.m]:
                    if t == PAD:
                        break
                    row.append(t)
                rows.append(row + [PAD] * (cfg.m - len(row)))
            return n, rows[: cfg.max_matches]
    return 0, []


def test_the_longest_suffix_and_its_continuations_most_recent_first():
    h = history([1, 2, 3, 4, 5, 6], [9, 2, 3, 7, 8], [2, 3, 4, 5, 9])
    r = h.retrieve([0, 2, 3], CFG, bit=4, weight=1.0)
    assert r.source_bit == 4 and r.suffix_len == 2 and r.suffix_tokens == (2, 3) and r.occurrences == 3
    assert r.continuations.tolist() == [[4, 5, 9, PAD], [7, 8, PAD, PAD], [4, 5, 6, PAD]]
    assert r.positions == (13, 8, 1)  # where each occurrence starts in the stream
    r = h.retrieve([1, 2, 3, 4], CFG, bit=4, weight=1.0)  # longer: only the first answer has it all
    assert r.suffix_len == 4 and r.continuations.tolist() == [[5, 6, PAD, PAD]]


def test_nothing_matches_or_nothing_follows():
    h = history([1, 2, 3])
    assert h.retrieve([7, 8], CFG, 4, 1.0).continuations.shape == (0, CFG.m)
    assert h.retrieve([2, 3], CFG, 4, 1.0).continuations.shape == (0, CFG.m)  # 3 ends the answer
    assert AnswerHistory(8).retrieve([1], CFG, 4, 1.0).suffix_len == 0
    strict = RetrievalConfig(n_min=3, n_max=8, m=4)
    assert history([1, 2, 9, 9]).retrieve([5, 1, 2], strict, 4, 1.0).suffix_len == 0  # only 2 tokens match


def test_a_full_history_drops_its_oldest_answers_whole():
    h = history([1, 2, 3], [4, 5, 6], capacity=10)
    assert h.tokens.tolist() == [1, 2, 3, PAD, 4, 5, 6, PAD]
    h.add([7, 8])
    assert h.tokens.tolist() == [4, 5, 6, PAD, 7, 8, PAD] and h.answers == 3
    h.add(list(range(10, 30)))  # longer than the history: its last tokens
    assert h.tokens.tolist() == list(range(21, 30)) + [PAD] and len(h) == h.capacity
    h.add([])
    assert len(h) == 10
    with pytest.raises(ValueError):
        AnswerHistory(1)


def test_matches_a_brute_force_scan_on_random_streams():
    rng = np.random.default_rng(1)
    for _ in range(200):
        answers = [rng.integers(0, 4, size=rng.integers(1, 12)).tolist() for _ in range(rng.integers(1, 6))]
        capacity = int(rng.integers(4, 60))
        h = history(*answers, capacity=capacity)
        tail = rng.integers(0, 4, size=rng.integers(1, 10)).tolist()
        cfg = RetrievalConfig(n_min=int(rng.integers(1, 3)), n_max=int(rng.integers(3, 9)), m=3, max_matches=5)
        r = h.retrieve(tail, cfg, 4, 1.0)
        n, rows = brute(h.tokens.tolist(), tail, cfg)
        assert r.suffix_len == n and r.continuations.tolist() == rows


def test_a_history_grows_with_its_answers_and_keeps_what_a_full_size_one_would():
    """The stream starts small and doubles as answers come, never past the capacity; what it keeps
    is what a history of the whole capacity from the start keeps: the newest whole answers."""
    from rest_core.drafting.answers_source import FIRST_TOKENS

    rng = np.random.default_rng(0)
    capacity = 5 * FIRST_TOKENS + 7
    h, kept, sizes = AnswerHistory(capacity), [], set()
    assert h.nbytes == FIRST_TOKENS * 4  # not the capacity's 20 KB
    for _ in range(200):
        answer = rng.integers(0, 50, size=int(rng.integers(1, 900))).tolist()
        h.add(answer)
        kept.append(answer[-(capacity - 1) :])
        while sum(len(a) + 1 for a in kept) > capacity:
            kept.pop(0)
        assert h.tokens.tolist() == [t for a in kept for t in (*a, PAD)]
        assert h.nbytes <= capacity * 4
        sizes.add(h.nbytes)
    assert len(sizes) > 2 and max(sizes) == capacity * 4  # grew in steps, up to the capacity
