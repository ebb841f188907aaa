"""The draft-source contract: what every source of drafts (a datastore, the conversation) returns
and the three calls the engine makes on it.

Every source follows `DraftSource`: `reset(prompt)` once per generation, `extend(new_tokens)`
after every step, `retrieve()` before every step. One file per source beside this one:
`datastore_source.py` (REST, paper section 3.2) and `context_source.py` (the context itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

PAD = -1  # continuation slot after a separator or past the end of the tokens
SHOWN_POSITIONS = 8  # occurrences whose start a source reports (for "where it came from")


@dataclass(frozen=True)
class Retrieved:
    """What one source found for one context.

    continuations: (k, m) int64; row i holds the m tokens after the i-th sampled occurrence,
    -1 from the first separator (or the end of the text) on. k == 0 when nothing matched.
    """

    source_bit: int
    suffix_len: int  # 0 = no suffix of length >= n_min matched
    suffix_tokens: tuple[int, ...]
    occurrences: int  # all occurrences of the suffix, before sampling
    continuations: np.ndarray = field(repr=False)
    weight: float = 1.0
    # Where the first few sampled occurrences (rows of `continuations`) start, in the source's
    # own coordinates: a datastore's token stream (all shards one after the other), the
    # context's token index; for showing where a draft came from, not for drafting.
    positions: tuple[int, ...] = ()

    @classmethod
    def empty(cls, source_bit: int, m: int, weight: float = 1.0) -> Retrieved:
        return cls(source_bit, 0, (), 0, np.empty((0, m), dtype=np.int64), weight)


class DraftSource(Protocol):
    """Where drafts come from. The engine tells a source the context once, then only what is new.

    bit: the source's identity (see rest_core.sources); name: what the app, bench and CLI call
    it ("context", a store's name); weight: its share in the merged trie.
    """

    bit: int
    name: str
    weight: float

    def reset(self, context_ids: Sequence[int] | np.ndarray) -> None:
        """Start a generation whose context (the prompt) is `context_ids`."""

    def extend(self, new_ids: Sequence[int] | np.ndarray) -> None:
        """Append the tokens a step emitted to the context."""

    def retrieve(self) -> Retrieved:
        """The continuations of the current context's longest matching suffix."""
