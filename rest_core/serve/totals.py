"""Counts the proposer's running totals and writes them to the totals file (`stats`).

Drafted and accepted tokens per source kind and per named source, the lengths drafted, the steps
timed, skipped and explored, over the worker process: what `bench --engine vllm` reports."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rest_core.budget.chain import ChainDraft
from rest_core.sources import KINDS, SourceTable, kind_of

FLUSH_S = 1.0  # the totals file is written at most this often (the draft log: every call)


class ProposerTotals:
    """Drafted and accepted tokens per source kind and per named source, over the process."""

    def __init__(self, table: SourceTable) -> None:
        self.table = table
        self.calls = 0
        self.rows = 0
        self.rows_with_candidates = 0
        self.rows_drafted = 0
        self.candidate_tokens = 0
        self.drafted_tokens = 0
        self.accepted_tokens = 0
        self.resolved_drafts = 0
        self.rebuilt = 0
        self.steps_timed = 0  # engine steps whose time was learned
        self.steps_skipped = 0  # steps that retrieved nothing: no draft could pay
        self.steps_explored = 0  # steps whose draft was pushed off the best plan, to time another size
        self.propose_ms = 0.0
        self.req_ids = "unknown"
        self.drafted_by_kind = dict.fromkeys(KINDS, 0)
        self.accepted_by_kind = dict.fromkeys(KINDS, 0)
        self.drafted_by_source = dict.fromkeys((s.name for s in table), 0)
        self.accepted_by_source = dict.fromkeys((s.name for s in table), 0)
        self.length_hist: dict[int, int] = {}

    def add(self, chain: ChainDraft, drafted: ChainDraft) -> None:
        self.rows += 1
        self.rows_with_candidates += bool(len(chain))
        self.rows_drafted += bool(len(drafted))
        self.candidate_tokens += len(chain)
        self.drafted_tokens += len(drafted)
        self.length_hist[len(drafted)] = self.length_hist.get(len(drafted), 0) + 1
        for m in drafted.sources:
            self.drafted_by_kind[kind_of(int(m))] += 1
        for name, n in self.table.count_sources(int(m) for m in drafted.sources).items():
            self.drafted_by_source[name] += n

    def add_empty(self, rows: int) -> None:
        """`add` for `rows` rows that had no candidates (retrieval skipped)."""
        self.rows += rows
        if rows:
            self.length_hist[0] = self.length_hist.get(0, 0) + rows

    def resolve(self, drafted: ChainDraft, accepted: int) -> None:
        self.resolved_drafts += 1
        self.accepted_tokens += accepted
        for m in drafted.sources[:accepted]:
            self.accepted_by_kind[kind_of(int(m))] += 1
        for name, n in self.table.count_sources(int(m) for m in drafted.sources[:accepted]).items():
            self.accepted_by_source[name] += n

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "table"}
        out["length_hist"] = {str(k): v for k, v in sorted(self.length_hist.items())}
        out["propose_ms"] = round(self.propose_ms, 3)
        return out


class TotalsFile:
    """The file the proposer's snapshot (its totals, its cost curve) is written to ("": none)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._written = -float("inf")  # when it was last written

    def write(self, now: float, snapshot: Callable[[], dict[str, Any]]) -> None:
        """Write the snapshot, at most every FLUSH_S seconds: opening and writing the file costs
        about a millisecond on this machine's disk (a step of one request, 30; of 32 requests,
        155), and at a full batch a step that drafts nothing costs the proposer well under one.
        Called at the start of a step, so what is written is complete up to the step before: a
        reader that wants a generation's totals runs one more short request after it, FLUSH_S
        later."""
        if now - self._written < FLUSH_S:
            return
        self._written = now
        if self.path:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(json.dumps(snapshot()))
