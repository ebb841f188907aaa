"""Several datastores drafting at once: each store its own source (bit, name, weight, colour),
merged into the one trie; greedy output unchanged; counted per kind and per store; the CLI's
repeated --datastore; and the refusals (wrong vocabulary, too many stores, unknown names)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from rest_core.config import ConfigError, DraftConfig, GenerationConfig, RetrievalConfig
from rest_core.decode.engine import Engine, collect
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.draft import build_draft
from rest_core.sources import (
    MAX_STORES,
    SOURCE_CONTEXT,
    SOURCE_DATASTORE,
    STYLES,
    SourceTable,
    count_origins,
    origin,
)
from rest_core.store.build import build_datastore
from rest_core.store.datastore import Datastore
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads

SECOND = 4  # the second store's bit


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


# --- the merged trie -----------------------------------------------------------------------


def test_trie_merges_three_sources_with_weights_and_bits():
    """Two stores and the context, each found the suffix [1, 2]: every node carries the bits of
    the sources whose continuations pass through it, and weighs the sum of their per-row shares
    (a source's weight divided over its continuations)."""
    cfg = RetrievalConfig(n_min=2, n_max=2, m=2)
    code = Datastore.from_token_ids([[1, 2, 3, 4], [1, 2, 3, 5]], vocab_size=50)  # after [1, 2]: 3 4, 3 5
    chat = Datastore.from_token_ids([[1, 2, 3, 4], [1, 2, 7, 8]], vocab_size=50)  # 3 4, 7 8
    sources = [
        DatastoreSource(code, cfg, weight=1.0, bit=SOURCE_DATASTORE, name="code"),
        DatastoreSource(chat, cfg, weight=3.0, bit=SECOND, name="chat"),
        ContextSource(cfg, weight=2.0),
    ]
    for s in sources:
        s.reset([1, 2, 3, 9, 1, 2])  # the context holds [1, 2] once before: 3 9
    retrieved = [s.retrieve() for s in sources]
    assert [r.source_bit for r in retrieved] == [SOURCE_DATASTORE, SECOND, SOURCE_CONTEXT]
    trie = build_draft(retrieved, c=16).trie
    nodes = {}
    for i in range(len(trie)):
        path, j = [], i
        while j >= 0:
            path.append(int(trie.tokens[j]))
            j = int(trie.parents[j])
        nodes[tuple(reversed(path))] = (float(trie.weights[i]), int(trie.sources[i]))
    # code: 2 rows of 1/2; chat: 2 rows of 3/2; context: 1 row of 2.
    assert nodes == {
        (3,): (0.5 + 0.5 + 1.5 + 2.0, SOURCE_DATASTORE | SECOND | SOURCE_CONTEXT),
        (7,): (1.5, SECOND),
        (3, 4): (0.5 + 1.5, SOURCE_DATASTORE | SECOND),
        (3, 5): (0.5, SOURCE_DATASTORE),
        (3, 9): (2.0, SOURCE_CONTEXT),
        (7, 8): (1.5, SECOND),
    }


# --- the engine: greedy identity, attribution, selection ----------------------------------


def _reference(model, prompt: list[int], n: int) -> list[int]:
    return model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)[0, len(prompt) :].tolist()


@pytest.fixture(scope="module", params=["llama", "qwen2", "gpt2"])
def stores(request):
    """A tiny model, prompts and references, a store of random tokens (drafts mostly wrong) and
    one of the model's own greedy output (drafts often right)."""
    lm = tiny_loaded(request.param)
    rnd = random.Random(1)
    prompts = [[rnd.randrange(256) for _ in range(rnd.randrange(2, 20))] for _ in range(6)]
    refs = [_reference(lm.model, p, 24) for p in prompts]
    own = Datastore.from_token_ids([p + r for p, r in zip(prompts, refs)], vocab_size=VOCAB_SIZE)
    noise = Datastore.from_token_ids(
        [[rnd.randrange(256) for _ in range(300)] for _ in range(4)], vocab_size=VOCAB_SIZE
    )
    return lm, prompts, refs, {"noise": noise, "own": own}


@pytest.mark.parametrize(
    "settings",
    [
        dict(c=8, use_context=True),
        dict(c=16, use_context=True, stores=(("noise", 3.0), ("own", 0.5)), context_weight=2.0),
        dict(c=4, stores=("own",)),
    ],
    ids=["both-stores+context", "weighted", "second-store-only"],
)
def test_greedy_equals_generate_with_two_stores_and_context(stores, settings):
    lm, prompts, refs, named = stores
    draft = DraftConfig(**settings)
    engine = Engine(lm.model, lm.tokenizer, datastores=named)
    cfg = GenerationConfig(max_new_tokens=24, draft=draft)
    masks = []
    for prompt, ref in zip(prompts, refs):
        res = collect(engine.generate(prompt, cfg))
        assert res.token_ids == ref, (prompt, draft)
        masks += [s for ev in res.events for s in ev.token_sources]
        for ev in res.events:
            wanted = [n for n, w in (draft.stores or ((n, 1.0) for n in named))] + (
                ["context"] if draft.use_context else []
            )
            assert [m.source for m in ev.matches] == wanted
    # Drafts of the second store ("own", bit 4) were accepted: the identity was tested with them.
    by_store = engine.source_table.count_sources(masks)
    assert by_store["own"] > 0
    assert all(m & ~(SOURCE_DATASTORE | SECOND | SOURCE_CONTEXT) == 0 for m in masks)
    if draft.stores == (("own", 1.0),):
        assert by_store["noise"] == 0 and not any(m & SOURCE_DATASTORE for m in masks)


