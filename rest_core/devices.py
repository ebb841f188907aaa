"""Which kind of device ("cpu", "cuda", "mps") a device string names, without importing torch."""

from __future__ import annotations

import sys
from pathlib import Path


def device_type(device: str, zero_gpu: bool = False) -> str:
    """The kind of device the model will run on: the part of `device` before any ":" ("cuda:1"
    is "cuda"). Read without importing torch: the app builds its page (knob defaults included)
    before any model loads. "auto" asks torch only when it is already imported; else it looks
    for an NVIDIA driver. On ZeroGPU (`zero_gpu`) the GPU is attached only inside requests: "cuda".
    A bad device string is reported when the model loads."""
    if zero_gpu:
        return "cuda"
    kind = device.split(":", 1)[0]
    if kind != "auto":
        return kind
    if "torch" in sys.modules:
        return "cuda" if sys.modules["torch"].cuda.is_available() else "cpu"
    gpus = Path("/proc/driver/nvidia/gpus")
    return "cuda" if gpus.is_dir() and any(gpus.iterdir()) else "cpu"
