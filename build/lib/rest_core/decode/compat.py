"""What the engine reads from a Hugging Face causal LM where model classes, transformers versions
and devices differ: the text part of a multimodal config, the KV cache's keyword, the position
limit, the EOS ids, and waiting for a GPU's queued work before reading a clock."""

from __future__ import annotations

import inspect
from typing import Any

import torch


def text_config(config):
    """The language model's config (a multimodal config nests it; a text-only one is itself)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def max_positions(config) -> int | None:
    """The model's context in tokens, under whichever name its config uses; None: unlimited."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def stop_ids(model, tokenizer) -> tuple[int, ...]:
    """EOS ids as `model.generate` uses them: the generation config's, else the config's,
    else the tokenizer's."""
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if eos is not None:
            return tuple(int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]))
    return ()


_CACHE_KW: dict[type, str] = {}


def cache_kw(model, cache) -> dict[str, Any]:
    """The KV cache argument under the name this transformers version uses ("cache" in 5.24+,
    "past_key_values" before)."""
    cls = type(model)
    if cls not in _CACHE_KW:
        params = inspect.signature(model.forward).parameters
        _CACHE_KW[cls] = "cache" if "cache" in params else "past_key_values"
    return {_CACHE_KW[cls]: cache, "use_cache": True}


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a clock read after it
    counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
