"""A model bigger than one device, spread by accelerate (device_map="auto" with a max_memory
that leaves part of it on the CPU or on disk), still verifies trees exactly: greedy REST equals
`model.generate` token for token. Runs on the CPU: "disk" is an offload folder in tmp_path."""

from __future__ import annotations

import random

import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import Engine, collect
from rest_core.decode.models import load_model
from rest_core.store.datastore import Datastore
from tests.tiny_models import VOCAB_SIZE, tiny_model, tiny_tokenizer, torch_threads

pytest.importorskip("accelerate")

N_NEW = 16


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny 4-layer Llama saved as a checkpoint folder, its prompts and greedy references."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    model = tiny_model("llama", layers=4)
    model.save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    rnd = random.Random(1)
    prompts = [[rnd.randrange(256) for _ in range(rnd.randrange(1, 24))] for _ in range(5)]
    with torch_threads(1):
        refs = [
            model.generate(torch.tensor([p]), max_new_tokens=N_NEW, do_sample=False)[0, len(p) :].tolist()
            for p in prompts
        ]
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"folder": folder, "prompts": prompts, "refs": refs, "size": size}


@pytest.mark.parametrize("cpu_share, expect", [(0.7, {"cpu", "disk"}), (0.2, {"disk"})])
def test_greedy_equals_generate_when_offloaded(saved, tmp_path, cpu_share, expect):
    """0.7: the embeddings and first layer stay in memory, the rest is read from disk per forward;
    0.2: everything, the embeddings too (their weights then sit on the "meta" device)."""
    lm = load_model(
        str(saved["folder"]),
        device="cpu",
        dtype="float64",
        device_map="auto",
        max_memory={"cpu": int(cpu_share * saved["size"])},
        offload_folder=tmp_path / "offload",
    )
    assert set(lm.model.hf_device_map.values()) == expect  # the premise: the model really is split
    assert lm.device == torch.device("cpu")
    own = Datastore.from_token_ids([p + r for p, r in zip(saved["prompts"], saved["refs"])], vocab_size=VOCAB_SIZE)
    engine = Engine(lm.model, lm.tokenizer, own)
    accepted = 0
    with torch_threads(1):
        for draft in (DraftConfig(c=4), DraftConfig(c=16, use_context=True)):
            cfg = GenerationConfig(max_new_tokens=N_NEW, draft=draft)
            for prompt, ref in zip(saved["prompts"], saved["refs"]):
                res = collect(engine.generate(prompt, cfg))
                assert res.token_ids == ref, (prompt, draft)
                accepted += res.totals.draft_tokens
    assert accepted > 0  # trees were verified, not only single tokens


def test_offload_options_need_device_map_auto():
    with pytest.raises(ValueError, match="device_map='auto' only"):
        load_model("embedded", device="cpu", max_memory={"cpu": "1GiB"})


def test_auto_device_spreads_over_several_gpus(monkeypatch):
    """`--device auto` on a machine with several GPUs loads with device_map="auto" (the same
    command runs a 7B+ model across them); one GPU, a named device or the CPU load as before."""
    from rest_core.decode.models import placement

    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert placement("auto", cuda, None) == "auto"
    assert placement("cuda:1", torch.device("cuda:1"), None) is None
    assert placement("auto", torch.device("cpu"), None) is None
    assert placement("cpu", torch.device("cpu"), "auto") == "auto"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert placement("auto", cuda, None) is None
