"""The engine on tiny random models: greedy identity with `generate`, sampling exactness,
the KV cache after acceptance, event contents, multi-turn reuse and bad input."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from rest_core.budget.auto import AutoBudget
from rest_core.budget.cost_curve import CostCurve
from rest_core.config import ConfigError, DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig
from rest_core.decode.engine import Engine, collect
from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE
from rest_core.drafting.draft import build_draft
from rest_core.drafting.source import Retrieved
from rest_core.drafting.tree import tree_attention_mask
from rest_core.store.datastore import Datastore
from tests.tiny_models import EOS_ID, VOCAB_SIZE, tiny_loaded, torch_threads

N_NEW = 24


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


def _prompts(n: int, seed: int) -> list[list[int]]:
    rnd = random.Random(seed)
    return [[rnd.randrange(256) for _ in range(rnd.randrange(1, 24))] for _ in range(n)]


def _reference(model, prompt: list[int], n: int = N_NEW) -> list[int]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
    return out[0, len(prompt) :].tolist()


@pytest.fixture(scope="module", params=["llama", "qwen2", "gpt2"])
def setup(request):
    """A tiny model, prompts, their greedy references and two datastores: one built from the
    model's own greedy output (drafts often right), one from random tokens (mostly wrong)."""
    lm = tiny_loaded(request.param)
    prompts = _prompts(10, seed=1)
    refs = [_reference(lm.model, p) for p in prompts]
    own_docs = [p + r for p, r in zip(prompts, refs)]
    # Continuations of other prompts too: partly right, partly wrong drafts.
    own_docs += [r for r in (_reference(lm.model, p, 32) for p in _prompts(6, seed=2))]
    rnd = random.Random(3)
    noise = [[rnd.randrange(256) for _ in range(200)] for _ in range(5)]
    return {
        "lm": lm,
        "prompts": prompts,
        "refs": refs,
        "own": Datastore.from_token_ids(own_docs, vocab_size=VOCAB_SIZE),
        "noise": Datastore.from_token_ids(noise, vocab_size=VOCAB_SIZE),
    }


DRAFTS = {
    "c1": DraftConfig(c=1),
    "c4": DraftConfig(c=4),
    "c16+context": DraftConfig(c=16, use_context=True),
    "c64-context-only": DraftConfig(c=64, use_datastore=False, use_context=True),
    "c8-weighted": DraftConfig(c=8, use_context=True, datastore_weight=0.3, context_weight=2.0),
}


@pytest.mark.parametrize("store", ["own", "noise"])
@pytest.mark.parametrize("draft", list(DRAFTS))
def test_greedy_equals_generate(setup, store, draft):
    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup[store])
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DRAFTS[draft])
    accepted = 0
    for prompt, ref in zip(setup["prompts"], setup["refs"]):
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref, (prompt, draft, store)
        accepted += res.totals.draft_tokens
    if store == "own" and draft != "c1":
        assert accepted > 0  # the equivalence was tested with drafts actually accepted


def test_selector_hook_chooses_the_draft(setup):
    """A custom selector (here: the deepest single chain of the trie) replaces top-c, and the
    output is still exactly the greedy reference."""
    picked = []

    def first_chain(trie, c):
        node, chain = int(np.argmax(trie.depths == 1)), []  # first child of the root
        while node >= 0 and len(chain) < c:
            chain.append(node)
            kids = np.flatnonzero(trie.parents == node)
            node = int(kids[0]) if kids.size else -1
        picked.append(len(chain))
        return np.array(chain, dtype=np.int64)

    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup["own"], selector=first_chain)
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DraftConfig(c=6))
    for prompt, ref in zip(setup["prompts"][:4], setup["refs"][:4]):
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref
        for ev in res.events:
            if ev.draft is not None:  # a chain: every node's parent is the previous node
                assert ev.draft.parents.tolist() == list(range(-1, len(ev.draft) - 1))
    assert picked and max(picked) > 1


def test_ar_equals_generate(setup):
    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup["own"])
    for prompt, ref in zip(setup["prompts"], setup["refs"]):
        res = collect(engine.generate(prompt, GenerationConfig(method="ar", max_new_tokens=N_NEW)))
        assert res.token_ids == ref
        assert res.totals.steps == len(ref)
        assert all(e.trie is None and e.draft is None and e.c == 0 for e in res.events)


