"""KV-cache surgery on a transformers `DynamicCache`, in place on every layer: keep the accepted
path of a verified tree, cut the cache back to a prefix."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def keep_rows(cache, cache_len: int, rows: Sequence[int]) -> None:
    """Keep the cached context, the root (row 0) and `rows` (accepted draft rows, in path order);
    drop every other verified row. In place on every layer, O(accepted) copying."""
    keep = cache_len + 1 + len(rows)
    if rows and list(rows) != list(range(1, len(rows) + 1)):
        src = torch.tensor([cache_len + r for r in rows], device=cache.layers[0].keys.device)
        for layer in cache.layers:
            src = src.to(layer.keys.device)  # layers of a model spread over devices (device_map)
            # Advanced indexing copies first, so overlapping source and target slots are safe.
            layer.keys[..., cache_len + 1 : keep, :] = layer.keys[..., src, :]
            layer.values[..., cache_len + 1 : keep, :] = layer.values[..., src, :]
    truncate(cache, keep)


def truncate(cache, length: int) -> None:
    """Keep the first `length` positions of every layer (a view, no copy)."""
    for layer in cache.layers:
        if layer.keys is not None and layer.keys.shape[-2] > length:
            layer.keys = layer.keys[..., :length, :]
            layer.values = layer.values[..., :length, :]
