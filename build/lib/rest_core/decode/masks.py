"""The tree forward: a forward of an unmodified Hugging Face model over the rows of a draft tree
after the cached context, with a ready 4-D attention mask and position ids.

Row r attends to every cached token and to the tree rows `tree_mask[r]` allows (the root, its
ancestors and itself); its position is the cache length plus its depth. Models whose layers limit
attention further (sliding windows, attention chunks: `MaskLayout`) get those limits in the mask
too, since a mask we pass replaces the one the model would build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rest_core.decode.compat import cache_kw, text_config
from rest_core.decode.models import input_device

FULL, SLIDING, CHUNKED = "full_attention", "sliding_attention", "chunked_attention"


@dataclass(frozen=True)
class MaskLayout:
    """Which attention limits beyond causality a model's layers use, read as transformers reads
    them (`masking_utils.create_masks_for_generate`): per layer type when the config lists
    `layer_types` (Gemma 2/3, Cohere2, gpt-oss, Qwen2/3 with use_sliding_window past
    max_window_layers, Llama 4 chunks); else one `sliding_window` for every layer (Mistral,
    Phi-3, Starcoder2, Mixtral); else one `attention_chunk_size` for every layer.

    kinds: the layer kinds present (the single kind first when not by_layer_type).
    """

    kinds: tuple[str, ...]
    by_layer_type: bool  # the model takes a {layer type: mask} dict, else one mask
    window: int | None = None  # sliding layers: a query sees keys less than `window` positions back
    chunk: int | None = None  # chunked layers: a query sees keys of its own chunk of positions

    def limit(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(q, k) bool: which keys the layer kind lets each query see (before causality)."""
        if kind == SLIDING:  # transformers' sliding_window_overlay: kv > q - window
            return (q_pos[:, None] - k_pos[None, :]) < self.window
        if kind == CHUNKED:  # chunked_overlay: same chunk of positions
            return (q_pos[:, None] // self.chunk) == (k_pos[None, :] // self.chunk)
        return torch.ones((q_pos.shape[0], k_pos.shape[0]), dtype=torch.bool, device=q_pos.device)


def mask_layout(config) -> MaskLayout | None:
    """The model's attention limits beyond causality (see MaskLayout), or None for plain causal
    attention. Layer types whose state a tree forward cannot verify (recurrent, compressed)
    are refused: a silently wrong mask would break the lossless guarantee."""
    text = text_config(config)
    window = getattr(text, "sliding_window", None) or None
    chunk = getattr(text, "attention_chunk_size", None) or None
    types = getattr(text, "layer_types", None)
    if types is not None:
        kinds = tuple(dict.fromkeys(types))
        unknown = [k for k in kinds if k not in (FULL, SLIDING, CHUNKED)]
        if unknown:
            raise ValueError(
                f"layer type {unknown[0]!r} cannot be verified with a tree attention mask "
                f"(supported: {FULL}, {SLIDING}, {CHUNKED})"
            )
        for kind, size, name in ((SLIDING, window, "sliding_window"), (CHUNKED, chunk, "attention_chunk_size")):
            if kind in kinds and not size:
                raise ValueError(f"the model config has {kind} layers but no {name}")
        if set(kinds) <= {FULL}:
            return None
        # Always a full-attention mask too: some models build rotary or other tables per kind.
        kinds = tuple(dict.fromkeys((*kinds, FULL)))
        return MaskLayout(kinds=kinds, by_layer_type=True, window=window, chunk=chunk)
    if window:
        return MaskLayout(kinds=(SLIDING,), by_layer_type=False, window=int(window))
    if chunk:
        return MaskLayout(kinds=(CHUNKED,), by_layer_type=False, chunk=int(chunk))
    return None


def mask_kind(model) -> str:
    """How the model's attention takes a mask: "bool" (sdpa) or "additive" (eager)."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl == "sdpa":
        return "bool"
    if impl == "eager":
        return "additive"
    raise ValueError(
        f"attention implementation {impl!r} cannot take a tree attention mask; load the model with "
        f"attn_implementation='sdpa' (or 'eager')"
    )


def tree_forward(
    model,
    ids: torch.Tensor,
    cache,
    cache_len: int,
    tree_mask: np.ndarray,
    offsets: np.ndarray,
    *,
    kind: str,
    layout: MaskLayout | None,
) -> tuple[Any, float]:
    """One forward over q new tokens `ids` (1, q) after `cache_len` cached ones, with a (q, q)
    tree mask and position offsets (q,), a mask of `kind` (see mask_kind) under `layout`; the
    model's output and the milliseconds spent building its mask and position ids."""
    t0 = time.perf_counter()
    mask, positions = _tree_inputs(model, cache_len, tree_mask, offsets, kind, layout)
    mask_ms = 1000 * (time.perf_counter() - t0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, **cache_kw(model, cache))
    return out, mask_ms


def _tree_inputs(
    model, cache_len: int, tree_mask: np.ndarray, offsets: np.ndarray, kind: str, layout: MaskLayout | None
) -> tuple[Any, torch.Tensor]:
    """(attention mask, position ids) of a forward over q tree rows after `cache_len` cached
    tokens: a 4-D mask (1, 1, q, cache_len + q), position ids cache_len + offsets. Models with
    sliding windows or attention chunks (`layout`) get those limits in the mask too: one mask
    for all layers, or one per layer type when the model reads its masks by layer type."""
    device = input_device(model)
    q = tree_mask.shape[0]
    allowed = torch.ones((1, 1, q, cache_len + q), dtype=torch.bool, device=device)
    allowed[0, 0, :, cache_len:] = torch.from_numpy(tree_mask).to(device)
    positions = torch.from_numpy(offsets + cache_len).to(device).unsqueeze(0)  # (1, q)
    if layout is None:
        mask: Any = _as_mask(model, allowed, kind)
    else:
        key_pos = torch.cat([torch.arange(cache_len, device=device), positions[0]])  # (cache_len + q,)
        masks = {
            layer: _as_mask(model, allowed & layout.limit(layer, positions[0], key_pos), kind) for layer in layout.kinds
        }
        mask = masks if layout.by_layer_type else masks[layout.kinds[0]]
    return mask, positions


def _as_mask(model, allowed: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "bool":
        return allowed
    # eager attention adds the mask to the scores
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)