def test_auto_budget_equals_generate(setup):
    curve = CostCurve((1, 2, 4, 8, 16, 32, 64), (40.0, 42.0, 56.0, 65.0, 72.0, 89.0, 138.0))  # SmolLM2 on CPU
    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup["own"], cost_curve=curve)
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DraftConfig(c=32, budget="auto", use_context=True))
    budgets = []
    for prompt, ref in zip(setup["prompts"], setup["refs"]):
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref
        budgets += [e.c for e in res.events]
        for e in res.events:
            assert 0 <= e.c <= 32 and len(e.draft_idx) <= e.c
    assert len(set(budgets)) > 1  # chosen per step


def test_auto_budget_probes_are_marked_and_lossless(setup, monkeypatch):
    """A probe (the auto budget drafts nothing to time a plain step) says so in its event, drafts
    nothing and changes no token."""
    import rest_core.budget.auto as auto

    monkeypatch.setattr(auto, "PROBE_BELOW", float("inf"))  # every drafted step is marginal
    monkeypatch.setattr(auto, "PROBE_GAP", 1)
    curve = CostCurve((1, 2, 4, 8, 16, 32), (40.0, 42.0, 56.0, 65.0, 72.0, 89.0))
    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup["own"], cost_curve=curve)
    for _ in range(3):  # drafted steps' costs correct the curve: q = 1's cost is then due a timing
        engine.auto_budget.costs.observe(9, 90.0)
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DraftConfig(c=8, budget="auto"))
    events = []
    for prompt, ref in zip(setup["prompts"][:4], setup["refs"]):
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref
        events += res.events
    probes = [e for e in events if e.probe]
    assert probes and len(probes) < len(events)
    assert all(e.draft_idx == () and e.c == 0 and e.trie is not None for e in probes)
    assert not any(e.probe for e in collect(engine.generate(setup["prompts"][0], cfg.with_method("ar"))).events)


def test_an_engine_that_does_not_learn_across_calls_starts_each_from_the_curve_and_the_prior(setup):
    """learn_across_calls=False (the app's engines): what the engine's budget holds (here a
    size-17 forward seen costing 5 s, as a busy page can make it look) shapes no generation,
    and no generation teaches it; the default engine carries it and stops drafting."""
    curve = CostCurve((1, 2, 4, 8, 16, 32), (40.0, 42.0, 56.0, 65.0, 72.0, 89.0))
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DraftConfig(c=16, budget="auto", use_context=True))
    prompt, ref = setup["prompts"][0], setup["refs"][0]
    drafted = {}
    for across in (True, False):
        engine = Engine(
            setup["lm"].model, setup["lm"].tokenizer, setup["own"], cost_curve=curve, learn_across_calls=across
        )
        for q in range(2, 18):
            for _ in range(3):
                engine.auto_budget.costs.observe(q, 5000.0)
        clock = engine.auto_budget.costs.clock
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref
        drafted[across] = res.events[0].c
        assert (engine.auto_budget.costs.clock == clock) is not across  # learned into only when it carries
    assert drafted == {True: 0, False: drafted[False]} and drafted[False] > 0


def test_sliding_window_model_equals_generate():
    """Gemma-3-like layers with an 8-token window: sequences well past the window need the
    per-layer-type masks (a single full mask gives different tokens)."""
    lm = tiny_loaded("gemma3")
    prompts = _prompts(5, seed=4)
    refs = [_reference(lm.model, p, 30) for p in prompts]
    engine = Engine(
        lm.model, lm.tokenizer, Datastore.from_token_ids([p + r for p, r in zip(prompts, refs)], VOCAB_SIZE)
    )
    assert engine._layout is not None and engine._layout.window == 8  # the window the tree masks use
    for method in ("ar", "rest"):
        cfg = GenerationConfig(method=method, max_new_tokens=30, draft=DraftConfig(c=8, use_context=True))
        for prompt, ref in zip(prompts, refs):
            assert collect(engine.generate(prompt, cfg)).token_ids == ref


