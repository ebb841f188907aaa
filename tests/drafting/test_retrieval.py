"""Retrieval against a brute-force scan: longest suffix, occurrences, continuations, sampling."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pydivsufsort
import pytest

from rest_core.config import RetrievalConfig
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.source import Retrieved
from rest_core.drafting.suffix_search import even_sample, search_shards
from rest_core.sources import SOURCE_DATASTORE


def make_store(tokens, separator: int, dtype=np.uint16) -> SimpleNamespace:
    """A one-shard datastore over raw tokens (the suffix array built here, as the store would)."""
    tokens = np.asarray(tokens, dtype=dtype)
    sa = pydivsufsort.divsufsort(tokens.astype(np.int32))
    return SimpleNamespace(shards=[SimpleNamespace(tokens=tokens, sa=sa)], separator=separator)


def brute_force(tokens, context, cfg: RetrievalConfig, separator: int):
    """(n, sorted list of continuation tuples) by scanning every position."""
    tokens = [int(t) for t in tokens]
    tail = [int(t) for t in context][-cfg.n_max :] if len(context) else []
    for i in range(len(tail) - 1, -1, -1):
        if tail[i] >= separator:
            tail = tail[i + 1 :]
            break
    for n in range(len(tail), cfg.n_min - 1, -1):
        pattern = tail[len(tail) - n :]
        ends = [p + n for p in range(len(tokens) - n + 1) if tokens[p : p + n] == pattern]
        if ends:
            rows = []
            for e in ends:
                row = []
                for t in tokens[e : e + cfg.m]:
                    if t == separator:
                        break
                    row.append(t)
                rows.append(tuple(row + [-1] * (cfg.m - len(row))))
            return n, sorted(rows)
    return 0, []


def retrieve_for(source: DatastoreSource, context) -> Retrieved:
    """What `source` retrieves for `context` as a generation's prompt."""
    source.reset(context)
    return source.retrieve()


def rows_of(retrieved: Retrieved) -> list[tuple[int, ...]]:
    return sorted(tuple(int(t) for t in row) for row in retrieved.continuations)


def random_corpus(rng, size: int, vocab: int, sep: int, sep_rate: float = 0.05) -> np.ndarray:
    tokens = rng.integers(0, vocab, size)
    tokens[rng.random(size) < sep_rate] = sep
    tokens[-1] = sep  # every document ends with the separator, as in a built store
    return tokens


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_random_corpora(seed):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 7))
    sep = vocab
    tokens = random_corpus(rng, int(rng.integers(20, 600)), vocab, sep)
    if seed % 3 == 0:
        tokens = tokens[:-1]  # also a token array that does not end with a separator
    n_min = int(rng.integers(1, 3))
    cfg = RetrievalConfig(n_min=n_min, n_max=int(rng.integers(n_min, 9)), m=int(rng.integers(1, 6)), max_matches=10**6)
    source = DatastoreSource(make_store(tokens, sep), cfg)
    for _ in range(25):
        if rng.random() < 0.5:  # a context that ends inside the corpus: long matches
            end = int(rng.integers(1, len(tokens) + 1))
            context = tokens[max(0, end - 20) : end]
            context = context[context != sep]
        else:
            context = rng.integers(0, vocab + 1, int(rng.integers(0, 12)))
        got = retrieve_for(source, context)
        n, rows = brute_force(tokens, context, cfg, sep)
        assert got.suffix_len == n
        assert got.occurrences == len(rows)
        assert rows_of(got) == rows
        assert got.suffix_tokens == tuple(int(t) for t in context[len(context) - n :]) if n else got.suffix_tokens == ()
        assert got.source_bit == SOURCE_DATASTORE


