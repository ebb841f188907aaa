"""Keeps each request's state between steps, found by its key and checked against its row's tokens.

The key is vLLM's request id, or the batch row when the ids are not known.

Rows can be reordered between steps and a row can hold another request than last step, so a
state is extended only when the row still starts with the context it had; otherwise it is
rebuilt from the row (a wrong key costs time, never correctness). A request not in this step's
batch has ended (or was preempted, and is rebuilt when it returns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel
from rest_core.budget.chain import ChainDraft
from rest_core.drafting.context_source import ContextSource
from rest_core.serve.settings import RequestOptions


@dataclass
class RequestState:
    """What the proposer keeps for one request between steps."""

    ids: np.ndarray  # its context as of the last step (to check the row still holds it)
    context: ContextSource | None  # `ids` indexed as far as the last step that retrieved
    start: int = 0  # where its answer starts in `ids` (its prompt's length, as first seen)
    pending: ChainDraft | None = None  # the chain drafted last step, outcome not yet seen
    model: AcceptanceModel | None = None  # the acceptance model that scored it
    record: dict[str, Any] | None = None  # its draft record of last step, resolved by the outcome
    steps: int = 0
    opts: RequestOptions = field(default_factory=RequestOptions)  # what the request asked (vllm_xargs)


@dataclass(frozen=True)
class Found:
    """A row's request as `RequestTable.find` left it."""

    req: RequestState
    new: np.ndarray | None  # the tokens its context grew by since last step (None: made anew)
    rebuilt: bool = False  # the row held another request's context before


class RequestTable:
    """Request key -> `RequestState`. `new_context` makes a new request's context source (None:
    the method drafts from no context); `on_end` sees each request that ended; `read_options`
    reads a new request's vllm_xargs."""

    def __init__(
        self,
        new_context: Callable[[], ContextSource | None],
        on_end: Callable[[RequestState], None],
        read_options: Callable[[Any], RequestOptions] = RequestOptions.parse,
    ) -> None:
        self._by_key: dict[Any, RequestState] = {}
        self._new_context = new_context
        self._on_end = on_end
        self._read_options = read_options

    def find(self, key: Any, ctx: np.ndarray, extra: Any = None) -> Found:
        """The request's state, its context now `ctx`; rebuilt from the row when the row no
        longer holds the context it had (another request, or a request seen for the first time).
        `extra`: the request's SamplingParams.extra_args, read when the state is made."""
        req = self._by_key.get(key)
        n = ctx.shape[0]
        if req is not None and req.ids.shape[0] <= n and np.array_equal(req.ids, ctx[: req.ids.shape[0]]):
            new = ctx[req.ids.shape[0] :]
            req.ids = ctx.copy()
            return Found(req, new)
        if req is not None:
            self._on_end(req)  # another request in this row: the one before has ended
        # Indexed when first retrieved from (`ServedSources.retrieve`).
        made = RequestState(ctx.copy(), self._new_context(), start=max(n - 1, 0), opts=self._read_options(extra))
        self._by_key[key] = made
        return Found(made, None, rebuilt=req is not None)

    def keep_only(self, keys: set[Any]) -> None:
        """Requests not in this batch have finished (or were preempted: they are rebuilt when
        they return)."""
        for key in [k for k in self._by_key if k not in keys]:
            self._on_end(self._by_key.pop(key))

    def __getitem__(self, key: Any) -> RequestState:
        return self._by_key[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def values(self) -> Iterator[RequestState]:
        return iter(self._by_key.values())
