"""Weighted trie over retrieved continuations and exact top-c subtree selection (numpy arrays)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from rest_core._jit import jit

if TYPE_CHECKING:
    from rest_core.retrieval import Retrieved


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


# --- building ------------------------------------------------------------------------------

_LAST = np.iinfo(np.int64).max  # padding sorts after every token: matches the suffix array's order


@jit
def _row_less_equal(rows: np.ndarray, a: int, b: int) -> bool:
    """rows[a] <= rows[b] lexicographically, padding (-1) sorting after every token."""
    for j in range(rows.shape[1]):
        x = rows[a, j]
        y = rows[b, j]
        if x < 0:
            x = _LAST
        if y < 0:
            y = _LAST
        if x != y:
            return x < y
        if x == _LAST:
            return True
    return True


@jit
def _sort_rows(rows: np.ndarray) -> np.ndarray:
    """Row order (stable): bottom-up merge sort that skips merges of runs already in order, so
    rows that arrive sorted (a suffix-array range) cost one comparison per row."""
    k = rows.shape[0]
    order = np.arange(k)
    in_order = True
    for i in range(1, k):
        if not _row_less_equal(rows, order[i - 1], order[i]):
            in_order = False
            break
    if in_order:
        return order
    tmp = np.empty_like(order)
    width = 1
    while width < k:
        for lo in range(0, k, 2 * width):
            mid = min(lo + width, k)
            hi = min(lo + 2 * width, k)
            if mid >= hi or _row_less_equal(rows, order[mid - 1], order[mid]):
                continue
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                if _row_less_equal(rows, order[i], order[j]):
                    tmp[o] = order[i]
                    i += 1
                else:
                    tmp[o] = order[j]
                    j += 1
                o += 1
            while i < mid:
                tmp[o] = order[i]
                i += 1
                o += 1
            while j < hi:
                tmp[o] = order[j]
                j += 1
                o += 1
            order[lo:hi] = tmp[lo:hi]
        width *= 2
    return order


@jit
def _build(rows: np.ndarray, row_weight: np.ndarray, row_bits: np.ndarray):
    """Trie arrays (tokens, parents, depths, weights, sources) in breadth-first order.

    With the rows in sorted order, the rows sharing a prefix are adjacent, so the trie is
    built one depth at a time in a single sweep over the rows per depth: a row starts a new
    node where its parent or its token differs from the previous row's. Nodes are numbered
    as they appear, which is already breadth-first order (depth, then parent, then token).
    """
    k, m = rows.shape
    order = _sort_rows(rows)
    cap = k * m
    tok = np.empty(cap, np.int64)
    par = np.empty(cap, np.int64)
    dep = np.empty(cap, np.int64)
    wgt = np.zeros(cap, np.float64)
    src = np.zeros(cap, np.uint8)
    node_of = np.full(k, -1, np.int64)  # each sorted row's node at the previous depth
    count = 0
    for j in range(m):
        prev_parent = -2
        prev_token = -1
        node = -1
        for r in range(k):
            parent = node_of[r]
            if j > 0 and parent < 0:
                continue  # this row ended at an earlier depth
            row = order[r]
            t = rows[row, j]
            if t < 0:
                node_of[r] = -1
                continue
            if parent != prev_parent or t != prev_token:
                node = count
                count += 1
                tok[node] = t
                par[node] = parent
                dep[node] = j + 1
                prev_parent = parent
                prev_token = t
            wgt[node] += row_weight[row]
            src[node] |= row_bits[row]
            node_of[r] = node
    return tok[:count].copy(), par[:count].copy(), dep[:count].copy(), wgt[:count].copy(), src[:count].copy()


def empty_trie() -> Trie:
    return Trie(
        np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
        np.empty(0, np.float64), np.empty(0, np.uint8),
    )


def build_trie(retrieved: Sequence["Retrieved"]) -> Trie:
    """Merge the continuations of several sources into one weighted trie.

    A node's weight is the sum, over the continuations passing through it, of their source's
    weight; `sources` ORs the source bits of those continuations.
    """
    parts = [r for r in retrieved if r.continuations.shape[0]]
    if not parts:
        return empty_trie()
    if len(parts) == 1:
        rows = np.ascontiguousarray(parts[0].continuations, dtype=np.int64)
    else:
        m = max(r.continuations.shape[1] for r in parts)
        rows = np.full((sum(r.continuations.shape[0] for r in parts), m), -1, dtype=np.int64)
        at = 0
        for r in parts:
            k, w = r.continuations.shape
            rows[at : at + k, :w] = r.continuations
            at += k
    weights = np.concatenate([np.full(r.continuations.shape[0], r.weight, np.float64) for r in parts])
    bits = np.concatenate([np.full(r.continuations.shape[0], r.source_bit, np.uint8) for r in parts])
    return Trie(*_build(rows, weights, bits))


# --- selecting the draft -------------------------------------------------------------------


@jit
def _heap_before(w: np.ndarray, i: np.ndarray, a: int, b: int) -> bool:
    return w[a] > w[b] or (w[a] == w[b] and i[a] < i[b])


@jit
def _top_c(parents: np.ndarray, weights: np.ndarray, c: int) -> np.ndarray:
    """Best-first walk from the root: pop the best candidate (weight desc, index asc), push its
    children. Every node ranks after its parent (weight <=, index >), so this picks exactly the
    global top-c nodes, which form a connected subtree. Children of node p are the contiguous
    block where parents == p (parents are non-decreasing in BFS order)."""
    n = parents.shape[0]
    c = min(c, n)
    chosen = np.empty(c, np.int64)
    heap_w = np.empty(n, np.float64)
    heap_i = np.empty(n, np.int64)
    size = 0
    node = -1  # the root
    for step in range(c + 1):
        if step > 0:
            # pop the best candidate
            node = heap_i[0]
            chosen[step - 1] = node
            size -= 1
            heap_w[0] = heap_w[size]
            heap_i[0] = heap_i[size]
            pos = 0
            while True:
                left = 2 * pos + 1
                if left >= size:
                    break
                best = left
                if left + 1 < size and _heap_before(heap_w, heap_i, left + 1, left):
                    best = left + 1
                if _heap_before(heap_w, heap_i, best, pos):
                    heap_w[pos], heap_w[best] = heap_w[best], heap_w[pos]
                    heap_i[pos], heap_i[best] = heap_i[best], heap_i[pos]
                    pos = best
                else:
                    break
            if step == c:
                break
        first = np.searchsorted(parents, node, side="left")
        last = np.searchsorted(parents, node, side="right")
        for child in range(first, last):
            pos = size
            heap_w[pos] = weights[child]
            heap_i[pos] = child
            size += 1
            while pos > 0:
                up = (pos - 1) >> 1
                if _heap_before(heap_w, heap_i, pos, up):
                    heap_w[pos], heap_w[up] = heap_w[up], heap_w[pos]
                    heap_i[pos], heap_i[up] = heap_i[up], heap_i[pos]
                    pos = up
                else:
                    break
    return np.sort(chosen)


def select_top_c(trie: Trie, c: int) -> np.ndarray:
    """Indices (sorted) of exactly min(c, len(trie)) nodes: the heaviest, ties broken by
    smaller depth then BFS index. Weights never grow from parent to child, so they form a
    connected subtree hanging off the root."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    if len(trie) == 0 or c == 0:
        return np.empty(0, np.int64)
    return _top_c(trie.parents, trie.weights, int(c))


