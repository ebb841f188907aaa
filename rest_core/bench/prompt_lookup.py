"""Prompt lookup decoding (transformers' `generate(prompt_lookup_num_tokens=k)`), timed forward by
forward, for the third lane of Compare's timeline.

`generate` reports no per-step timings, so a stopping criterion serves as the clock:
transformers calls it once per decoding iteration, that is once per forward pass (plain and
assisted decoding alike; tests/test_teach.py checks it), and its first call marks the end of
prefill (the prefill forward also yields the first token). The same criterion stops the run at
the request's time limit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rest_core.config import SamplingConfig

PLD_K = 3  # draft tokens per step: between the bench's best for chat (2) and for code (8)


@dataclass(frozen=True)
class LookupRun:
    """What one prompt lookup run produced, on the decode clock (prefill excluded).

    token_ids: every new token, the prefill's first one included. counts[i]: the tokens decode
    forward i added; ends_ms[i]: when it ended, in ms after the end of prefill.
    """

    token_ids: tuple[int, ...]
    counts: tuple[int, ...]
    ends_ms: tuple[float, ...]
    prefill_ms: float
    timed_out: bool
    k: int

    @property
    def decode_tokens(self) -> int:
        return sum(self.counts)

    @property
    def tokens_per_s(self) -> float:
        return 1000.0 * self.decode_tokens / self.ends_ms[-1] if self.ends_ms and self.ends_ms[-1] > 0 else 0.0

    @property
    def mean_generated_length(self) -> float:
        """M: tokens per decode forward."""
        return self.decode_tokens / len(self.counts) if self.counts else 0.0


def _generate_kwargs(max_new_tokens: int, eos: list[int], sampling: SamplingConfig, k: int) -> dict[str, Any]:
    """`generate`'s settings for these tokens, stop ids, sampling and k (0: no prompt lookup);
    seeds torch when sampling with a seed."""
    import torch

    kwargs: dict[str, Any] = dict(
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        eos_token_id=eos or None,
        pad_token_id=eos[0] if eos else 0,
        do_sample=not sampling.greedy,
    )
    if not sampling.greedy:
        kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None)
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
    if k:
        kwargs["prompt_lookup_num_tokens"] = k
    return kwargs


def run_prompt_lookup(
    model: Any,
    prompt_ids: Sequence[int],
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    sampling: SamplingConfig = SamplingConfig(),
    k: int = PLD_K,
    max_seconds: float = 0.0,
) -> LookupRun:
    """Prompt lookup decoding of `prompt_ids` with k draft tokens per step (plain decoding for
    k = 0); `max_seconds` > 0 stops it after that long, keeping the tokens so far."""
    import torch
    from transformers import GenerationConfig as HFGenerationConfig
    from transformers import StoppingCriteria, StoppingCriteriaList

    stamps: list[tuple[float, int]] = []  # (time, sequence length) after each forward
    start = time.perf_counter()
    deadline = start + max_seconds if max_seconds > 0 else None

    class ForwardClock(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
            now = time.perf_counter()
            stamps.append((now, int(input_ids.shape[1])))
            stop = deadline is not None and now > deadline
            return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)

    eos = [int(t) for t in stop_ids]
    kwargs = _generate_kwargs(max_new_tokens, eos, sampling, k)
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            generation_config=HFGenerationConfig(**kwargs),
            stopping_criteria=StoppingCriteriaList([ForwardClock()]),
        )
    new = [int(t) for t in out[0, len(prompt_ids) :].tolist()]
    cut = next((i + 1 for i, t in enumerate(new) if t in eos), len(new))  # up to the first EOS, kept
    new = new[:cut]
    if not stamps:
        return LookupRun(tuple(new), (), (), 0.0, False, k)
    t0, n0 = stamps[0]
    counts, ends = [], []
    for (t, n), (_, before) in zip(stamps[1:], stamps):
        added = min(n, len(prompt_ids) + len(new)) - before
        if added > 0:
            counts.append(added)
            ends.append(1000.0 * (t - t0))
    timed_out = deadline is not None and stamps[-1][0] > deadline
    return LookupRun(tuple(new), tuple(counts), tuple(ends), 1000.0 * (t0 - start), timed_out, k)
