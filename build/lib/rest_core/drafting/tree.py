"""Lay a draft subtree out for one verification forward pass (pure numpy, no torch).

The draft is verified as a pseudo-sequence after the root (the last accepted token): row 0 is
the root and draft node i is row i + 1, in the draft's breadth-first order. Each row attends to
the root, its ancestors and itself; its position is the root's position plus its depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rest_core._jit import jit
from rest_core.drafting.trie import Trie


@jit
def _mask(parents: np.ndarray) -> np.ndarray:
    n = parents.shape[0]
    mask = np.zeros((n + 1, n + 1), np.bool_)
    mask[0, 0] = True
    for i in range(n):
        row = i + 1
        up = parents[i] + 1  # the parent's row (0 = root); parents come first in BFS order
        for j in range(up + 1):
            mask[row, j] = mask[up, j]
        mask[row, row] = True
    return mask


def tree_attention_mask(draft: Trie) -> np.ndarray:
    """(N+1, N+1) bool: mask[r, s] is True when row r may attend to row s (s is r, an ancestor
    of r, or the root). Rows and columns: 0 = root, i + 1 = draft node i."""
    return _mask(np.ascontiguousarray(draft.parents, dtype=np.int64))


def position_offsets(draft: Trie) -> np.ndarray:
    """(N+1,) int64: [0, depth of node 0, ...]; add the root's position to get position ids."""
    return np.concatenate(([0], draft.depths)).astype(np.int64)


def parent_rows(draft: Trie) -> np.ndarray:
    """(N+1,) int64: the parent row of every row; -1 for the root."""
    return np.concatenate(([-1], draft.parents + 1)).astype(np.int64)


def child_table(draft: Trie) -> dict[tuple[int, int], int]:
    """(parent row, token) -> child row, for walking the tree during acceptance."""
    rows = (draft.parents + 1).tolist()
    return {(p, t): i + 1 for i, (p, t) in enumerate(zip(rows, draft.tokens.tolist()))}


@dataclass(frozen=True)
class TreeLayout:
    """Everything the verification forward and the acceptance walk need about a draft."""

    tokens: np.ndarray  # (N,) int64 draft tokens, row i + 1
    mask: np.ndarray  # (N+1, N+1) bool, see tree_attention_mask
    positions: np.ndarray  # (N+1,) int64 depth offsets, row 0 = root = 0
    parents: np.ndarray  # (N+1,) int64 parent rows, -1 for the root
    children: dict[tuple[int, int], int]  # (parent row, token) -> row

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def child(self, row: int, token: int) -> int | None:
        """The row of `row`'s child that drafts `token`, or None."""
        return self.children.get((row, token))


def layout(draft: Trie) -> TreeLayout:
    """The draft's mask, positions, parent rows and child table."""
    return TreeLayout(
        tokens=draft.tokens,
        mask=tree_attention_mask(draft),
        positions=position_offsets(draft),
        parents=parent_rows(draft),
        children=child_table(draft),
    )
