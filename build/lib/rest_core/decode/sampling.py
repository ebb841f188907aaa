"""Next-token choice and exact draft acceptance (pure tensor functions, no model).

Greedy picks the argmax. Sampling draws from the processed distribution (temperature, then
top-k, then top-p, in the order transformers applies them) by inverse CDF of one uniform
number per emitted token, so a REST run and a plain run that share a seed draw the same
uniforms for the same positions and emit the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import torch

from rest_core.config import SamplingConfig


class Uniforms:
    """A seeded stream of uniform numbers in [0, 1), one per emitted token."""

    def __init__(self, seed: int | None = None) -> None:
        self.generator = torch.Generator(device="cpu")
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    def __call__(self) -> float:
        return float(torch.rand((), generator=self.generator, dtype=torch.float64))


class Rows(Protocol):
    """Logits of a verified tree's rows, computed when asked for (`rest_core.decode.heads.LazyLogits`)."""

    def __getitem__(self, row: int) -> torch.Tensor: ...

    def argmax(self, row: int) -> int: ...


def _work_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def process_logits(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """(..., V) logits -> (..., V) probabilities after temperature, top-k and top-p.

    Same rules as transformers' warpers: top-k keeps every token tied with the k-th largest;
    top-p keeps the smallest set of most likely tokens whose mass reaches top_p (at least one).
    """
    x = logits.to(_work_dtype(logits.device)) / cfg.temperature
    if cfg.top_k and cfg.top_k < x.shape[-1]:
        kth = torch.topk(x, cfg.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if cfg.top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=False)
        cum = sorted_x.softmax(dim=-1).cumsum(dim=-1)
        drop = cum <= (1.0 - cfg.top_p)
        drop[..., -1:] = False
        x = x.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return x.softmax(dim=-1)


def sample_index(probs: torch.Tensor, u: float) -> int:
    """Inverse CDF over token ids in id order: the token t with cdf[t-1] <= u * total < cdf[t].
    A token of probability 0 is never chosen; P(t) = probs[t] / total exactly, for u ~ U[0, 1)."""
    cdf = probs.cumsum(dim=-1)
    x = torch.tensor(u, dtype=cdf.dtype, device=cdf.device) * cdf[-1]
    return int(torch.searchsorted(cdf, x.reshape(1), right=True).clamp_(max=probs.shape[-1] - 1))


def accept(
    logits: torch.Tensor | Rows,
    children: Mapping[tuple[int, int], int],
    cfg: SamplingConfig,
    uniforms: Callable[[], float] | None,
    *,
    max_tokens: int,
    stop_ids: Sequence[int] = (),
    process: Callable[[Sequence[int], torch.Tensor], torch.Tensor] | None = None,
) -> tuple[list[int], list[int]]:
    """Walk the verified tree from the root and emit the model's own tokens.

    logits: (R, V), row 0 = the root (last accepted token), row r = a draft node; or `Rows`
    that compute a row's logits when the walk first reaches it (only visited rows are scored).
    children: (row, token) -> child row. Emits at most `max_tokens` tokens and stops after a
    token in `stop_ids` (EOS). Returns (emitted tokens, rows of the accepted draft nodes):
    tokens[i] was drafted by rows[i] for i < len(rows); a token past them is the model's own.
    process: the model's own logits processors (repetition penalty, ...), called as
    process(path, logits[row]) -> (V,) scores for each visited row, where path is the tokens
    emitted before reaching that row (its draft ancestors); the caller binds the context.

    Exactness (sampling): at each visited row we draw t ~ p(. | context + path), the model's own
    processed distribution there, and emit it. If t is a drafted child, its row's logits are the
    model's logits for context + path + t, so the next draw is again the model's own; otherwise
    we stop, and the next step resumes from context + path + t. Every emitted token is thus drawn
    exactly as plain sampling would draw it, with one uniform per token in the same order.
    `process` keeps this true: it sees exactly the prefix plain decoding would have at that row.
    """
    tokens: list[int] = []
    if process is not None:
        scores = lambda row: process(tokens, logits[row])  # noqa: E731  (the row's own prefix)
    else:
        scores = lambda row: logits[row]  # noqa: E731
    if cfg.greedy and process is None and isinstance(logits, torch.Tensor):
        choice = logits.argmax(dim=-1).tolist()  # one sync for all rows
        pick = lambda row: choice[row]  # noqa: E731
    elif cfg.greedy and process is None:
        pick = logits.argmax  # lazy rows: scored (a likely chain at a time) when first reached
    elif cfg.greedy:
        pick = lambda row: int(scores(row).argmax())  # noqa: E731
    else:
        if uniforms is None:
            raise ValueError("sampling needs a uniform stream")
        pick = lambda row: sample_index(process_logits(scores(row), cfg), uniforms())  # noqa: E731
    rows: list[int] = []
    row = 0
    while len(tokens) < max_tokens:
        t = pick(row)
        tokens.append(t)
        child = children.get((row, t))
        if child is None:
            break
        rows.append(child)  # tokens[i] was drafted by row rows[i]
        if t in stop_ids:
            break
        row = child
    return tokens, rows
