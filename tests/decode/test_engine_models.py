"""Greedy identity with `generate` on the architectures whose attention is more than causal
(sliding windows declared every way transformers reads them) and on models whose own
generation config changes greedy decoding (repetition penalty, banned n-grams, ...)."""

from __future__ import annotations

import random

import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import Engine, collect
from rest_core.store.datastore import Datastore
from tests.tiny_models import VOCAB_SIZE, WINDOW, WINDOWED_ARCHITECTURES, tiny_loaded, torch_threads

N_NEW = 30


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


def _prompts(n: int, seed: int, lo: int = 1, hi: int = 24) -> list[list[int]]:
    rnd = random.Random(seed)
    return [[rnd.randrange(256) for _ in range(rnd.randrange(lo, hi))] for _ in range(n)]


def _reference(model, prompt: list[int], n: int = N_NEW) -> list[int]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
    return out[0, len(prompt) :].tolist()


def _stores(prompts: list[list[int]], refs: list[list[int]]) -> dict[str, Datastore]:
    """ "own": the model's greedy outputs (drafts mostly right); "noise": random tokens (mostly wrong)."""
    rnd = random.Random(3)
    noise = [[rnd.randrange(256) for _ in range(200)] for _ in range(5)]
    return {
        "own": Datastore.from_token_ids([p + r for p, r in zip(prompts, refs)], vocab_size=VOCAB_SIZE),
        "noise": Datastore.from_token_ids(noise, vocab_size=VOCAB_SIZE),
    }


def _assert_identity(lm, prompts, refs, stores, drafts=(DraftConfig(c=8, use_context=True), DraftConfig(c=2))):
    accepted = 0
    for name, store in stores.items():
        engine = Engine(lm.model, lm.tokenizer, store)
        for method in ("ar", "rest"):
            for draft in drafts if method == "rest" else drafts[:1]:
                cfg = GenerationConfig(method=method, max_new_tokens=len(refs[0]), draft=draft)
                for prompt, ref in zip(prompts, refs):
                    res = collect(engine.generate(prompt, cfg))
                    assert res.token_ids == ref, (name, method, draft, prompt)
                    if name == "own":
                        accepted += res.totals.draft_tokens
    assert accepted > 0  # drafts were actually accepted, so the tree forward was exercised


@pytest.mark.parametrize("arch", WINDOWED_ARCHITECTURES)
def test_sliding_window_models_equal_generate(arch):
    """Prompts and outputs far longer than the 8-token window: a mask that ignores the window
    lets every layer see past it and changes the tokens."""
    lm = tiny_loaded(arch)
    prompts = _prompts(4, seed=4, lo=WINDOW + 2, hi=24)
    refs = [_reference(lm.model, p) for p in prompts]
    _assert_identity(lm, prompts, refs, _stores(prompts, refs))


def test_mask_layout_reads_every_window_declaration():
    """Config-only: each way transformers declares a window or chunk, as the engine reads it."""
    import transformers as tf

    from rest_core.decode.masks import CHUNKED, FULL, SLIDING, mask_layout

    small = dict(num_hidden_layers=4)
    assert mask_layout(tf.LlamaConfig(**small)) is None
    assert mask_layout(tf.MixtralConfig(**small)) is None  # sliding_window defaults to None
    assert mask_layout(tf.Qwen2Config(sliding_window=8, **small)) is None  # use_sliding_window off
    # Qwen2 with every layer below max_window_layers: no sliding layer, so no window.
    assert mask_layout(tf.Qwen2Config(use_sliding_window=True, sliding_window=8, max_window_layers=4, **small)) is None
    for cfg in (
        tf.MistralConfig(sliding_window=8, **small),
        tf.Phi3Config(sliding_window=8, **small),
        tf.Qwen3MoeConfig(use_sliding_window=True, sliding_window=8, **small),
    ):
        layout = mask_layout(cfg)
        assert (layout.kinds, layout.by_layer_type, layout.window) == ((SLIDING,), False, 8), type(cfg)
    for cfg in (
        tf.Gemma2Config(sliding_window=8, **small),
        tf.Cohere2Config(sliding_window=8, **small),
        tf.GptOssConfig(sliding_window=8, **small),
    ):
        layout = mask_layout(cfg)
        assert set(layout.kinds) == {SLIDING, FULL} and layout.by_layer_type and layout.window == 8, type(cfg)
    llama4 = tf.Llama4TextConfig(attention_chunk_size=8, **small)
    layout = mask_layout(llama4)
    assert set(layout.kinds) == {CHUNKED, FULL} and layout.chunk == 8 and layout.window is None  # chunks, no window
    with pytest.raises(ValueError, match="linear_attention"):
        mask_layout(tf.Qwen2Config(layer_types=["full_attention", "linear_attention"] * 2, **small))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_auto_budget_on_a_short_context_model(arch):
    """budget=auto measures the forward cost within the model's 64 positions (a fixed 256-token
    context overran GPT-2's position table) and still decodes exactly like `generate`."""
    lm = tiny_loaded(arch, max_positions=64)
    prompts = _prompts(3, seed=5)
    refs = [_reference(lm.model, p, 20) for p in prompts]
    engine = Engine(lm.model, lm.tokenizer, _stores(prompts, refs)["own"])
    cfg = GenerationConfig(max_new_tokens=20, draft=DraftConfig(c=64, budget="auto", use_context=True))
    for prompt, ref in zip(prompts, refs):
        assert collect(engine.generate(prompt, cfg)).token_ids == ref
    curve = engine.forward_cost(65)
    assert curve.sizes[-1] == 65
    assert engine.forward_cost(65) is curve  # measured once


