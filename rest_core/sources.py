"""Who drafted a token: the draft sources' bits and the one table of their names and colours.

A draft node (and so an emitted token) carries a bitmask of the sources that proposed it; 0 is
the model's own token. Every consumer (app, renderer, benchmark, CLI) names, colours and counts
tokens through `origin` and `count_origins`, so they all agree on what "both" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

SOURCE_DATASTORE = 1
SOURCE_CONTEXT = 2


@dataclass(frozen=True)
class Origin:
    """One kind of emitted token: the model's own, one source's, or several sources'."""

    key: str  # "model" | "datastore" | "context" | "both": counting and JSON keys
    label: str  # for hover text: "datastore + context"
    css: str  # class name in assets/app.css
    color: str  # the highlight and trie-figure colour


MODEL = Origin("model", "model", "model", "#111827")
# Keyed by bitmask; any mask of more than one bit is "both".
ORIGINS: dict[int, Origin] = {
    0: MODEL,
    SOURCE_DATASTORE: Origin("datastore", "datastore", "ds", "#2563eb"),  # blue
    SOURCE_CONTEXT: Origin("context", "context", "cx", "#d97706"),  # amber
    SOURCE_DATASTORE | SOURCE_CONTEXT: Origin("both", "datastore + context", "both", "#7c3aed"),  # violet
}
SOURCE_NAMES: dict[int, str] = {bit: ORIGINS[bit].key for bit in (SOURCE_DATASTORE, SOURCE_CONTEXT)}


def origin(mask: int) -> Origin:
    """The origin of a token drafted by the sources in `mask` (0 = the model's own)."""
    mask = int(mask)
    if mask in ORIGINS:
        return ORIGINS[mask]
    return ORIGINS[SOURCE_DATASTORE | SOURCE_CONTEXT]


def source_name(bit: int) -> str:
    """The name of one source bit, e.g. 1 -> "datastore"."""
    return SOURCE_NAMES[int(bit)]


def source_names(mask: int) -> tuple[str, ...]:
    """Names of the sources in a bitmask, e.g. 3 -> ("datastore", "context")."""
    return tuple(name for bit, name in SOURCE_NAMES.items() if mask & bit)


def count_origins(masks: Iterable[int]) -> dict[str, int]:
    """Tokens per origin, every key present: {"datastore", "context", "both", "model"}.
    A token proposed by both sources counts once, under "both"."""
    counts = {o.key: 0 for o in ORIGINS.values()}
    for mask in masks:
        counts[origin(mask).key] += 1
    return counts