def test_real_text_matches_brute_force():
    # Real text, one byte per token: this repository's own retrieval module.
    text = (
        Path(__file__).resolve().parents[2].joinpath("rest_core", "drafting", "context_source.py").read_bytes()[:6000]
    )
    sep = 256
    tokens = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
    tokens = np.concatenate([tokens[:3000], [sep], tokens[3000:], [sep]])
    cfg = RetrievalConfig(n_max=12, m=8, max_matches=10**6)
    source = DatastoreSource(make_store(tokens, sep), cfg)
    probe = np.frombuffer(b"    def retrieve(self, context_ids", dtype=np.uint8).astype(np.int64)
    for cut in range(1, len(probe) + 1):
        got = retrieve_for(source, probe[:cut])
        n, rows = brute_force(tokens, probe[:cut], cfg, sep)
        assert (got.suffix_len, got.occurrences, rows_of(got)) == (n, len(rows), rows)


def test_longest_match_is_found_and_capped_at_n_max():
    sep = 9
    tokens = [1, 2, 3, 4, 5, 6, 7, sep, 3, 4, 5, 8, sep]
    store = make_store(tokens, sep)
    got = retrieve_for(DatastoreSource(store, RetrievalConfig(n_max=16, m=3)), [0, 0, 2, 3, 4, 5])
    assert got.suffix_len == 4 and got.suffix_tokens == (2, 3, 4, 5)
    assert got.occurrences == 1
    assert rows_of(got) == [(6, 7, -1)]
    # [3, 4, 5] occurs twice; n_max = 3 stops there
    got = retrieve_for(DatastoreSource(store, RetrievalConfig(n_max=3, m=3)), [2, 3, 4, 5])
    assert got.suffix_len == 3 and got.occurrences == 2
    assert rows_of(got) == [(6, 7, -1), (8, -1, -1)]


def test_separator_is_never_crossed():
    sep = 9
    # "1 2" ends document one, "3 4" starts document two: [2, 3] must not match across them.
    tokens = [5, 1, 2, sep, 3, 4, sep, 1, 2, 7, sep]
    source = DatastoreSource(make_store(tokens, sep), RetrievalConfig(m=4))
    got = retrieve_for(source, [1, 2, 3])
    assert got.suffix_len == 1 and got.suffix_tokens == (3,)
    assert rows_of(got) == [(4, -1, -1, -1)]
    got = retrieve_for(source, [1, 2])
    assert got.suffix_len == 2 and rows_of(got) == [(-1, -1, -1, -1), (7, -1, -1, -1)]
    # A context holding the separator id itself: only the part after it is searched.
    got = retrieve_for(source, [1, 2, sep, 3])
    assert got.suffix_len == 1 and got.suffix_tokens == (3,)


def test_end_of_tokens_pads():
    tokens = [1, 2, 3, 1, 2]  # no trailing separator
    got = retrieve_for(DatastoreSource(make_store(tokens, 9), RetrievalConfig(m=3)), [1, 2])
    assert rows_of(got) == [(-1, -1, -1), (3, 1, 2)]


def test_no_match_and_empty_context():
    source = DatastoreSource(make_store([1, 2, 3, 9], 9), RetrievalConfig(m=4))
    for context in ([], [7], [7, 8], np.array([], dtype=np.int64)):
        got = retrieve_for(source, context)
        assert got.suffix_len == 0 and got.occurrences == 0 and got.suffix_tokens == ()
        assert got.continuations.shape == (0, 4) and got.continuations.dtype == np.int64
    # shorter than n_min
    got = retrieve_for(DatastoreSource(make_store([1, 2, 3, 9], 9), RetrievalConfig(n_min=2)), [3])
    assert got.suffix_len == 0


def test_even_sample_spreads_over_the_range():
    assert even_sample(5, 10).tolist() == [0, 1, 2, 3, 4]
    s = even_sample(10_000, 100)
    assert s.tolist() == list(range(0, 10_000, 100))
    s = even_sample(1_000_003, 4999)
    assert len(s) == 4999 and s[0] == 0 and s[-1] < 1_000_003 and np.all(np.diff(s) > 0)
    assert s[-1] >= 1_000_003 - 1_000_003 // 4999 - 1  # reaches the last stride of the range


