"""The device kind (rest_core.devices): read from the device string the app or vLLM was given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rest_core.devices import device_type

ROOT = Path(__file__).resolve().parents[1]


def test_the_kind_is_the_part_before_the_index():
    assert [device_type(d) for d in ("cpu", "cuda", "cuda:1", "mps", "xpu:0")] == ["cpu", "cuda", "cuda", "mps", "xpu"]
    assert device_type("cpu", zero_gpu=True) == "cuda"  # ZeroGPU attaches CUDA per request
    assert device_type("auto") in ("cpu", "cuda")


def test_auto_never_imports_torch():
    code = (
        "import sys; from rest_core.devices import device_type; device_type('auto'); sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
