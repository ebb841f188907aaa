"""scripts/spec_overhead.py without vLLM: the jobs it makes from a bench run's `ar` job, and its
drafter that never drafts (what runs in vLLM is `make test-vllm`'s business; the script itself
is run by hand, see docs/results.md)."""

from __future__ import annotations

import importlib

spec_overhead = importlib.import_module("scripts.spec_overhead")


def test_three_jobs_differ_only_in_speculation_and_scheduling():
    job = {
        "method": "ar",
        "model": "m",
        "prompts": [[1, 2]],
        "llm_kwargs": {"enforce_eager": True},
        "speculative_config": None,
        "additional_config": None,
        "calibrate": [1, 2],
        "proposer_stats": None,
    }
    jobs = spec_overhead.variants(job, 16)
    assert sorted(jobs) == ["ar", "ar-sync", "null"]
    assert jobs["ar"]["speculative_config"] is None and "async_scheduling" not in jobs["ar"]["llm_kwargs"]
    assert jobs["ar-sync"]["llm_kwargs"] == {"enforce_eager": True, "async_scheduling": False}
    spec = jobs["null"]["speculative_config"]
    assert spec["method"] == "custom_class" and spec["num_speculative_tokens"] == 16
    module, name = spec["model"].rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is spec_overhead.NullProposer
    assert all(j["calibrate"] is None and j["prompts"] == [[1, 2]] for j in jobs.values())
    assert job["llm_kwargs"] == {"enforce_eager": True}  # the run's own job is left as it was


def test_the_null_drafter_drafts_nothing_for_every_row():
    drafter = spec_overhead.NullProposer(object())
    drafter.load_model()
    assert drafter.propose([[1], [], [2, 3]], None, None, slot_mappings={}) == [[], [], []]