@jit
def _remap_parents(parents: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Parents of the nodes idx (sorted, unique) as positions in idx; -2 where the parent is
    not among them."""
    out = np.empty(idx.shape[0], np.int64)
    for i in range(idx.shape[0]):
        p = parents[idx[i]]
        if p < 0:
            out[i] = -1
        else:
            at = np.searchsorted(idx, p)
            out[i] = at if at < idx.shape[0] and idx[at] == p else -2
    return out


def subtree(trie: Trie, idx: np.ndarray | Sequence[int]) -> Trie:
    """The nodes `idx` (which must include every selected node's parent) as a Trie of their own,
    in BFS order with parents remapped."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if idx.size > 1 and not np.all(idx[1:] > idx[:-1]):
        idx = np.unique(idx)
    if idx.size == 0:
        return empty_trie()
    if idx[0] < 0 or idx[-1] >= len(trie):
        raise IndexError(f"node index out of range for a trie of {len(trie)} nodes")
    new_parents = _remap_parents(trie.parents, idx)
    if new_parents.min() < -1:
        raise ValueError("subtree: the selected nodes are not connected (a parent is missing)")
    return Trie(trie.tokens[idx], new_parents, trie.depths[idx], trie.weights[idx], trie.sources[idx])


def node_path(trie: Trie, i: int) -> list[int]:
    """Node indices from the root's child down to node i."""
    path = []
    while i >= 0:
        path.append(int(i))
        i = int(trie.parents[i])
    return path[::-1]
