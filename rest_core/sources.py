"""Who drafted a token: the draft sources' bits and the one table of their names and colours.

A draft node (and so an emitted token) carries a uint8 bitmask of the sources that proposed it;
0 is the model's own token. The context is bit 2; the datastores take the other bits in the
order the engine was given them (the first, or only, store keeps bit 1 and blue), or, for an
app's fixed stores, by their place in its list (`stable_bits`), so at most six stores draft
together. A bit's colour and CSS class depend on the bit alone; its name is
the store's, from the engine's `SourceTable` (or from the step's `MatchInfo`s).

Every consumer (app, renderer, benchmark, CLI) names, colours and counts tokens through this
module, so they all agree on what "both" means: `count_origins` counts by kind ("datastore" =
drafted by one or more stores alone, "context", "both" = stores and context together, "model"),
`SourceTable.count_sources` per named source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

SOURCE_DATASTORE = 1
SOURCE_CONTEXT = 2
# The stores' bits, in the order an engine holds its stores; bit 128 is left free.
STORE_BITS: tuple[int, ...] = (SOURCE_DATASTORE, 4, 8, 16, 32, 64)
MAX_STORES = len(STORE_BITS)
STORE_MASK = sum(STORE_BITS)
RESERVED_NAMES = ("context", "model")  # a store may not take a name the table already uses


@dataclass(frozen=True)
class Origin:
    """One kind of emitted token: the model's own, one source's, or several sources'."""

    key: str  # "model" | "datastore" | "context" | "both": counting and JSON keys
    label: str  # for hover text: "datastore + context", "code + chat"
    css: str  # class name in assets/app.css
    color: str  # the highlight and trie-figure colour


# (CSS class, colour) of each bit: blue for the first store as before, amber for the context,
# then a palette for further stores (assets/app.css has the same hues), none of them green: green
# is "accepted" on the page (rest_core.ui.style.ACCEPTED_COLOR). Several sources together:
# violet, whichever they are (the label names them).
STYLES: dict[int, tuple[str, str]] = {
    SOURCE_DATASTORE: ("ds", "#2563eb"),  # blue
    SOURCE_CONTEXT: ("cx", "#d97706"),  # amber
    4: ("s2", "#db2777"),  # pink
    8: ("s3", "#0891b2"),  # cyan
    16: ("s4", "#dc2626"),  # red
    32: ("s5", "#c026d3"),  # fuchsia
    64: ("s6", "#ca8a04"),  # yellow
}
SEVERAL = ("both", "#7c3aed")  # violet
MODEL = Origin("model", "model", "model", "#111827")
KINDS = ("model", "datastore", "context", "both")  # the order of count_origins' keys


@dataclass(frozen=True)
class Source:
    """One draft source of an engine: its bit, its name (a store's name, or "context") and kind."""

    bit: int
    name: str
    kind: Literal["datastore", "context"]

    @property
    def css(self) -> str:
        return STYLES[self.bit][0]

    @property
    def color(self) -> str:
        return STYLES[self.bit][1]


def kind_of(mask: int) -> str:
    """The kind-level key of a token drafted by `mask`: "model", "datastore" (stores only),
    "context" or "both" (stores and context)."""
    mask = int(mask)
    stores, context = bool(mask & STORE_MASK), bool(mask & SOURCE_CONTEXT)
    if stores and context:
        return "both"
    return "datastore" if stores else ("context" if context else "model")


def stable_bits(names: Sequence[str], fixed: Sequence[str] = ()) -> tuple[int, ...]:
    """The bits of stores named `names`: a name in `fixed` takes the bit of its place there, the
    others the bits no fixed name holds, in order, then those of fixed names not drafting. With
    `fixed` empty, the i-th store takes the i-th bit."""
    if len(fixed) > MAX_STORES:
        raise ValueError(f"at most {MAX_STORES} stores can keep a bit, got {len(fixed)}")
    bits = {n: store_bit(i) for i, n in enumerate(fixed) if n in names}
    free = [b for b in STORE_BITS[len(fixed) :]] + [store_bit(i) for i, n in enumerate(fixed) if n not in names]
    for name in names:
        if name not in bits:
            if not free:
                raise ValueError(f"at most {MAX_STORES} datastores can draft at once, got {len(names)}")
            bits[name] = free.pop(0)
    return tuple(bits[n] for n in names)


def store_bit(index: int) -> int:
    """The bit of an engine's index-th store (0-based)."""
    if not 0 <= index < MAX_STORES:
        raise ValueError(f"at most {MAX_STORES} datastores can draft at once, got {index + 1}")
    return STORE_BITS[index]


