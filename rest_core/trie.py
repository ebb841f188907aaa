"""Weighted trie over retrieved continuations and exact top-c subtree selection (pure numpy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Trie:
    """A forest hanging off an implicit root (the last context token).

    Nodes are in breadth-first order: by depth, then by parent order, then by token id.
    parents[i] == -1 means node i is a child of the implicit root (depth 1).
    A node's weight is the (source-weighted) number of continuations passing through it,
    so a parent always weighs at least as much as each child.
    """

    tokens: np.ndarray  # (N,) int64 token ids
    parents: np.ndarray  # (N,) int64, -1 = child of the root
    depths: np.ndarray  # (N,) int64, 1 = child of the root
    weights: np.ndarray  # (N,) float64
    sources: np.ndarray  # (N,) uint8 bitmask of the sources that proposed the node

    def __len__(self) -> int:
        return int(self.tokens.shape[0])
