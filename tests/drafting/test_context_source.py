"""The context as a draft source: incremental index vs a brute-force scan, and the draft-source
contract (reset once, extend per step, retrieve with no argument) for both sources."""

from __future__ import annotations

import numpy as np
import pytest

from rest_core.config import RetrievalConfig
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.sources import SOURCE_CONTEXT
from rest_core.store.datastore import Datastore


def brute_force(ctx, cfg: RetrievalConfig):
    """(n, occurrences, rows most recent first) for the longest suffix occurring earlier."""
    ctx = [int(t) for t in ctx]
    size = len(ctx)
    for n in range(min(cfg.n_max, size - 1), cfg.n_min - 1, -1):
        pattern = ctx[size - n :]
        ends = [e for e in range(n, size) if ctx[e - n : e] == pattern]  # e < size: not itself
        if ends:
            rows = []
            for e in sorted(ends, reverse=True)[: cfg.max_matches]:
                row = ctx[e : e + cfg.m]
                rows.append(row + [-1] * (cfg.m - len(row)))
            return n, len(ends), rows
    return 0, 0, []


@pytest.mark.parametrize("seed", range(10))
def test_incremental_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_min = int(rng.integers(1, 3))
    cfg = RetrievalConfig(
        n_min=n_min, n_max=int(rng.integers(n_min, 8)), m=int(rng.integers(1, 6)), max_matches=int(rng.integers(1, 50))
    )
    vocab = int(rng.integers(2, 6))
    ctx = rng.integers(0, vocab, int(rng.integers(0, 5))).tolist()
    source = ContextSource(cfg, weight=0.5)
    source.reset(np.array(ctx, dtype=np.int64))
    for _ in range(60):
        got = source.retrieve()
        assert len(source) == len(ctx)  # the index followed the context
        n, count, rows = brute_force(ctx, cfg)
        assert got.suffix_len == n and got.occurrences == count
        assert got.continuations.tolist() == rows
        assert got.continuations.shape == (len(rows), cfg.m) and got.continuations.dtype == np.int64
        assert got.suffix_tokens == (tuple(ctx[len(ctx) - n :]) if n else ())
        assert got.source_bit == SOURCE_CONTEXT and got.weight == 0.5
        new = rng.integers(0, vocab, int(rng.integers(1, 4))).tolist()
        source.extend(new)
        ctx = ctx + new


def test_extend_and_reset():
    cfg = RetrievalConfig(m=3)
    source = ContextSource(cfg)
    source.reset([1, 2, 3, 4])
    source.extend([1, 2])
    assert len(source) == 6
    got = source.retrieve()
    assert got.suffix_len == 2 and got.continuations.tolist() == [[3, 4, 1]]
    # reset starts a new generation: nothing of the last context is left.
    source.reset([7, 8, 9, 7, 8])
    got = source.retrieve()
    assert got.suffix_len == 2 and got.continuations.tolist() == [[9, 7, 8]]
    assert len(source) == 5


def test_no_match_and_trivial_self_match_excluded():
    source = ContextSource(RetrievalConfig(m=2))
    for ctx in ([], [5], [1, 2, 3]):
        source.reset(ctx)
        got = source.retrieve()
        assert got.suffix_len == 0 and got.occurrences == 0 and got.continuations.shape == (0, 2)


def test_most_recent_first_and_cap():
    source = ContextSource(RetrievalConfig(n_max=1, m=1, max_matches=2))
    source.reset([0, 1, 0, 2, 0, 3, 0])
    got = source.retrieve()
    assert got.occurrences == 3
    assert got.continuations.tolist() == [[3], [2]]


@pytest.mark.parametrize("seed", range(4))
def test_bulk_and_token_by_token_indexing_agree(seed):
    rng = np.random.default_rng(50 + seed)
    cfg = RetrievalConfig(n_max=int(rng.integers(1, 6)), m=3)
    ids = rng.integers(0, 4, 120).tolist()
    bulk = ContextSource(cfg)
    bulk.reset(ids[:40])  # more than n_max tokens at once: the bulk path
    bulk.extend(ids[40:])
    step = ContextSource(cfg)
    for t in ids:
        step.extend([t])
    assert bulk._ends == step._ends
    for cut in range(1, 121, 7):
        bulk.reset(ids[:cut])
        got = bulk.retrieve()
        n, count, rows = brute_force(ids[:cut], cfg)
        assert (got.suffix_len, got.occurrences, got.continuations.tolist()) == (n, count, rows)


@pytest.mark.parametrize("kind", ["datastore", "context"])
def test_extending_step_by_step_equals_a_fresh_reset(kind):
    """The contract every source keeps: told the prompt once and then only each step's new
    tokens, it retrieves exactly what a source told the whole context at once would."""
    rng = np.random.default_rng(7)
    cfg = RetrievalConfig(n_max=4, m=3, max_matches=20)
    docs = [rng.integers(0, 6, 60).tolist() for _ in range(4)]
    store = Datastore.from_token_ids(docs, vocab_size=6)
    make = (lambda: DatastoreSource(store, cfg)) if kind == "datastore" else (lambda: ContextSource(cfg))
    ctx = rng.integers(0, 6, 5).tolist()
    stepped = make()
    stepped.reset(ctx)
    matched = 0
    for _ in range(40):
        fresh = make()
        fresh.reset(ctx)
        got, want = stepped.retrieve(), fresh.retrieve()
        assert (got.suffix_len, got.suffix_tokens, got.occurrences) == (
            want.suffix_len,
            want.suffix_tokens,
            want.occurrences,
        )
        assert np.array_equal(got.continuations, want.continuations)
        matched += got.suffix_len > 0
        new = rng.integers(0, 6, int(rng.integers(1, 4))).tolist()
        stepped.extend(new)
        ctx += new
    assert matched > 20
