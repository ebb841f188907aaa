"""The forward-cost curve the auto draft budget plans with: how long a verify forward of q tokens
takes on this model and machine, measured through the engine's own tree forward."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.compat import cache_kw, max_positions, sync
from rest_core.decode.heads import OutputHead
from rest_core.decode.kv import truncate
from rest_core.decode.masks import mask_kind, mask_layout, tree_forward
from rest_core.decode.models import input_device


def measure_cost_curve(
    model,
    max_q: int,
    context_len: int = 256,
    reps: int = 2,
    head: OutputHead | None = None,
    max_seconds: float = 0.0,
) -> CostCurve:
    """Time forwards of 1, 2, 4, ..., max_q tokens after a `context_len`-token cache.

    With `max_seconds` (> 0) no larger size is started once that long has passed (two sizes are
    always measured): the curve then ends below max_q, and extrapolates past its last size.

    With `head` (lazy logits), a forward is the body over q tokens and the head over one row,
    as a verify step with lazy logits costs before its walk scores accepted rows.

    Takes the fastest of `reps` runs per size, timed in passes over the sizes (`_in_passes`),
    and makes the curve non-decreasing in q. Stays within the model's positions: the context is
    at most half of them, and position ids past the last one are clamped to it (the cost of a
    forward does not depend on the position values; a learned position table would overflow).
    """
    from transformers import DynamicCache

    limit = max_positions(model.config)
    if limit:
        context_len = max(1, min(context_len, limit // 2))
    device = input_device(model)
    vocab = model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, vocab, (1, context_len), generator=gen).to(device)
    sizes = [1]
    while sizes[-1] < max_q:
        sizes.append(min(sizes[-1] * 2, max_q))
    kind, layout = mask_kind(model), mask_layout(model.config)
    body = head.body if head is not None else model
    started = time.perf_counter()
    with torch.inference_mode():
        cache = DynamicCache()
        model(input_ids=ctx, **cache_kw(model, cache))

        def timed(q: int) -> float:
            ids = torch.randint(0, vocab, (1, q), generator=gen).to(device)
            chain = np.tril(np.ones((q, q), dtype=bool))  # a chain: same cost as any tree of q
            offsets = np.arange(q) if not limit else np.minimum(np.arange(q), limit - 1 - context_len)
            t0 = time.perf_counter()
            out, _ = tree_forward(body, ids, cache, context_len, chain, offsets, kind=kind, layout=layout)
            if head is not None:
                head(out.last_hidden_state[0, :1])
            sync(device)
            elapsed = 1000 * (time.perf_counter() - t0)
            truncate(cache, context_len)
            return elapsed

        ms = _in_passes(timed, sizes, reps, lambda: max_seconds > 0 and time.perf_counter() - started > max_seconds)
    return CostCurve(tuple(sizes[: len(ms)]), tuple(np.maximum.accumulate(ms).tolist()), context_len, reps)


def _in_passes(timed: Callable[[int], float], sizes: Sequence[int], reps: int, late: Callable[[], bool]) -> list[float]:
    """The fastest of `reps` timings (`timed(q)`, ms) per size, in passes over the sizes: the first
    a warm-up run and a timed one per size, no larger size once `late()` (two sizes always), the
    others one timed run per size it reached. Other jobs on the machine only ever add time, and a
    load spike then spoils one pass of every size rather than every run of one size (a one-token
    forward timed while the page loaded read 48.8 ms where the run's own plain steps took 42.7)."""
    times: list[list[float]] = []
    for q in sizes:
        if len(times) >= 2 and late():
            break
        timed(q)
        times.append([timed(q)])
    for _ in range(reps - 1):
        for q, seen in zip(sizes, times):
            seen.append(timed(q))
    return [min(t) for t in times]
