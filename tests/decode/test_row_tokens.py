"""StepEvent.row_tokens (asked for with generate(explain=True)): the model's likeliest token at
every verified row, the rows the walk never visits included, with lazy logits as with the full
forward; asking for them changes neither the tokens nor anything else a step reports."""

from __future__ import annotations

import pytest
import torch

from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import INSPECTOR_FEEDS, Engine
from rest_core.store.datastore import Datastore
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.mark.parametrize("lazy", [True, False])
def test_row_tokens_are_each_rows_argmax_and_change_nothing_else(lazy):
    lm = tiny_loaded("llama")
    engine = Engine(lm.model, lm.tokenizer)
    prompt = engine.encode([{"role": "user", "content": "count: one two three, one two three"}], chat=True)
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt) :].tolist()
    noise = [(t * 7 + 3) % 256 for t in ref]  # the same length of other tokens: branches the model rejects
    store = Datastore.from_token_ids([ref, ref[4:20] + noise[:12], ref[10:30]], vocab_size=VOCAB_SIZE)
    engine = Engine(lm.model, lm.tokenizer, store, lazy_logits=lazy, reuse_cache=False)
    config = GenerationConfig(max_new_tokens=40, draft=DraftConfig(c=16, budget="fixed", use_context=True))
    plain = list(engine.generate(prompt, config))
    rows = list(engine.generate(prompt, config, explain=True))
    assert all(e.row_tokens == () and len(e.feeds) <= INSPECTOR_FEEDS for e in plain)
    # outside the step-through a step keeps the branch of its accepted first token first (the inspector's)
    assert all(e.feeds[0].token == e.tokens[0] for e in plain if e.accepted)
    # the continuations behind the heaviest first-level nodes come with them: each feed's token
    # is a first-level node of the step's trie, heaviest first
    fed = [e for e in rows if e.feeds]
    assert fed and all(e.trie is not None for e in fed)
    for e in fed:
        first = {int(t): float(w) for t, w, d in zip(e.trie.tokens, e.trie.weights, e.trie.depths) if d == 1}
        assert [first[f.token] for f in e.feeds] == sorted(first.values(), reverse=True)[: len(e.feeds)]
    assert [e.tokens for e in rows] == [e.tokens for e in plain]
    assert [(e.accepted, e.draft_idx) for e in rows] == [(e.accepted, e.draft_idx) for e in plain]
    context = list(prompt)
    off_path = 0
    for e in rows:
        draft = e.draft
        assert len(e.row_tokens) == 1 + (len(draft) if draft is not None else 0)
        visited = {0, *(a + 1 for a in e.accepted)}
        for row in range(len(e.row_tokens)):
            path, r = [], row  # the drafted tokens from the root down to this row
            while r > 0:
                path.insert(0, int(draft.tokens[r - 1]))
                r = int(draft.parents[r - 1]) + 1
            with torch.inference_mode():
                own = int(lm.model(torch.tensor([context + path])).logits[0, -1].argmax())
            assert e.row_tokens[row] == own
            off_path += row not in visited
        context += list(e.tokens)
    assert off_path, "no row off the walk's path was checked"