# --- the model's own generation config ---------------------------------------------------------


def _frequent(refs: list[list[int]], n: int) -> list[int]:
    from collections import Counter

    return [t for t, _ in Counter(t for r in refs for t in r).most_common(n)]


GENERATION_SETTINGS = {
    "repetition_penalty": lambda refs: {"repetition_penalty": 1.3},
    "no_repeat_ngram_size": lambda refs: {"no_repeat_ngram_size": 2},
    "suppress_tokens": lambda refs: {"suppress_tokens": _frequent(refs, 3)},
    # Multi-token bad words depend on the prefix: banned only right after their first token.
    "bad_words_ids": lambda refs: {"bad_words_ids": [[t] for t in _frequent(refs, 2)] + [r[:2] for r in refs[:3]]},
    # A frequent token as EOS, so the minimum length matters on every prompt; the count of new
    # tokens must be each node's own (its prefix length), not the root's.
    "min_new_tokens": lambda refs: {"eos_token_id": _frequent(refs, 1)[0], "min_new_tokens": 10},
    "penalty+ngram+sequence_bias": lambda refs: {
        "repetition_penalty": 1.2,
        "no_repeat_ngram_size": 3,
        "sequence_bias": {(refs[0][0],): -5.0},
    },
}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("setting", list(GENERATION_SETTINGS))
def test_model_generation_config_applies_like_generate(arch, setting):
    """A checkpoint's generation config changes greedy `generate`; REST must change the same way,
    with each tree node processed under its own prefix. Drafts come from the unprocessed greedy
    output ("own": often right up to where the setting bites) and from noise (mostly wrong)."""
    lm = tiny_loaded(arch)
    prompts = _prompts(6, seed=11)
    plain = [_reference(lm.model, p) for p in prompts]
    for name, value in GENERATION_SETTINGS[setting](plain).items():
        setattr(lm.model.generation_config, name, value)
    refs = [_reference(lm.model, p) for p in prompts]
    assert refs != plain  # the setting changes greedy decoding
    stores = _stores(prompts, plain)
    stores["processed"] = Datastore.from_token_ids([p + r for p, r in zip(prompts, refs)], vocab_size=VOCAB_SIZE)
    for name, store in stores.items():
        engine = Engine(lm.model, lm.tokenizer, store)
        for draft in (DraftConfig(c=8, use_context=True), DraftConfig(c=2)):
            for prompt, ref in zip(prompts, refs):
                res = collect(engine.generate(prompt, GenerationConfig(max_new_tokens=N_NEW, draft=draft)))
                assert res.token_ids == ref, (setting, name, draft, prompt)
    ar = GenerationConfig(method="ar", max_new_tokens=N_NEW)
    assert [collect(engine.generate(p, ar)).token_ids for p in prompts] == refs


@pytest.mark.parametrize(
    "settings, match",
    [
        ({"num_beams": 2}, "beam_search"),
        ({"penalty_alpha": 0.6, "top_k": 4}, "contrastive_search"),
        ({"guidance_scale": 1.5}, "guidance_scale"),
    ],
)
def test_unsupported_generation_settings_are_refused(settings, match):
    lm = tiny_loaded("llama")
    for name, value in settings.items():
        setattr(lm.model.generation_config, name, value)
    with pytest.raises(ValueError, match=match):
        Engine(lm.model, lm.tokenizer).generate([1, 2, 3], GenerationConfig(method="ar", max_new_tokens=4))


