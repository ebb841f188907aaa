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

    Rows are visited in sorted order, so the rows sharing a prefix are adjacent: each row
    reuses the nodes of the previous row up to their first difference and creates the rest.
    Nodes are created in depth-first (= lexicographic) order; within one depth that is
    already (parent order, token order), so a stable counting sort by depth gives BFS order.
    """
    k, m = rows.shape
    order = _sort_rows(rows)
    cap = k * m
    tok = np.empty(cap, np.int64)
    par = np.empty(cap, np.int64)
    dep = np.empty(cap, np.int64)
    wgt = np.zeros(cap, np.float64)
    src = np.zeros(cap, np.uint8)
    path = np.full(m, -1, np.int64)  # node of the previous row at each depth
    prev = -1
    count = 0
    for r in range(k):
        row = order[r]
        w = row_weight[row]
        bits = row_bits[row]
        shared = True
        for j in range(m):
            t = rows[row, j]
            if t < 0:
                break
            if shared and prev >= 0 and rows[prev, j] == t:
                node = path[j]
            else:
                shared = False
                node = count
                count += 1
                tok[node] = t
                par[node] = path[j - 1] if j > 0 else -1
                dep[node] = j + 1
                path[j] = node
            wgt[node] += w
            src[node] |= bits
        prev = row
    # Stable counting sort by depth: BFS rank of every node.
    per_depth = np.zeros(m + 2, np.int64)
    for i in range(count):
        per_depth[dep[i] + 1] += 1
    for d in range(1, m + 2):
        per_depth[d] += per_depth[d - 1]
    rank = np.empty(count, np.int64)
    for i in range(count):
        d = dep[i]
        rank[i] = per_depth[d]
        per_depth[d] += 1
    out_tok = np.empty(count, np.int64)
    out_par = np.empty(count, np.int64)
    out_dep = np.empty(count, np.int64)
    out_wgt = np.empty(count, np.float64)
    out_src = np.empty(count, np.uint8)
    for i in range(count):
        b = rank[i]
        out_tok[b] = tok[i]
        out_par[b] = rank[par[i]] if par[i] >= 0 else -1
        out_dep[b] = dep[i]
        out_wgt[b] = wgt[i]
        out_src[b] = src[i]
    return out_tok, out_par, out_dep, out_wgt, out_src


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


def subtree(trie: Trie, idx: np.ndarray | Sequence[int]) -> Trie:
    """The nodes `idx` (which must include every selected node's parent) as a Trie of their own,
    in BFS order with parents remapped."""
    idx = np.unique(np.asarray(idx, dtype=np.int64))
    if idx.size == 0:
        return empty_trie()
    if idx[0] < 0 or idx[-1] >= len(trie):
        raise IndexError(f"node index out of range for a trie of {len(trie)} nodes")
    old_parents = trie.parents[idx]
    new_parents = np.searchsorted(idx, old_parents)
    has_parent = old_parents >= 0
    found = np.zeros(idx.shape[0], dtype=bool)
    found[has_parent] = idx[np.minimum(new_parents[has_parent], idx.size - 1)] == old_parents[has_parent]
    if not np.array_equal(found, has_parent):
        raise ValueError("subtree: the selected nodes are not connected (a parent is missing)")
    new_parents = np.where(has_parent, new_parents, -1).astype(np.int64)
    return Trie(
        trie.tokens[idx], new_parents, trie.depths[idx], trie.weights[idx], trie.sources[idx]
    )


def node_path(trie: Trie, i: int) -> list[int]:
    """Node indices from the root's child down to node i."""
    path = []
    while i >= 0:
        path.append(int(i))
        i = int(trie.parents[i])
    return path[::-1]