def test_eos_stops_like_generate():
    lm = tiny_loaded("llama")
    hits = 0
    prompts = _prompts(30, seed=11)
    refs = [_reference(lm.model, p, 40) for p in prompts]
    store = Datastore.from_token_ids([p + r for p, r in zip(prompts, refs)], vocab_size=VOCAB_SIZE)
    engine = Engine(lm.model, lm.tokenizer, store)
    for prompt, ref in zip(prompts, refs):
        res = collect(engine.generate(prompt, GenerationConfig(max_new_tokens=40, draft=DraftConfig(c=8))))
        assert res.token_ids == ref
        if ref[-1] == EOS_ID:
            hits += 1
            assert res.finish_reason == "eos" and EOS_ID not in res.token_ids[:-1]
        else:
            assert res.finish_reason == "length" and len(res.token_ids) == 40
    assert hits >= 3  # the tiny Llama does emit EOS on some of these prompts


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_sampling_rest_equals_ar_with_the_same_seed(arch):
    """One uniform per emitted token, drawn in order: REST sampling and plain sampling with the
    same seed emit the same tokens (the models are float64, so the distributions agree)."""
    lm = tiny_loaded(arch)
    prompts = _prompts(6, seed=5)
    docs = [p + _reference(lm.model, p, 30) for p in prompts]
    engine = Engine(lm.model, lm.tokenizer, Datastore.from_token_ids(docs, vocab_size=VOCAB_SIZE))
    drafted = 0
    for i, prompt in enumerate(prompts):
        for sampling in (
            SamplingConfig(temperature=0.7, seed=i),
            SamplingConfig(temperature=1.0, top_p=0.9, seed=100 + i),
            SamplingConfig(temperature=1.2, top_k=5, top_p=0.95, seed=200 + i),
        ):
            ar = collect(
                engine.generate(prompt, GenerationConfig(method="ar", max_new_tokens=N_NEW, sampling=sampling))
            )
            cfg = GenerationConfig(max_new_tokens=N_NEW, sampling=sampling, draft=DraftConfig(c=16, use_context=True))
            rest = collect(engine.generate(prompt, cfg))
            assert rest.token_ids == ar.token_ids
            again = collect(engine.generate(prompt, cfg))
            assert again.token_ids == rest.token_ids  # a fixed seed reproduces
            drafted += rest.totals.draft_tokens
    assert drafted > 0


def test_sampling_distribution_statistical():
    """First two tokens under REST sampling vs the model's exact probabilities (chi-square).

    Drafts cover the likely first tokens and their continuations, so most samples go through
    the acceptance rule. Seeded, so not flaky; a rule that favoured drafted tokens (as the
    reference implementation's does) fails it by a wide margin.
    """
    lm = tiny_loaded("llama")
    model = lm.model
    prompt = [72, 101, 108, 108, 111]
    sampling = SamplingConfig(temperature=1.0, top_k=3)

    from rest_core.decode.sampling import process_logits

    with torch.no_grad():
        p1 = process_logits(model(torch.tensor([prompt])).logits[0, -1], sampling)
    firsts = torch.nonzero(p1).flatten().tolist()
    expected = {}
    docs = []
    for a in firsts:
        with torch.no_grad():
            p2 = process_logits(model(torch.tensor([prompt + [a]])).logits[0, -1], sampling)
        for b in torch.nonzero(p2).flatten().tolist():
            expected[(a, b)] = float(p1[a] * p2[b])
            docs.append(prompt + [a, b])
    # The store drafts only some of the pairs, so both descend and stop branches are used.
    engine = Engine(model, lm.tokenizer, Datastore.from_token_ids(docs[::2], vocab_size=VOCAB_SIZE))
    n = 1500
    counts = {k: 0 for k in expected}
    for seed in range(n):
        cfg = GenerationConfig(max_new_tokens=2, sampling=replace(sampling, seed=seed), draft=DraftConfig(c=8))
        ids = tuple(collect(engine.generate(prompt, cfg)).token_ids)
        counts[ids] += 1
    chi2 = sum((counts[k] - n * p) ** 2 / (n * p) for k, p in expected.items())
    dof = len(expected) - 1
    # p = 0.001 critical values: dof 8 -> 26.1; a generous bound for any dof <= 8.
    assert dof <= 8
    assert chi2 < 26.1, (chi2, counts, expected)
    # The same data against a distribution biased toward drafted pairs must be rejected.
    drafted = {tuple(d[-2:]) for d in docs[::2]}
    biased = {k: p * (1.5 if k in drafted else 1.0) for k, p in expected.items()}
    z = sum(biased.values())
    chi2_biased = sum((counts[k] - n * p / z) ** 2 / (n * p / z) for k, p in biased.items())
    assert chi2_biased > 26.1


