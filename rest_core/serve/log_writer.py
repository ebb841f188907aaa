"""Writes the proposer's draft records and draft log (`rest_core.serve.records` reads it back).

One JSON line per resolved chain and one per step, flushed at the end of every propose() call."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from rest_core.budget.chain import ChainDraft
from rest_core.serve.step_cost import ProposeCall
from rest_core.sources import SourceTable


class DraftLogWriter:
    """The last `keep` draft records (in memory), and the log file at `path` ("": none)."""

    def __init__(self, table: SourceTable, keep: int, path: str = "") -> None:
        self.table = table
        self.records: deque[dict[str, Any]] = deque(maxlen=keep)
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 - lives as long as the proposer

    @property
    def writing(self) -> bool:
        return self._file is not None

    def drafted(self, key: Any, step: int, n: int, drafted: ChainDraft, chain: ChainDraft) -> dict[str, Any] | None:
        """The record of a request's chain (`chain`, cut to `drafted`) at context length `n`, its
        `step`-th; None when there were no candidates. Returned to be resolved by the outcome
        only when something was drafted."""
        if not (len(drafted) or len(chain)):
            return None
        record = {
            "kind": "draft",
            "req": key if not isinstance(key, tuple) else f"row{key[1]}",
            "step": step,
            "context_len": n,
            "drafted": [int(t) for t in drafted.tokens],
            "sources": drafted.sources.tolist(),  # bitmasks; named when the record is written
            "p": [round(float(x), 4) for x in drafted.p],
            "candidates": len(chain),
            "accepted": None,
        }
        self.records.append(record)
        return record if len(drafted) else None

    def resolved(self, record: dict[str, Any], accepted: int) -> None:
        """The record's drafts had their first `accepted` accepted: its line of the log."""
        record["accepted"] = accepted
        if self._file is not None:
            bits = record["sources"]
            line = {**record, "sources": [self.table.origin(m).label for m in bits], "bits": bits}
            self._file.write(json.dumps(line) + "\n")

    def step(
        self,
        previous: ProposeCall,
        step: ProposeCall,
        rows: int,
        drafting: list[Any],
        start: float,
        end: float,
        retrieve: bool,
    ) -> None:
        """One line of the step log: the step that ended as this call began (its wall time, what it
        verified) and this call's time."""
        if self._file is None:
            return
        verified = sum(1 + previous.drafted.get(key, 0) for key in drafting)
        line = {
            "kind": "step",
            "rows": rows,
            "tokens": verified,
            "clean": bool(step.clean and previous.clean),
            "step_ms": round(1000.0 * (start - previous.end), 3),
            "propose_ms": round(1000.0 * (end - start), 3),
            "retrieved": retrieve,
            "drafted_next": sum(step.drafted.values()),
        }
        self._file.write(json.dumps(line) + "\n")

    def flush(self) -> None:
        """What this call resolved, before vLLM sends the tokens it explains."""
        if self._file is not None:
            self._file.flush()
