"""A damaged datastore never reaches the model: refused when opened for an engine, and draft
ids past the vocabulary are never drafted even from a store built by hand in memory."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import Engine, collect
from rest_core.store.build import build_datastore
from rest_core.store.datastore import Datastore
from rest_core.store.format import DatastoreError, Shard
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads


@pytest.fixture(scope="module")
def lm():
    with torch_threads(1):
        yield tiny_loaded("llama")


def test_engine_refuses_a_store_with_ids_past_the_vocabulary(lm, tmp_path):
    out = tmp_path / "s"
    build_datastore(["hello world", "hello there"], lm.tokenizer, out, verbose=False)
    Engine(lm.model, lm.tokenizer, out)  # the intact store opens
    tokens = np.memmap(out / "tokens-00000.bin", dtype="<u2", mode="r+")
    tokens[3] = VOCAB_SIZE + 5  # past the separator (== the vocabulary size)
    tokens.flush()
    del tokens
    with pytest.raises(DatastoreError, match=f"token id {VOCAB_SIZE + 5} at position 3 is outside the vocabulary"):
        Engine(lm.model, lm.tokenizer, out)


def test_ids_past_the_vocabulary_in_memory_never_reach_the_model(lm):
    """A store made by hand (no open, no check) whose continuations hold ids the model does not
    have: generation still equals `generate` and never indexes the embedding out of range."""
    prompt = [104, 101, 108, 108, 111]  # "hello"
    with torch_threads(1):
        ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)[0, len(prompt) :].tolist()
        good = Datastore.from_token_ids([prompt + ref], vocab_size=VOCAB_SIZE)
        shard = good.shards[0]
        tokens = shard.tokens.copy()
        tokens[len(prompt) + 1] = VOCAB_SIZE + 7  # the second token after "hello"
        bad = Datastore(path=None, meta=good.meta, shards=[Shard(tokens=tokens, sa=shard.sa, n_documents=1)])
        engine = Engine(lm.model, lm.tokenizer, bad)
        cfg = GenerationConfig(max_new_tokens=8, draft=DraftConfig(c=4))
        assert collect(engine.generate(prompt, cfg)).token_ids == ref


def test_generate_command_refuses_a_damaged_store(lm, tmp_path, capsys):
    """Was a segmentation fault (exit 139): a suffix-array entry of -2^31 read before the tokens."""
    from rest_core.cli import main

    folder = tmp_path / "tiny-llama"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    store = tmp_path / "store"
    build_datastore(["hello world, hello there"] * 3, lm.tokenizer, store, verbose=False)
    sa = np.memmap(store / "sa-00000.bin", dtype="<i4", mode="r+")
    sa[:] = -(2**31)
    sa.flush()
    del sa
    capsys.readouterr()  # (the checkpoint writer's progress bar)
    args = [
        "generate",
        "--prompt",
        "hello",
        "--model",
        str(folder),
        "--device",
        "cpu",
        "--datastore",
        str(store),
        "--max-new-tokens",
        "4",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "suffix-array entry 0 is -2147483648" in err