def test_kv_cache_after_acceptance_equals_plain_cache():
    from transformers import DynamicCache

    lm = tiny_loaded("qwen2")
    prompt = _prompts(1, seed=7)[0]
    ref = _reference(lm.model, prompt, 30)
    store = Datastore.from_token_ids([prompt + ref], vocab_size=VOCAB_SIZE)
    engine = Engine(lm.model, lm.tokenizer, store)
    events = list(engine.generate(prompt, GenerationConfig(max_new_tokens=30, draft=DraftConfig(c=8))))
    assert any(len(e.accepted) > 1 for e in events)  # multi-token acceptance happened
    state = engine._saved
    assert state is not None and state.ids == prompt + ref
    plain = DynamicCache()
    with torch.no_grad():
        lm.model(input_ids=torch.tensor([state.ids[:-1]]), cache=plain, use_cache=True)
    assert len(state.cache.layers) == len(plain.layers)
    for ours, theirs in zip(state.cache.layers, plain.layers):
        assert ours.keys.shape == theirs.keys.shape
        torch.testing.assert_close(ours.keys, theirs.keys, rtol=0, atol=1e-10)
        torch.testing.assert_close(ours.values, theirs.values, rtol=0, atol=1e-10)


def test_commit_keeps_a_branching_path():
    """Verify a branching tree, keep the path through the second branch (rows 2 and 4, not
    contiguous): the cache must equal plain decoding's, and the next logits must match too."""
    from transformers import DynamicCache

    from rest_core.decode.kv import keep_rows
    from rest_core.decode.masks import tree_forward
    from rest_core.drafting.trie import Trie

    lm = tiny_loaded("qwen2")
    model = lm.model
    ctx, root = [5, 6, 7, 8, 9], 10
    # rows: 1 = a (20), 2 = b (21), 3 = a->d (22), 4 = b->c (23)
    draft = Trie(
        np.array([20, 21, 22, 23]),
        np.array([-1, -1, 0, 1]),
        np.array([1, 1, 2, 2]),
        np.ones(4),
        np.ones(4, np.uint8),
    )
    cache = DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.tensor([ctx]), cache=cache, use_cache=True)
        ids = torch.tensor([[root, 20, 21, 22, 23]])
        from rest_core.drafting.tree import position_offsets

        out, _ = tree_forward(
            model, ids, cache, len(ctx), tree_attention_mask(draft), position_offsets(draft), kind="bool", layout=None
        )
        tree_logits = out.logits[0]
        keep_rows(cache, len(ctx), [2, 4])
        plain = DynamicCache()
        plain_logits = model(input_ids=torch.tensor([ctx + [root, 21, 23]]), cache=plain, use_cache=True).logits[0]
    torch.testing.assert_close(tree_logits[[0, 2, 4]], plain_logits[-3:], rtol=0, atol=1e-10)
    for ours, theirs in zip(cache.layers, plain.layers):
        assert ours.keys.shape == theirs.keys.shape
        torch.testing.assert_close(ours.keys, theirs.keys, rtol=0, atol=1e-10)
        torch.testing.assert_close(ours.values, theirs.values, rtol=0, atol=1e-10)