def test_cap_sampling_is_fair_and_deterministic():
    # 5000 occurrences of token 0, followed by values 1..50 in turn. In suffix-array order the
    # continuations are sorted, so the first K would all start with 1; a fair sample sees all 50.
    sep = 100
    values = np.arange(5000) % 50 + 1
    tokens = np.stack([np.zeros(5000, dtype=np.int64), values], axis=1).reshape(-1)
    tokens = np.concatenate([tokens, [sep]])
    source = DatastoreSource(make_store(tokens, sep), RetrievalConfig(n_max=1, m=1, max_matches=100))
    got = retrieve_for(source, [0])
    assert got.occurrences == 5000 and got.continuations.shape == (100, 1)
    first = got.continuations[:, 0]
    assert sorted(set(first.tolist())) == list(range(1, 51))
    assert np.bincount(first, minlength=51)[1:].tolist() == [2] * 50  # evenly: 2 of each
    again = retrieve_for(source, [0])
    assert np.array_equal(again.continuations, got.continuations)


@pytest.mark.parametrize("seed", range(6))
def test_sharded_store_is_searched_as_one(seed):
    from rest_core.store.datastore import Datastore

    rng = np.random.default_rng(100 + seed)
    vocab = int(rng.integers(2, 5))
    docs = [rng.integers(0, vocab, int(rng.integers(1, 40))).tolist() for _ in range(30)]
    whole = Datastore.from_token_ids(docs, vocab_size=vocab)
    sharded = Datastore.from_token_ids(docs, vocab_size=vocab, shard_tokens=64)
    assert len(sharded.shards) > 1
    flat = np.concatenate([np.asarray(s.tokens, dtype=np.int64) for s in whole.shards])
    cfg = RetrievalConfig(n_max=6, m=4, max_matches=10**6)
    one, many = DatastoreSource(whole, cfg), DatastoreSource(sharded, cfg)
    for _ in range(20):
        context = rng.integers(0, vocab, int(rng.integers(0, 10)))
        a, b = retrieve_for(one, context), retrieve_for(many, context)
        n, rows = brute_force(flat, context, cfg, whole.separator)
        assert a.suffix_len == b.suffix_len == n
        assert a.occurrences == b.occurrences == len(rows)
        assert rows_of(a) == rows_of(b) == rows


def test_sharded_sampling_covers_every_shard():
    from rest_core.store.datastore import Datastore

    docs = [[0, i % 7 + 1] for i in range(400)]
    store = Datastore.from_token_ids(docs, vocab_size=8, shard_tokens=100)
    assert len(store.shards) > 3
    got = retrieve_for(DatastoreSource(store, RetrievalConfig(n_max=1, m=1, max_matches=40)), [0])
    assert got.occurrences == 400 and got.continuations.shape == (40, 1)
    assert sorted(set(got.continuations[:, 0].tolist())) == list(range(1, 8))


def test_large_vocabulary_tokens():
    sep = 200_000
    tokens = np.array([150_000, 70_000, 5, sep, 150_000, 70_000, 6, sep], dtype=np.uint32)
    got = retrieve_for(
        DatastoreSource(make_store(tokens, sep, dtype=np.uint32), RetrievalConfig(m=2)), [70_000, 150_000, 70_000]
    )
    assert got.suffix_len == 2 and got.occurrences == 2
    assert rows_of(got) == [(5, -1), (6, -1)]


def test_search_shards_on_plain_arrays():
    tokens = np.array([1, 2, 3, 1, 2, 4, 9], dtype=np.uint16)
    sa = pydivsufsort.divsufsort(tokens.astype(np.int32))
    n, count, conts = search_shards([(tokens, sa)], np.array([7, 1, 2]), RetrievalConfig(m=2), 9)
    assert (n, count) == (2, 2)
    assert conts.tolist() == [[3, 1], [4, -1]]  # suffix-array order: sorted continuations


def test_bench_replay_on_a_small_store():
    from rest_core.commands.bench_retrieval import replay
    from rest_core.drafting.context_source import ContextSource
    from rest_core.store.datastore import Datastore

    rng = np.random.default_rng(7)
    docs = [rng.integers(0, 20, 300).tolist() for _ in range(20)]
    store = Datastore.from_token_ids(docs, vocab_size=20)
    cfg = RetrievalConfig(max_matches=50)
    texts = [np.asarray(docs[0][:120], dtype=np.int64), np.asarray(rng.integers(0, 20, 80), dtype=np.int64)]
    stats = replay([DatastoreSource(store, cfg), ContextSource(cfg)], texts, steps=150, c=8)
    assert stats["steps"] == 150
    assert 0 < stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert stats["mean_draft_nodes"] <= 8
    assert stats["tokens_per_step"] > 1.5  # the first text is in the store: long accepted drafts