@dataclass(frozen=True)
class SourceTable:
    """The draft sources an engine can use: its stores in order (bits 1, 4, 8, ...), then the
    context (bit 2). One table per engine; a generation enables some of them."""

    sources: tuple[Source, ...]

    @classmethod
    def for_stores(cls, names: Sequence[str], fixed: Sequence[str] = ()) -> SourceTable:
        """The table of stores named `names` (in order) plus the context. Refuses more than
        MAX_STORES stores, empty, repeated or reserved names. A store named in `fixed` (at most
        MAX_STORES names: an app's default stores) keeps the bit of its place there, so its colour,
        whichever of them a generation drafts from (`stable_bits`)."""
        names = list(names)
        if len(names) > MAX_STORES:
            raise ValueError(
                f"at most {MAX_STORES} datastores can draft at once, got {len(names)} "
                f"(a draft token's sources are 8 bits: {MAX_STORES} stores, the context and one spare)"
            )
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"a datastore name must be a non-empty string, got {name!r}")
            if name in RESERVED_NAMES:
                raise ValueError(f"a datastore cannot be named {name!r} (a draft source already has that name)")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"two datastores are named {dup!r}")
        stores = tuple(Source(b, n, "datastore") for b, n in zip(stable_bits(names, fixed), names))
        return cls(stores + (Source(SOURCE_CONTEXT, "context", "context"),))

    @property
    def stores(self) -> tuple[Source, ...]:
        return tuple(s for s in self.sources if s.kind == "datastore")

    def __iter__(self):
        return iter(self.sources)

    def bit(self, name: str) -> int:
        for s in self.sources:
            if s.name == name:
                return s.bit
        raise KeyError(name)

    def name(self, bit: int) -> str:
        """The name of one source bit, e.g. 1 -> "datastore" (or the first store's name)."""
        bit = int(bit)
        for s in self.sources:
            if s.bit == bit:
                return s.name
        return default_name(bit)

    def names(self, mask: int) -> tuple[str, ...]:
        """Names of the sources in a bitmask, stores first, e.g. 3 -> ("datastore", "context")."""
        return tuple(s.name for s in self.sources if int(mask) & s.bit)

    def origin(self, mask: int) -> Origin:
        """The origin of a token drafted by the sources in `mask` (0 = the model's own)."""
        return origin(mask, {s.bit: s.name for s in self.sources})

    def count_sources(self, masks: Iterable[int]) -> dict[str, int]:
        """Tokens per named source, every source of the table present. A token that several
        sources proposed counts for each of them (so the counts can add up to more than the
        drafted tokens; `count_origins` counts each token once)."""
        counts = {s.name: 0 for s in self.sources}
        for mask in masks:
            for s in self.sources:
                if int(mask) & s.bit:
                    counts[s.name] += 1
        return counts


DEFAULT_SOURCES = SourceTable.for_stores(("datastore",))  # one store, as an engine given `datastore=`


def default_name(bit: int) -> str:
    """A bit's name when no table says: "datastore", "context", "store 2", ... "store 6"."""
    bit = int(bit)
    if bit == SOURCE_CONTEXT:
        return "context"
    if bit in STORE_BITS:
        i = STORE_BITS.index(bit)
        return "datastore" if i == 0 else f"store {i + 1}"
    return f"source {bit}"


def origin(mask: int, names: Mapping[int, str] | None = None) -> Origin:
    """The origin of a token drafted by the sources in `mask` (0 = the model's own). `names`
    maps bits to source names (an engine's table, or a step's matches); else default names."""
    mask = int(mask)
    if mask == 0:
        return MODEL
    bits = [b for b in (*STORE_BITS, SOURCE_CONTEXT) if mask & b]
    if not bits:  # only bits no source uses (a hand-made mask)
        return Origin(kind_of(mask), f"source {mask}", *SEVERAL)
    label = " + ".join((names or {}).get(b) or default_name(b) for b in bits)
    css, color = STYLES[bits[0]] if len(bits) == 1 else SEVERAL
    return Origin(kind_of(mask), label, css, color)


def source_name(bit: int) -> str:
    """The default name of one source bit, e.g. 1 -> "datastore"."""
    return default_name(bit)


def source_names(mask: int) -> tuple[str, ...]:
    """Default names of the sources in a bitmask, e.g. 3 -> ("datastore", "context")."""
    return DEFAULT_SOURCES.names(mask)


def count_origins(masks: Iterable[int]) -> dict[str, int]:
    """Tokens per kind, every key present: {"datastore", "context", "both", "model"}.
    "datastore" counts tokens drafted by one or more stores without the context; a token that
    stores and context both proposed counts once, under "both"."""
    counts = {key: 0 for key in KINDS}
    for mask in masks:
        counts[kind_of(mask)] += 1
    return counts