def test_events_are_consistent(setup):
    engine = Engine(setup["lm"].model, setup["lm"].tokenizer, setup["own"])
    cfg = GenerationConfig(max_new_tokens=N_NEW, draft=DraftConfig(c=8, use_context=True))
    for prompt in setup["prompts"][:5]:
        events = list(engine.generate(prompt, cfg))
        new = drafted = 0
        for i, e in enumerate(events):
            assert e.step == i and e.method == "rest"
            assert e.finished == (i == len(events) - 1)
            assert len(e.tokens) >= 1 and len(e.token_sources) == len(e.tokens)
            assert e.accepted_len == len(e.accepted) == sum(1 for s in e.token_sources if s)
            assert len(e.tokens) - len(e.accepted) in (0, 1)  # the model's own token ends a step
            assert [m.source_bit for m in e.matches] == [SOURCE_DATASTORE, SOURCE_CONTEXT]
            assert [m.source for m in e.matches] == ["datastore", "context"]
            if e.draft is not None:
                assert e.trie is not None and len(e.draft) == len(e.draft_idx) <= e.c == 8
                assert np.array_equal(e.draft.tokens, e.trie.tokens[list(e.draft_idx)])
                # the accepted nodes form a path from the root, drafting the emitted tokens
                parent = -1
                for k, node in enumerate(e.accepted):
                    assert e.draft.parents[node] == parent and e.draft.tokens[node] == e.tokens[k]
                    assert e.token_sources[k] & (SOURCE_DATASTORE | SOURCE_CONTEXT)
                    assert e.token_sources[k] == int(e.draft.sources[node])
                    parent = node
                assert tree_attention_mask(e.draft).shape == (len(e.draft) + 1,) * 2
            else:
                assert e.accepted == () and e.draft_idx == ()
            new += len(e.tokens)
            drafted += len(e.accepted)
            tot = e.totals
            assert tot.new_tokens == new and tot.steps == i + 1 and tot.draft_tokens == drafted
            assert tot.prompt_tokens == len(prompt) and tot.prefill_ms >= 0 and tot.elapsed_s > 0
            assert tot.mean_generated_length == pytest.approx(new / (i + 1))
            # The totals accumulate the steps' own timings (prefill apart).
            assert tot.elapsed_s == pytest.approx(sum(x.timings.total_ms for x in events[: i + 1]) / 1000)
            assert tot.retrieval_ms == pytest.approx(
                sum(x.timings.retrieve_ms + x.timings.draft_ms for x in events[: i + 1])
            )
        assert events[-1].finish_reason in ("eos", "length")


def test_no_match_is_a_plain_step():
    lm = tiny_loaded("llama")
    store = Datastore.from_token_ids([[300 % 256] * 3], vocab_size=VOCAB_SIZE)  # matches almost nothing
    engine = Engine(lm.model, lm.tokenizer, store)
    prompt = [1, 2, 3]
    cfg = GenerationConfig(max_new_tokens=5, retrieval=RetrievalConfig(n_min=2), draft=DraftConfig(c=4))
    events = list(engine.generate(prompt, cfg))
    assert [t for e in events for t in e.tokens] == _reference(lm.model, prompt, 5)
    for e in events:
        assert e.draft is None and len(e.tokens) == 1 and e.token_sources == (0,)


