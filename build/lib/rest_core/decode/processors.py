"""The model's own generation settings, applied the way `model.generate` applies them.

A checkpoint's `generation_config` can change what greedy decoding emits (a repetition
penalty, banned n-grams, suppressed tokens, a minimum length, bad words, ...) and what
sampling draws from (transformers fills in `top_k=50` when the checkpoint leaves it unset).
`generate(do_sample=False)` and `generate(do_sample=True, temperature=T, top_p=P)` apply them;
so must REST, or its "lossless" output differs from plain decoding of the same model.

The processors are transformers' own, built once per generation by the same calls `generate`
makes. A processor reads the ids emitted so far, so in a draft tree each visited node must be
processed with its own prefix (context + that node's ancestors): `ModelProcessors.after(context)`
gives the `process(path, row_logits)` callable that `sampling.accept` calls per visited row.
Settings whose effect cannot be reproduced one row at a time (beam search, contrastive search,
classifier-free guidance, watermarking) or that our sampler does not implement (min-p, typical-p,
epsilon / eta cutoffs) are refused with a ValueError that names the setting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from rest_core.config import SamplingConfig
from rest_core.decode.models import input_device

# Processors that are a pure function of (emitted ids, scores) and so can run per tree node.
_PER_ROW = {
    "RepetitionPenaltyLogitsProcessor",
    "NoRepeatNGramLogitsProcessor",
    "NoBadWordsLogitsProcessor",
    "SequenceBiasLogitsProcessor",
    "MinLengthLogitsProcessor",
    "MinNewTokensLengthLogitsProcessor",
    "ForcedBOSTokenLogitsProcessor",
    "ForcedEOSTokenLogitsProcessor",
    "InfNanRemoveLogitsProcessor",
    "ExponentialDecayLengthPenalty",
    "SuppressTokensLogitsProcessor",
    "SuppressTokensAtBeginLogitsProcessor",
    "LogitNormalization",
}

# Sampling filters of transformers that our sampler (temperature, top-k, top-p) lacks:
# (setting, value at which it is off).
_SAMPLING_ONLY = (("min_p", None), ("typical_p", 1.0), ("epsilon_cutoff", 0.0), ("eta_cutoff", 0.0), ("top_h", None))

Process = Callable[[Sequence[int], torch.Tensor], torch.Tensor]


class ModelProcessors:
    """The model's logits processors for one generation (transformers' LogitsProcessorList)."""

    def __init__(self, processors: Any, device: torch.device) -> None:
        self.processors = processors
        self.device = device

    def __call__(self, prefix_ids: torch.Tensor, row_logits: torch.Tensor) -> torch.Tensor:
        """(L,) ids emitted so far (prompt included) and (V,) logits of the next token ->
        (V,) processed float32 scores, as `generate` computes them (it casts to float32 first)."""
        scores = row_logits.to(dtype=torch.float32).unsqueeze(0)  # (1, V), a copy
        return self.processors(prefix_ids.to(self.device).unsqueeze(0), scores)[0]

    def after(self, context: Sequence[int]) -> Process:
        """The `process(path, row_logits)` for one acceptance walk: `context` is every emitted id
        (its last is the tree's root); `path` is what the walk emitted before reaching the row,
        i.e. the row's draft ancestors, so the row's prefix is context + path."""
        base = torch.tensor(list(context), dtype=torch.long)

        def process(path: Sequence[int], row_logits: torch.Tensor) -> torch.Tensor:
            prefix = torch.cat([base, torch.tensor(list(path), dtype=torch.long)]) if path else base
            return self(prefix, row_logits)

        return process


def resolve_sampling(model, cfg: SamplingConfig) -> SamplingConfig:
    """The sampling settings `generate(do_sample=True, temperature=T, top_p=P, [top_k=K])` uses.

    top_k == 0 means "not set": like `generate`, take the model's generation config value, which
    transformers fills with 50 when the checkpoint leaves it unset. To sample with no top-k
    filter, set top_k to the vocabulary size (or more). Greedy settings are returned unchanged.
    """
    if cfg.greedy or cfg.top_k:
        return cfg
    top_k = _effective_config(model).top_k
    return replace(cfg, top_k=int(top_k)) if top_k else cfg


def model_processors(model, cfg: SamplingConfig, prompt_len: int, max_new_tokens: int) -> ModelProcessors | None:
    """The model's own logits processors for a generation from a `prompt_len`-token prompt
    (None when the generation config asks for none, the usual case: then the engine's raw
    argmax is exactly greedy `generate`). Raises ValueError naming a setting REST cannot honour."""
    gen = _effective_config(model, do_sample=not cfg.greedy, max_new_tokens=max_new_tokens)
    mode = gen.get_generation_mode()
    wanted = "sample" if not cfg.greedy else "greedy_search"
    if getattr(mode, "value", str(mode)) not in (wanted, "assisted_generation"):
        raise ValueError(
            f"the model's generation config asks for {getattr(mode, 'value', mode)} "
            f"(num_beams={gen.num_beams}, penalty_alpha={gen.penalty_alpha}); REST decodes greedily or by sampling"
        )
    if gen.guidance_scale is not None and gen.guidance_scale != 1:
        raise ValueError(
            f"the model's generation config sets guidance_scale={gen.guidance_scale}, which REST does not support"
        )
    if getattr(gen, "watermarking_config", None) is not None:
        raise ValueError("the model's generation config sets watermarking_config, which REST does not support")
    if not cfg.greedy:
        for name, off in _SAMPLING_ONLY:
            value = getattr(gen, name, off)
            if value is not None and value != off:
                raise ValueError(
                    f"the model's generation config sets {name}={value}, which REST's sampler does not support"
                )
    # What `generate` derives from the prompt before building its processors.
    gen.max_length = prompt_len + max_new_tokens
    if gen.min_new_tokens is not None:
        gen.min_length = gen.min_new_tokens + prompt_len
    gen.do_sample = False  # temperature / top-k / top-p are sampling.process_logits' job
    device = input_device(model)
    model._prepare_special_tokens(gen, device=device)
    processors = model._get_logits_processor(
        gen,
        input_ids_seq_length=prompt_len,
        device=device,
        model_kwargs={"attention_mask": torch.ones((1, prompt_len), dtype=torch.long, device=device)},
    )
    unsupported = [type(p).__name__ for p in processors if type(p).__name__ not in _PER_ROW]
    if unsupported:
        raise ValueError(f"the model's generation config adds {unsupported[0]}, which REST does not support")
    return ModelProcessors(processors, device) if len(processors) else None


def _effective_config(model, **kwargs: Any):
    """The generation config `generate(**kwargs)` would use: the model's own, the library
    defaults for what it leaves unset, then kwargs (a private copy)."""
    gen, _ = model._prepare_generation_config(None, **kwargs)
    return gen
