"""The step profile (`rest_core.bench.profile`): phases that add up, read from real engine steps."""

from __future__ import annotations

import pytest

from rest_core.bench.profile import PHASES, breakdown, phases
from rest_core.config import DraftConfig, GenerationConfig
from rest_core.decode.engine import Engine, collect
from tests.tiny_models import tiny_loaded, torch_threads


def test_phases_of_real_steps_add_up_to_the_step_and_name_the_head():
    lm = tiny_loaded("llama")
    prompt = list(b"def f(x):\n    return x + 1\n\ndef f(x):\n    return")
    cfg = GenerationConfig(max_new_tokens=20, draft=DraftConfig(c=6, use_datastore=False, use_context=True))
    with torch_threads(1):
        res = collect(Engine(lm.model, lm.tokenizer, None).generate(prompt, cfg))
    drafted = [e for e in res.events if e.draft_idx]
    assert drafted
    for e in res.events:
        p = phases(e.timings)
        assert list(p) == list(PHASES)
        assert sum(p.values()) == pytest.approx(e.timings.total_ms, abs=1e-6)
        assert all(v >= 0 for v in p.values()), p
        assert (p["head"] > 0) == bool(e.draft_idx)  # lazy logits score rows only for drafts
        assert p["mask"] > 0 or not e.draft_idx
    b = breakdown(res.events)
    assert b.steps == len(res.events) and b.tokens == len(res.token_ids)
    assert b.step_ms == pytest.approx(sum(e.timings.total_ms for e in res.events) / len(res.events))
    assert 0 < b.overhead_share < 1