def test_one_store_keeps_its_old_identity(stores):
    """datastore= (one store) is still bit 1 named "datastore"; datastores= names its stores."""
    lm, prompts, _, named = stores
    single = Engine(lm.model, lm.tokenizer, named["own"])
    assert [(s.bit, s.name) for s in single.source_table] == [
        (SOURCE_DATASTORE, "datastore"),
        (SOURCE_CONTEXT, "context"),
    ]
    ev = next(single.generate(prompts[0], GenerationConfig(max_new_tokens=2)))
    assert [m.source for m in ev.matches] == ["datastore"]
    multi = Engine(lm.model, lm.tokenizer, datastores=named)
    assert [(s.bit, s.name) for s in multi.source_table] == [
        (SOURCE_DATASTORE, "noise"),
        (SECOND, "own"),
        (SOURCE_CONTEXT, "context"),
    ]
    assert multi.datastore is named["noise"]


def test_unknown_store_and_wrong_vocabulary_are_refused(stores):
    lm, prompts, _, named = stores
    engine = Engine(lm.model, lm.tokenizer, datastores=named)
    with pytest.raises(ValueError, match="no datastore named 'code'.*noise, own"):
        engine.generate(prompts[0], GenerationConfig(draft=DraftConfig(stores=("own", "code"))))
    other = Datastore.from_token_ids([[1, 2, 3]], vocab_size=VOCAB_SIZE + 100)  # another tokenizer's ids
    with pytest.raises(ValueError, match="datastore 'big'.s vocabulary"):
        Engine(lm.model, lm.tokenizer, datastores={**named, "big": other})
    with pytest.raises(ValueError, match="not both"):
        Engine(lm.model, lm.tokenizer, named["own"], datastores=named)


def test_more_than_six_stores_are_refused():
    lm = tiny_loaded("llama")
    store = Datastore.from_token_ids([[1, 2, 3]], vocab_size=VOCAB_SIZE)
    six = {f"s{i}": store for i in range(MAX_STORES)}
    assert len(Engine(lm.model, lm.tokenizer, datastores=six).source_table.stores) == 6
    with pytest.raises(ValueError, match="at most 6 datastores"):
        Engine(lm.model, lm.tokenizer, datastores={**six, "seventh": store})
    with pytest.raises(ConfigError, match="at most 6 datastores"):
        DraftConfig(stores=tuple(f"s{i}" for i in range(7)))
    for bad in (("context",), ("a", "a")):
        with pytest.raises(ValueError):
            SourceTable.for_stores(bad)


# --- naming, colours and counting -------------------------------------------------------------


def test_count_origins_and_names_with_several_stores():
    table = SourceTable.for_stores(["code", "chat", "docs"])
    code, chat, docs = (s.bit for s in table.stores)
    assert (code, chat, docs) == (1, 4, 8)
    masks = [code, chat, code | chat, chat | SOURCE_CONTEXT, SOURCE_CONTEXT, 0, docs, code | chat | SOURCE_CONTEXT]
    # Kind-level keys keep their meaning: any store(s) alone, context alone, stores + context.
    assert count_origins(masks) == {"model": 1, "datastore": 4, "context": 1, "both": 2}
    assert table.count_sources(masks) == {"code": 3, "chat": 4, "docs": 1, "context": 3}
    assert table.origin(chat).label == "chat" and table.origin(chat).color == STYLES[4][1] != STYLES[1][1]
    assert table.origin(code).color == "#2563eb"  # the first store stays blue
    assert table.origin(code | chat | SOURCE_CONTEXT).label == "code + chat + context"
    assert table.origin(code | chat).key == "datastore" and table.origin(code | chat).css == "both"
    assert origin(docs).css == "s3" and origin(docs).label == "store 3"  # no table: default names
    assert len({table.origin(s.bit).color for s in table}) == len(table.sources)


# --- the command line ------------------------------------------------------------------------


def test_generate_command_with_two_datastores(tmp_path, capsys):
    from rest_core.cli import main

    lm = tiny_loaded("llama")
    folder = tmp_path / "tiny-llama"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    stores = tmp_path / "stores"
    prompt = "hello there"
    ids = lm.tokenizer(prompt).input_ids
    own = lm.tokenizer.decode(_reference(lm.model, ids, 16))
    build_datastore([prompt + own], lm.tokenizer, stores / "code", verbose=False)
    build_datastore(["some other text " * 20], lm.tokenizer, stores / "chat", verbose=False)

    base = [
        "generate",
        "--prompt",
        prompt,
        "--model",
        str(folder),
        "--max-new-tokens",
        "12",
        "--json",
        "--datastores",
        str(stores),
        "--c",
        "4",
    ]
    assert main(base + ["--datastore", "chat", "--datastore", f"mine={stores / 'code'}:2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["weight"], d["bit"]) for d in out["datastores"]] == [("chat", 1.0, 1), ("mine", 2.0, 4)]
    assert set(out["accepted_by_store"]) == {"chat", "mine", "context"}
    assert out["accepted_by_store"]["mine"] > 0  # the store of the model's own output drafts
    assert set(out["accepted_by_source"]) == {"datastore", "context", "both"}
    assert main(base + ["--datastore", "none"]) == 0 and json.loads(capsys.readouterr().out)["datastores"] == []

    for bad in (
        ["--datastore", "chat", "--datastore", "none"],
        ["--datastore", "chat", "--datastore", "chat"],
        ["--datastore", "nowhere"],
        ["--datastore", "chat:-1"],
    ):
        assert main(base + bad) == 2
        assert capsys.readouterr().err.startswith("error: ")
    seven = [a for i in range(7) for a in ("--datastore", f"s{i}={stores / 'chat'}")]
    assert main(base + seven) == 2
    assert "at most 6 datastores" in capsys.readouterr().err
