"""The ShareGPT conversations held out of the `chat` store, so that their prompts can benchmark it.

MT-Bench's evaluation split has 20 questions, too few for distinct prompts at batch 8 and 32. The
`chat` store is built from ShareGPT, so ShareGPT's own prompts would find their recorded answers in
it. A conversation is held out when its first user message, normalised (whitespace collapsed,
lower case), hashes to 0 modulo HOLD_OUT_EVERY: every conversation that opens with the same
message (ShareGPT repeats popular prompts) is held out together, so no copy of a held-out prompt's
answer is left in the store. The `chat` corpus skips these conversations; the `sharegpt` benchmark
suite asks their first messages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

HOLD_OUT_EVERY = 50  # about 2% of ShareGPT's conversations
HELD_OUT_RULE = (
    f"conversations whose first user message (whitespace collapsed, lower case) hashes to 0 mod {HOLD_OUT_EVERY} "
    "(sha256), kept for the sharegpt benchmark suite"
)
USER_ROLES = frozenset({"human", "user"})
# A held-out prompt the benchmark asks: a real question a small chat model can answer in English.
PROMPT_CHARS = (20, 1500)
MIN_ASCII = 0.97


def normalised(text: str) -> str:
    return " ".join(text.split()).lower()


def first_user_message(record: Any) -> str | None:
    """A ShareGPT record's first user turn, or None (not a conversation, or no user turn)."""
    if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
        return None
    for turn in record["conversations"]:
        if isinstance(turn, dict) and str(turn.get("from", "")).lower() in USER_ROLES:
            value = turn.get("value")
            return value if isinstance(value, str) else None
    return None


def is_held_out(first_message: str | None) -> bool:
    """Whether a conversation opening with this message is kept out of the `chat` store."""
    if not first_message or not first_message.strip():
        return False
    digest = hashlib.sha256(normalised(first_message).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % HOLD_OUT_EVERY == 0


def usable_prompt(text: str) -> bool:
    """A prompt the benchmark asks: not tiny, not a pasted document, mostly ASCII (English)."""
    stripped = text.strip()
    low, high = PROMPT_CHARS
    if not low <= len(stripped) <= high:
        return False
    return sum(ch.isascii() for ch in stripped) >= MIN_ASCII * len(stripped)


def held_out_prompts(records: Iterator[Any]) -> list[tuple[str, str]]:
    """(conversation id, first user message) of the held-out conversations in file order, one per
    distinct message, those `usable_prompt` accepts."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for i, record in enumerate(records):
        message = first_user_message(record)
        if not is_held_out(message) or not usable_prompt(message):
            continue
        key = normalised(message)
        if key in seen:
            continue
        seen.add(key)
        rid = record.get("id") if isinstance(record.get("id"), (str, int)) else f"#{i + 1}"
        out.append((str(rid), message.strip()))
    return out


def leaks_held_out(meta: dict[str, Any]) -> bool:
    """Whether a datastore (its meta.json) was built from ShareGPT without leaving the held-out
    conversations out (a `chat` store built before they were), so the held-out prompts' recorded
    answers are in it."""
    info = meta.get("source_info") or {}
    from_sharegpt = info.get("kind") in ("chat", "sharegpt") or "ShareGPT" in str(meta.get("source", ""))
    return from_sharegpt and info.get("held_out") != HELD_OUT_RULE


def check_store_for_suite(suite: str, folder: str) -> None:
    """ValueError when the `sharegpt` suite would run against a store that holds its answers."""
    if suite != "sharegpt":
        return
    from rest_core.store.format import read_meta

    if leaks_held_out(read_meta(folder)):
        raise ValueError(
            f"datastore {folder} holds the held-out ShareGPT conversations whose prompts the sharegpt suite asks "
            "(it was built before they were left out), so every prompt would find its own answer: rebuild it "
            f"(`python -m rest_core datastore build --source chat --out {folder} --force`)"
        )
