"""Lazy logits (`rest_core.decode.heads`): the output head runs only over the rows the acceptance walk
visits, gives the model's own logits there, and is refused for models it cannot reproduce."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig, SamplingConfig
from rest_core.decode.engine import Engine, collect
from rest_core.decode.heads import LazyLogits, OutputHead, likeliest_chains
from rest_core.decode.sampling import Uniforms, accept
from rest_core.store.datastore import Datastore
from tests.tiny_models import ARCHITECTURES, VOCAB_SIZE, tiny_loaded, tiny_model, torch_threads


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_head_splits_off_every_covered_architecture(arch):
    """Every architecture the identity tests cover runs with lazy logits (so those tests prove
    it lossless), and body + head gives the model's own logits."""
    model = tiny_model(arch)
    head = OutputHead.of(model)
    assert head is not None
    ids = torch.tensor([[5, 9, 200, 31, 7, 7, 64]])
    with torch.inference_mode():
        want = model(input_ids=ids, use_cache=False).logits
        got = head(head.hidden(input_ids=ids, use_cache=False))
    torch.testing.assert_close(got, want)


def test_final_logit_softcapping_is_applied():
    """Gemma 2/3 soft-cap their logits after the head: the split head does too (without it the
    check refuses the split)."""
    model = tiny_model("gemma3")
    model.config.final_logit_softcapping = 0.5  # small, so it changes every logit
    head = OutputHead.of(model)
    assert head is not None and head.softcap == 0.5
    head.softcap = None
    assert not head.reproduces(model)


def test_a_model_with_its_own_logit_processing_keeps_the_full_forward():
    """A model whose forward changes the head's output in a way we do not know is not split:
    the engine then verifies with the full forward, still identical to generate."""
    model = tiny_model("llama")
    inner = model.forward

    def scaled_forward(*args, **kwargs):
        out = inner(*args, **kwargs)
        out.logits = out.logits.flip(-1)  # unknown post-processing: reversed vocabulary
        return out

    model.forward = scaled_forward
    assert OutputHead.of(model) is None
    lm = tiny_loaded("llama")
    engine = Engine(model, lm.tokenizer, None)
    assert engine.output_head() is None
    prompt = list(b"abcabcabcabc")
    ref = model.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False)[0, len(prompt) :].tolist()
    cfg = GenerationConfig(max_new_tokens=16, draft=DraftConfig(c=4, use_datastore=False, use_context=True))
    assert collect(engine.generate(prompt, cfg)).token_ids == ref
    assert Engine(lm.model, lm.tokenizer, None, lazy_logits=False).output_head() is None


def _tree_rows(q: int = 5, hidden: int = 16, vocab: int = 40, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(q, hidden, generator=gen, dtype=torch.float64)
    lin = torch.nn.Linear(hidden, vocab, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.randn(vocab, hidden, generator=gen, dtype=torch.float64) * 3)
    full = lin(h).detach()
    return h, lin, full


def test_the_walk_scores_only_the_rows_it_reaches_and_picks_the_same_tokens():
    h, lin, full = _tree_rows()
    best = full.argmax(-1).tolist()
    # Row 1 drafts the root's argmax (accepted), row 2 a sibling (never reached), row 3 a wrong
    # child of row 1 (the walk stops at row 1), row 4 a child of row 2.
    parents = np.array([-1, 0, 0, 1, 2])
    children = {(0, best[0]): 1, (0, (best[0] + 1) % 40): 2, (1, (best[1] + 1) % 40): 3, (2, 7): 4}
    calls = []

    def head(x):
        calls.append(x.shape[0])
        return lin(x)

    lazy = LazyLogits(h, head, likeliest_chains(parents, np.array([np.inf, 0.9, 0.05, 0.2, 0.01])))
    got = accept(lazy, children, SamplingConfig(temperature=0.0), None, max_tokens=10)
    want = accept(full, children, SamplingConfig(temperature=0.0), None, max_tokens=10)
    assert got == want == ([best[0], best[1]], [1])
    assert calls == [3]  # one batch: the root's likeliest chain 0 -> 1 -> 3
    assert lazy.scored == 3 and 2 not in lazy._rows and 4 not in lazy._rows


def test_lazy_sampling_draws_the_same_tokens():
    h, lin, full = _tree_rows(seed=3)
    parents = np.array([-1, 0, 0, 1, 2])
    cfg = SamplingConfig(temperature=1.0, top_k=0, top_p=1.0, seed=0)
    probs = torch.softmax(full, -1)
    # Draft the likeliest tokens so the walk goes deep on some seeds.
    top = probs.argmax(-1).tolist()
    children = {(0, top[0]): 1, (0, 3): 2, (1, top[1]): 3, (2, 5): 4}
    chain = likeliest_chains(parents, np.array([np.inf, 0.9, 0.1, 0.5, 0.05]))
    for seed in range(20):
        lazy = LazyLogits(h, lin, chain)
        got = accept(lazy, children, cfg, Uniforms(seed), max_tokens=6)
        want = accept(full, children, cfg, Uniforms(seed), max_tokens=6)
        assert got == want
        torch.testing.assert_close(lazy[0], full[0])


def test_likeliest_chains_follow_the_best_child():
    parents = np.array([-1, 0, 0, 1, 1, 2, 4])
    chain = likeliest_chains(parents, np.array([np.inf, 0.2, 0.7, 0.1, 0.15, 0.6, 0.1]))
    assert chain(0) == [0, 2, 5]
    assert chain(1) == [1, 4, 6]
    assert chain(3) == [3]


def test_engine_scores_fewer_rows_than_it_verifies_and_stays_identical(monkeypatch):
    """A real generation: lazy and full logits emit the same tokens, and the head scores fewer
    rows than the forwards verified (rejected branches are never scored)."""
    lm = tiny_loaded("llama")
    rnd = random.Random(0)
    prompt = [rnd.randrange(256) for _ in range(12)]
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt) :].tolist()
    # The model's own continuation, cut at every third token and followed by wrong tokens:
    # branching tries whose wrong branches get verified and rejected.
    docs = [prompt + ref[:k] + [rnd.randrange(256) for _ in range(6)] for k in range(0, 40, 3)]
    store = Datastore.from_token_ids(docs, vocab_size=VOCAB_SIZE)
    cfg = GenerationConfig(max_new_tokens=40, draft=DraftConfig(c=16))  # more nodes than one chain holds
    lazy_engine = Engine(lm.model, lm.tokenizer, store)
    scored = []
    head = lazy_engine.output_head()
    assert head is not None

    def counting(x):
        scored.append(x.shape[0])
        return head(x)

    counting.body = head.body
    monkeypatch.setattr(lazy_engine, "output_head", lambda: counting)
    lazy = collect(lazy_engine.generate(prompt, cfg))
    full = collect(Engine(lm.model, lm.tokenizer, store, lazy_logits=False).generate(prompt, cfg))
    assert lazy.token_ids == full.token_ids == ref
    verified = sum(1 + len(e.draft_idx) for e in lazy.events if e.draft_idx)
    assert lazy.totals.draft_tokens > 0
    assert 0 < sum(scored) < verified
