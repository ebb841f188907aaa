"""The REST proposer's draft log, read back by a client of the vLLM server: which of a request's
output tokens came from accepted drafts, from which sources, and how they split into engine
steps. No vLLM import, no HTTP: the app's vLLM backend (`rest_core.ui.vllm_calls`) feeds it.

The proposer (`rest_core.serve.proposer`, with a `log`) writes one JSON line per resolved chain:

    {"kind": "draft", "req": "cmpl-<id>-0-<8 hex>", "context_len": n, "drafted": [...],
     "bits": [...], "accepted": a, ...}

`req` is vLLM's internal request id: the id a completion stream's chunks carry, then "-<index
of the prompt>-" and a random suffix (`request_prefix`). The chain was drafted when the request's
context held n tokens (prompt + output so far), so output positions n - prompt_len ... + a - 1 are
its accepted drafts and the next one is the model's own token: one engine step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_LOG_BYTES = 64 << 20  # the log is emptied past this, whenever nobody is reading a request from it


@dataclass(frozen=True)
class DraftRecord:
    """One resolved chain of one request."""

    context_len: int
    drafted: tuple[int, ...]
    bits: tuple[int, ...]  # per drafted token: the source bitmask (rest_core.sources) that proposed it
    accepted: int
    p: tuple[float, ...] = ()  # the acceptance model's predicted chance of each prefix


@dataclass(frozen=True)
class Step:
    """One engine step of a request: output positions [start, end), the first `accepted` of them
    accepted drafts (sources in `bits`), then the model's own token; `record` is the chain that
    step verified (None: it verified no draft)."""

    start: int
    end: int
    accepted: int
    bits: tuple[int, ...]
    record: DraftRecord | None


def request_prefix(stream_id: str, index: int = 0) -> str:
    """The start of the internal request id of prompt `index` of a completion whose stream chunks
    carry `stream_id` (vLLM 0.32: f"{stream_id}-{index}-{random 8}")."""
    return f"{stream_id}-{index}-"


def parse_record(line: str) -> tuple[str, DraftRecord] | None:
    """(request id, record) of one log line, or None for any other line (a step line, a line cut
    short, anything malformed)."""
    try:
        raw = json.loads(line)
        if raw.get("kind") != "draft" or raw.get("accepted") is None:
            return None
        drafted = tuple(int(t) for t in raw["drafted"])
        bits = tuple(int(b) for b in raw.get("bits", ()))
        if len(bits) != len(drafted):
            bits = (0,) * len(drafted)
        rec = DraftRecord(
            int(raw["context_len"]),
            drafted,
            bits,
            int(raw["accepted"]),
            tuple(float(x) for x in raw.get("p", ())),
        )
        return str(raw["req"]), rec
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def answer_steps(records: Sequence[DraftRecord], prompt_len: int, tokens: Sequence[int], begin: int = 0) -> list[Step]:
    """The engine steps that made `tokens` (a request's output so far, after a prompt of
    `prompt_len` tokens) from position `begin` on (where an earlier call's steps ended), from its
    resolved chains. A chain counts only where its accepted tokens are the output's at its
    position (anything else is not this request's, or not yet seen); positions no chain explains
    are steps of one token of the model's own."""
    at: dict[int, DraftRecord] = {}
    for r in records:
        start = r.context_len - prompt_len
        if begin <= start < len(tokens) and 0 <= r.accepted <= len(r.drafted):
            seen = min(r.accepted, len(tokens) - start)  # the output may end inside the step
            if tuple(tokens[start : start + seen]) == r.drafted[:seen]:
                at[start] = r
    steps, i = [], begin
    while i < len(tokens):
        r = at.get(i)
        if r is None:
            steps.append(Step(i, i + 1, 0, (), None))
            i += 1
            continue
        end = min(i + r.accepted + 1, len(tokens))
        accepted = min(r.accepted, end - i)
        steps.append(Step(i, end, accepted, r.bits[:accepted], r))
        i = end
    return steps


class DraftLog:
    """Follows a draft log another process appends to, keeping the records of the requests being
    watched (by id prefix) and dropping every other line. Memory: the watched requests' records
    only; the file is emptied (`trim`) when it grows past `max_bytes` while nothing is watched.
    Thread-safety: one reader at a time (the caller's lock)."""

    def __init__(self, path: str | Path, max_bytes: int = MAX_LOG_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._offset = 0
        self._partial = b""
        self._watched: dict[str, list[DraftRecord]] = {}

    def watch(self, prefix: str) -> None:
        self._watched.setdefault(prefix, [])

    def forget(self, prefix: str) -> None:
        self._watched.pop(prefix, None)

    def records(self, prefix: str) -> list[DraftRecord]:
        """The watched request's records read so far (call `poll` first for the newest)."""
        return list(self._watched.get(prefix, ()))

    def poll(self) -> int:
        """Read what was appended since the last call; the number of records kept."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return 0
        if size < self._offset:  # emptied (trim), or replaced: start again from its beginning
            self._offset, self._partial = 0, b""
        if size == self._offset:
            return 0
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read(size - self._offset)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # a line still being written
        kept = 0
        for line in lines:
            if not self._watched or not line.startswith(b'{"kind": "draft"'):
                continue
            parsed = parse_record(line.decode("utf-8", "replace"))
            if parsed is None:
                continue
            req, rec = parsed
            for prefix, recs in self._watched.items():
                if req.startswith(prefix):
                    recs.append(rec)
                    kept += 1
                    break
        return kept

    def trim(self) -> bool:
        """Empty the file if it is past max_bytes and no request is watched (the proposer appends,
        so its next line lands at the new start). True if it was emptied."""
        if self._watched:
            return False
        try:
            if self.path.stat().st_size <= self.max_bytes:
                return False
            os.truncate(self.path, 0)
        except OSError:
            return False
        self._offset, self._partial = 0, b""
        return True
