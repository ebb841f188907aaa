"""Lazy logits: run the model's body over the verified tree, and its output head only over the
rows the acceptance walk visits.

A verify forward over q rows needs the next-token scores of the root and of each accepted node
(the walk stops at the first row whose choice is not drafted), not of every drafted row. The
head is a (hidden x vocabulary) matrix, about a fifth of SmolLM2's weights, so scoring rows the
walk never reaches is work thrown away. `OutputHead.of(model)` splits a Hugging Face causal LM
into its body (`model.base_model`) and its head (`get_output_embeddings()` plus the final logit
scaling / soft-capping some models apply), and checks once, on a short input, that body + head
gives the model's own logits; models it cannot split (or whose check fails) keep the full
forward. `LazyLogits` computes rows on demand, a likely chain at a time: the head's matrix is
read from memory once per batch, so row-by-row scoring would cost more than scoring all rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rest_core.decode.compat import text_config
from rest_core.decode.models import input_device


class OutputHead:
    """A causal LM's output head, applied apart from its body."""

    def __init__(self, body: Any, head: torch.nn.Module, *, softcap: float | None, scale: float) -> None:
        self.body = body
        self.head = head
        self.softcap = softcap
        self.scale = scale

    @classmethod
    def of(cls, model: Any) -> OutputHead | None:
        """The model's body and head, or None when it has no separate head, or body + head
        does not reproduce the model's own logits on a short input (a model with its own
        post-processing): the engine then keeps the full forward."""
        body = getattr(model, "base_model", None)
        if body is model:  # a wrapper whose prefix names no submodule (Llama 4 text): the usual name
            body = getattr(model, "model", None)
        get_head = getattr(model, "get_output_embeddings", None)
        head = get_head() if callable(get_head) else None
        if body is None or body is model or not isinstance(head, torch.nn.Module):
            return None
        cfg = text_config(model.config)
        softcap = getattr(cfg, "final_logit_softcapping", None)  # Gemma 2 / 3
        scale = float(getattr(cfg, "logit_scale", None) or 1.0)  # Cohere multiplies
        divide = getattr(cfg, "logits_scaling", None)  # Granite divides
        if divide:
            scale /= float(divide)
        out = cls(body, head, softcap=float(softcap) if softcap else None, scale=scale)
        return out if out.reproduces(model) else None

    def hidden(self, **forward_kwargs: Any) -> torch.Tensor:
        """(1, q, H) final hidden states: the body's forward (same arguments as the model's)."""
        return self.body(**forward_kwargs).last_hidden_state

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) hidden states -> (..., V) logits, as the model's forward computes them."""
        logits = self.head(hidden)
        if self.scale != 1.0:
            logits = logits * self.scale
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def reproduces(self, model: Any, tokens: int = 5) -> bool:
        """Whether body + head gives the model's own logits on a short cacheless input."""
        vocab = model.get_input_embeddings().weight.shape[0]
        device = input_device(model)
        ids = torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(0)).to(device)
        try:
            with torch.inference_mode():
                want = model(input_ids=ids, use_cache=False).logits.float()
                got = self(self.hidden(input_ids=ids, use_cache=False)).float()
        except Exception:  # a body that will not run alone: keep the full forward
            return False
        if got.shape != want.shape:
            return False
        tol = 1e-3 * float(want.abs().max()) + 1e-5
        return bool((got - want).abs().max() <= tol)


class LazyLogits:
    """The logits of a verified tree's rows, computed when first asked for.

    hidden: (q, H) final hidden states of the root (row 0) and the draft rows. chain(row):
    the rows worth scoring together with `row` (the likeliest chain below it, the rows the walk
    visits next if the model keeps agreeing). `head_ms` sums the time spent in the head.
    """

    def __init__(
        self,
        hidden: torch.Tensor,
        head: Callable[[torch.Tensor], torch.Tensor],
        chain: Callable[[int], Sequence[int]] = lambda row: (row,),
    ) -> None:
        self.hidden = hidden
        self.head = head
        self.chain = chain
        self._rows: dict[int, torch.Tensor] = {}
        self._argmax: dict[int, int] = {}
        self.head_ms = 0.0

    def __len__(self) -> int:
        return int(self.hidden.shape[0])

    @property
    def scored(self) -> int:
        """How many rows went through the head."""
        return len(self._rows)

    def _score(self, row: int) -> None:
        rows = [r for r in dict.fromkeys([row, *self.chain(row)]) if r not in self._rows]
        t0 = time.perf_counter()
        with torch.inference_mode():
            logits = self.head(self.hidden[rows])
            best = logits.argmax(dim=-1).tolist()  # one sync for the batch
        self.head_ms += 1000 * (time.perf_counter() - t0)
        for r, lg, b in zip(rows, logits, best):
            self._rows[r] = lg
            self._argmax[r] = int(b)

    def __getitem__(self, row: int) -> torch.Tensor:
        """(V,) logits of one row."""
        if row not in self._rows:
            self._score(row)
        return self._rows[row]

    def argmax(self, row: int) -> int:
        if row not in self._argmax:
            self._score(row)
        return self._argmax[row]


def likeliest_chains(parents: np.ndarray, score: np.ndarray) -> Callable[[int], list[int]]:
    """chain(row) -> [row, its likeliest child, that one's likeliest child, ...].

    parents: (R,) parent row of every row (-1 for the root, row 0); score: (R,) how likely the
    walk is to reach each row (a predicted path probability, or a trie weight); ties go to the
    earlier row."""
    best = np.full(parents.shape[0], -1, dtype=np.int64)
    best_score = np.full(parents.shape[0], -np.inf)
    for r in range(1, parents.shape[0]):
        p = int(parents[r])
        if score[r] > best_score[p]:
            best[p], best_score[p] = r, score[r]
    nxt = best.tolist()

    def chain(row: int) -> list[int]:
        out = [row]
        while nxt[out[-1]] >= 0:
            out.append(nxt[out[-1]])
        return out

    return chain