def test_multi_turn_reuses_the_cache():
    lm = tiny_loaded("llama")
    calls = []
    handle = lm.model.register_forward_pre_hook(
        lambda mod, args, kw: calls.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        engine = Engine(lm.model, lm.tokenizer, None)
        turn1 = _prompts(1, seed=9)[0] + [10, 20, 30]
        cfg = GenerationConfig(max_new_tokens=10, draft=DraftConfig(use_context=True))
        first = collect(engine.generate(turn1, cfg)).token_ids
        turn2 = turn1 + first + [40, 50, 60, 70]
        calls.clear()
        second = collect(engine.generate(turn2, cfg)).token_ids
        # Only the new tokens (the last generated token + the new user turn, minus the root) were prefilled.
        assert calls[0] == len(first[-1:]) + 4 - 1
        assert second == _reference(lm.model, turn2, 10)
        # A different conversation starts over (no shared prefix beyond chance).
        calls.clear()
        other = [99, 98, 97]
        assert collect(engine.generate(other, cfg)).token_ids == _reference(lm.model, other, 10)
        assert calls[0] == len(other) - 1  # the whole prompt but its last token (the first root)
    finally:
        handle.remove()


def test_context_limit_stops_with_length():
    lm = tiny_loaded("llama", max_positions=40)
    engine = Engine(lm.model, lm.tokenizer, None)
    prompt = list(range(30))
    res = collect(engine.generate(prompt, GenerationConfig(max_new_tokens=50, draft=DraftConfig(use_context=True))))
    assert len(res.token_ids) == 10 and res.finish_reason == "length"
    with pytest.raises(ValueError, match="context is 40 tokens"):
        engine.generate(list(range(40)), GenerationConfig())


def test_bad_input_errors_before_any_work():
    lm = tiny_loaded("llama")
    calls = []
    handle = lm.model.register_forward_pre_hook(lambda *a, **k: calls.append(1))
    try:
        engine = Engine(lm.model, lm.tokenizer, None)
        with pytest.raises(ValueError, match="empty"):
            engine.generate([], GenerationConfig())
        with pytest.raises(ValueError, match="vocabulary"):
            engine.generate([1, VOCAB_SIZE + 5], GenerationConfig())
        with pytest.raises(ValueError, match="token ids"):
            engine.generate(["a", "b"], GenerationConfig())
        with pytest.raises(ValueError, match="empty"):
            engine.encode("", chat=False)
        with pytest.raises(ValueError, match="empty"):
            engine.encode("", chat=True)
        with pytest.raises(ConfigError, match="max_new_tokens"):
            GenerationConfig(max_new_tokens=0)
        with pytest.raises(ConfigError, match="c \\(max draft tokens\\)"):
            DraftConfig(c=0)
        with pytest.raises(ConfigError, match="n_max"):
            RetrievalConfig(n_min=5, n_max=3)
        assert calls == []
    finally:
        handle.remove()


def test_encode_chat_and_plain():
    lm = tiny_loaded("llama")
    engine = Engine(lm.model, lm.tokenizer, None)
    assert lm.tokenizer.decode(engine.encode("hi", chat=True)) == "<|user|>hi\n<|assistant|>"
    assert lm.tokenizer.decode(engine.encode("hi")) == "hi"
    conv = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    assert lm.tokenizer.decode(engine.encode(conv)) == "<|user|>a\n<|assistant|>b\n<|user|>c\n<|assistant|>"


def _one_source(rows: list[list[int]]) -> Retrieved:
    return Retrieved(SOURCE_DATASTORE, 1, (0,), len(rows), np.array(rows, dtype=np.int64))


def test_auto_budget_learns_the_observed_forward_cost():
    curve = CostCurve((1, 2, 4, 8), (10.0, 11.0, 12.0, 13.0))
    budget = AutoBudget(curve)
    assert budget.corrected_curve() is curve  # nothing observed yet
    one_node = build_draft([_one_source([[5]])], 1)
    assert one_node.q == 2  # the root and one node
    for _ in range(3):
        assert budget.corrected_curve() is curve  # fewer than 3 observations of q = 2: not trusted yet
        budget.learn(one_node, (), overhead_ms=1.0, forward_ms=22.0)  # the machine got twice as slow
    fixed = budget.corrected_curve()
    assert float(fixed(2)) == pytest.approx(22.0)
    assert float(fixed(8)) == pytest.approx(26.0)  # unobserved sizes scaled by the same drift
    assert list(fixed.ms) == sorted(fixed.ms)


def test_auto_budget_drafts_what_pays_and_learns_from_outcomes():
    from rest_core.budget.acceptance import FEATURE_NAMES, AcceptanceModel

    # A star of 8 first tokens seen 8, 7, ..., 1 times; a model that believes each node's share.
    w = np.zeros(len(FEATURE_NAMES))
    w[FEATURE_NAMES.index("logit_share")] = 1.0
    budget = AutoBudget(CostCurve((1, 64), (10.0, 136.0)), AcceptanceModel(w))
    retrieved = [_one_source([[t] for t in range(8) for _ in range(8 - t)])]
    draft = build_draft(retrieved, 8, plan=budget.plan)
    # Each extra node costs 2 ms on a 10 ms step: only shares above ~1/6 pay (8/36, 7/36).
    assert draft.nodes.tokens.tolist() == [0, 1] and draft.c == 2
    assert draft.predicted == pytest.approx([8 / 36, 7 / 36])
    for _ in range(30):  # neither is ever accepted: the model learns that, and drafts nothing
        budget.learn(draft, (), overhead_ms=1.0, forward_ms=12.0, retrieved=retrieved)
    assert len(build_draft(retrieved, 8, plan=budget.plan)) == 0
    # What the datastore alone taught leaves the prior of another set of sources untouched.
    with_context = retrieved + [Retrieved(SOURCE_CONTEXT, 1, (0,), 1, np.array([[9]], dtype=np.int64))]
    assert budget.model_for(with_context).recalibration.tolist() == [0.0, 0.0, 0.0, 1.0]
    budget.curve = CostCurve((1, 64), (10.0, 10.0))  # a GPU: every node is free
    budget._observed.clear()
    assert build_draft(retrieved, 8, plan=budget.plan).c == 8