def test_sampling_only_settings_are_refused_when_sampling():
    from rest_core.config import SamplingConfig

    lm = tiny_loaded("llama")
    lm.model.generation_config.min_p = 0.1
    engine = Engine(lm.model, lm.tokenizer)
    assert collect(
        engine.generate([1, 2, 3], GenerationConfig(method="ar", max_new_tokens=4))
    ).token_ids  # greedy: unused
    with pytest.raises(ValueError, match="min_p"):
        engine.generate([1, 2, 3], GenerationConfig(max_new_tokens=4, sampling=SamplingConfig(temperature=0.8)))


# --- sampling: the same distribution as generate(do_sample=True, temperature=T, top_p=P) ---------


def test_resolve_sampling_takes_the_models_top_k_when_unset():
    from rest_core.config import SamplingConfig
    from rest_core.decode.processors import resolve_sampling

    model = tiny_loaded("llama").model
    assert resolve_sampling(model, SamplingConfig(temperature=0.7)).top_k == 50  # transformers' default
    assert resolve_sampling(model, SamplingConfig(temperature=0.7, top_k=5)).top_k == 5  # set explicitly
    assert resolve_sampling(model, SamplingConfig()).top_k == 0  # greedy: no filter
    model.generation_config.top_k = 20
    assert resolve_sampling(model, SamplingConfig(temperature=0.7)).top_k == 20  # the checkpoint's


@pytest.mark.parametrize("settings", [{}, {"repetition_penalty": 1.3, "top_k": 30}])
def test_sampled_distribution_equals_generate(settings):
    """The distribution the engine samples from after a prompt is exactly the one
    `generate(do_sample=True, temperature=T, top_p=P)` samples from (its processed scores)."""
    from rest_core.config import SamplingConfig
    from rest_core.decode.processors import model_processors, resolve_sampling
    from rest_core.decode.sampling import process_logits

    model = tiny_loaded("llama", peaked=False).model  # flat: top-k cuts real probability mass
    for name, value in settings.items():
        setattr(model.generation_config, name, value)
    prompt = _prompts(1, seed=6, lo=12)[0]
    for temperature, top_p in [(1.0, 1.0), (0.7, 0.95)]:
        out = model.generate(
            torch.tensor([prompt]),
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=1,
            output_scores=True,
            return_dict_in_generate=True,
        )
        expected = out.scores[0][0].double().softmax(-1)
        cfg = resolve_sampling(model, SamplingConfig(temperature=temperature, top_p=top_p))
        processors = model_processors(model, cfg, len(prompt), 1)
        with torch.no_grad():
            row = model(torch.tensor([prompt])).logits[0, -1]
        scores = processors.after(prompt)([], row) if processors else row.float()
        torch.testing.assert_close(process_logits(scores, cfg), expected, rtol=0, atol=1e-6)
        assert int((expected > 0).sum()) <= settings.get("top_k", 50)


def test_engine_samples_only_within_the_default_top_k():
    """End to end: with top_k unset, every sampled token lies in the model's top 50 at its
    position, as with `generate` (the flat tiny model puts most mass outside it)."""
    from rest_core.config import SamplingConfig

    lm = tiny_loaded("llama", peaked=False)
    prompt = _prompts(1, seed=7, lo=12)[0]
    store = Datastore.from_token_ids(_prompts(4, seed=8, lo=100, hi=101), vocab_size=VOCAB_SIZE)
    engine = Engine(lm.model, lm.tokenizer, store)
    for method in ("ar", "rest"):
        cfg = GenerationConfig(
            method=method,
            max_new_tokens=40,
            draft=DraftConfig(c=8, use_context=True),
            sampling=SamplingConfig(temperature=1.0, seed=1),
        )
        out = collect(engine.generate(prompt, cfg)).token_ids
        with torch.no_grad():
            logits = lm.model(torch.tensor([prompt + out])).logits[0, len(prompt) - 1 : -1]  # (n, V)
        kth = logits.topk(50, dim=-1).values[:, -1]
        assert all(logits[i, t] >= kth[i] for i, t in enumerate(out)), method
