"""Opens the proposer's draft sources and retrieves from them for one request.

The served datastores, the request's own context ("hybrid", "context") and the earlier answers
of its namespace ("hybrid")."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from rest_core.drafting.answers_source import AnswerNamespaces
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.source import Retrieved
from rest_core.serve.request_table import RequestState
from rest_core.serve.settings import ANSWERS_NAME, MAX_ANSWER_NAMESPACES, RequestOptions, ServeSettings
from rest_core.sources import MAX_STORES, SourceTable
from rest_core.store.opened import OpenStores

# The stores opened in this process: vLLM may build several proposers in one worker.
_STORES = OpenStores()
# Unknown store names said on stderr, at most this many per proposer (the rest are only counted):
# a client naming a new store in every request must not fill the server's log.
UNKNOWN_SAID = 8


def open_store(path: str, tokenizer: Any, check: bool = True) -> Any:
    """The datastore at `path`, opened once per process and checked against the model's tokenizer."""
    return _STORES.open(path, tokenizer if check else None)


class ServedSources:
    """The sources every request may draft from, named in one `SourceTable`; `tokenizer` is
    called for the model's tokenizer only when a store is to be checked against it."""

    def __init__(self, settings: ServeSettings, tokenizer: Callable[[], Any]) -> None:
        s = self.settings = settings
        opened = []
        if s.use_stores:
            tok = tokenizer() if s.check_tokenizer else None
            opened = [(spec, open_store(spec.path, tok, s.check_tokenizer)) for spec in s.stores]
        names = [spec.name for spec, _ in opened]
        answers = s.use_answers and len(names) < MAX_STORES and ANSWERS_NAME not in names
        if s.use_answers and not answers:
            print(
                f"REST proposer: no bit left for earlier answers (or a store is named {ANSWERS_NAME!r})",
                file=sys.stderr,
            )
        self.table = SourceTable.for_stores(names + ([ANSWERS_NAME] if answers else []))
        # The answers this server finished, per namespace (RequestOptions.answers).
        self.answers_bit = self.table.bit(ANSWERS_NAME) if answers else 0
        self.histories = AnswerNamespaces(s.answers_tokens, MAX_ANSWER_NAMESPACES)
        self.stores = [
            DatastoreSource(ds, s.retrieval, spec.weight, bit=src.bit, name=src.name)
            for (spec, ds), src in zip(opened, self.table.stores[: len(opened)], strict=True)
        ]
        self.served = frozenset(names)
        self.unknown_requests = 0  # requests that named a store this server does not serve
        self.ignored: dict[str, int] = {}  # per xarg: requests whose value was not understood
        self._said: set[str] = set()

    def options(self, extra: object) -> RequestOptions:
        """A new request's options (its vllm_xargs), counted when they name unknown stores or
        hold values not understood; the first few unknown names are said on stderr."""
        opts = RequestOptions.parse(extra, self.served)
        for key in opts.ignored:
            self.ignored[key] = self.ignored.get(key, 0) + 1
        if opts.unknown:
            self.unknown_requests += 1
            new = [n for n in opts.unknown if n not in self._said][: UNKNOWN_SAID - len(self._said)]
            if new:
                self._said.update(new)
                more = (
                    "" if len(self._said) < UNKNOWN_SAID else "; further names are only counted (xargs in the totals)"
                )
                print(
                    f"REST proposer: a request named datastores this server does not serve: {', '.join(map(ascii, new))}"
                    f" (served: {', '.join(sorted(self.served)) or 'none'}); it drafts from those named that are served{more}",
                    file=sys.stderr,
                )
        return opts

    def xargs_totals(self) -> dict[str, object]:
        """How many requests named unknown stores, and per xarg how many held a value not understood."""
        return {"unknown_stores": self.unknown_requests, "ignored": dict(self.ignored)}

    def new_context(self) -> ContextSource | None:
        """A new request's own context source (None: the method drafts from no context)."""
        if not self.settings.use_context:
            return None
        return ContextSource(self.settings.retrieval, self.settings.context_weight)

    def retrieve(self, req: RequestState, ctx: np.ndarray) -> list[Retrieved]:
        """What this request's sources find for its context."""
        retrieved = []
        tail = ctx[-self.settings.retrieval.n_max :]
        for store in self.stores:
            if req.opts.stores is not None and store.name not in req.opts.stores:
                continue
            store.reset(tail)  # a store's source keeps only the last n_max tokens: shared by all rows
            retrieved.append(store.retrieve())
        if req.context is not None and req.opts.context:
            # Indexed only up to the last step that retrieved: skipped steps leave it behind.
            req.context.extend(ctx[len(req.context) :])
            retrieved.append(req.context.retrieve())
        if self.answers_bit and req.opts.answers is not None:
            history = self.histories.get(req.opts.answers)
            r, bit = self.settings.retrieval, self.answers_bit
            retrieved.append(history.retrieve(tail, r, bit, 1.0) if history else Retrieved.empty(bit, r.m))
        return retrieved

    def archive(self, req: RequestState) -> None:
        """An ended request's answer (what it generated, as far as the proposer saw it) joins its
        namespace's history of answers."""
        if self.answers_bit and req.opts.answers is not None and req.ids.shape[0] > req.start:
            self.histories.add(req.opts.answers, req.ids[req.start :])