def test_int64_suffix_array():
    # Stores past 2^31 positions use an int64 suffix array; the search must not care.
    rng = np.random.default_rng(3)
    tokens = random_corpus(rng, 400, 3, 3)
    store = make_store(tokens, 3)
    store64 = SimpleNamespace(
        shards=[SimpleNamespace(tokens=store.shards[0].tokens, sa=store.shards[0].sa.astype(np.int64))], separator=3
    )
    cfg = RetrievalConfig(n_max=5, m=3, max_matches=7)
    for _ in range(10):
        context = rng.integers(0, 3, 6)
        a, b = retrieve_for(DatastoreSource(store, cfg), context), retrieve_for(DatastoreSource(store64, cfg), context)
        assert (a.suffix_len, a.occurrences) == (b.suffix_len, b.occurrences)
        assert np.array_equal(a.continuations, b.continuations)


def test_bench_replay_weighs_sources_like_the_engine():
    """bench-retrieval drafts through the engine's `build_draft`: each source's weight is spread
    over its continuations, so 10 stored continuations do not outvote a twice-as-weighty context."""
    from rest_core.commands.bench_retrieval import replay
    from rest_core.drafting.context_source import ContextSource
    from rest_core.store.datastore import Datastore

    store = Datastore.from_token_ids([[1, 2]] * 10, vocab_size=4)  # after 1 the store says 2 ...
    text = np.array([1, 3] * 4, dtype=np.int64)  # ... but this text always says 3
    cfg = RetrievalConfig(n_min=1, m=1)
    stats = replay([DatastoreSource(store, cfg), ContextSource(cfg, weight=2.0)], [text], steps=5, c=1)
    # Steps: [1] drafts 2 (wrong), [1 3] nothing, then at [1 3 1], [.. 3 1] and [.. 3 1] the
    # context's 3 (right): 3 drafts accepted in 5 steps. Raw counts (10 vs 2) would draft 2 each time.
    assert stats["tokens_per_step"] == pytest.approx(1 + 3 / 5)


WARM_UP_CHECK = """
import numpy as np
from numba.core.registry import CPUDispatcher
import rest_core.drafting.suffix_search, rest_core.drafting.trie, rest_core.drafting.tree
from rest_core.config import RetrievalConfig
from rest_core.store.datastore import Datastore
from rest_core.drafting.draft import build_draft, warm_up
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource

kernels = [f for m in (rest_core.drafting.suffix_search, rest_core.drafting.trie, rest_core.drafting.tree) for f in vars(m).values() if isinstance(f, CPUDispatcher)]
draft = warm_up()
print(len(draft), draft.nodes.tokens.tolist())
compiled = {f: len(f.signatures) for f in kernels}
# A real step after the warm-up, as the engine takes it, must find every kernel ready.
cfg = RetrievalConfig()
for vocab in (300, 70_000):  # uint16 and uint32 stores
    store = Datastore.from_token_ids([[1, 2, 3, 1, 2, 4] * 5], vocab_size=vocab)
    sources = [DatastoreSource(store, cfg), ContextSource(cfg)]
    for s in sources:
        s.reset([5, 1, 2, 3, 1, 2])
    build_draft([s.retrieve() for s in sources], 8, max_depth=6)
print(sorted(f.__name__ for f in kernels if len(f.signatures) > compiled[f]))
"""


def test_warm_up_compiles_every_kernel_a_step_uses():
    import subprocess
    import sys

    pytest.importorskip("numba")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", WARM_UP_CHECK], cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    built, late = out.stdout.strip().splitlines()
    # The tiny draft: the context's one continuation 1 2 (weight 1), then the first of the
    # store's two (weight 1/2 each).
    assert built == "3 [1, 3, 2]"
    assert late == "[]"  # kernels a real step compiled after the warm-up
