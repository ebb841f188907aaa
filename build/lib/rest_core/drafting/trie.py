"""Weighted trie over retrieved continuations and exact top-c subtree selection (numpy arrays)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rest_core._jit import jit

if TYPE_CHECKING:
    from rest_core.drafting.source import Retrieved


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


@jit(inline=True)
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
    built one depth at a time in a single sweep over the rows still running at that depth: a
    row starts a new node where its parent or its token differs from the previous row's.
    Nodes are numbered as they appear, which is already breadth-first order (depth, then
    parent, then token).
    """
    k, m = rows.shape
    active = _sort_rows(rows)  # rows still running at this depth, in sorted order
    n_active = k
    cap = k * m
    tok = np.empty(cap, np.int64)
    par = np.empty(cap, np.int64)
    dep = np.empty(cap, np.int64)
    wgt = np.empty(cap, np.float64)
    src = np.empty(cap, np.uint8)
    node_of = np.full(k, -1, np.int64)  # each active row's node at the previous depth
    count = 0
    for j in range(m):
        kept = 0
        node = -1
        prev_parent = -2
        prev_token = -1
        w = 0.0
        bits = np.uint8(0)
        for r in range(n_active):
            row = active[r]
            t = rows[row, j]
            if t < 0:
                continue  # the row ends here
            parent = node_of[r]
            if parent != prev_parent or t != prev_token:
                if node >= 0:
                    wgt[node] = w
                    src[node] = bits
                node = count
                count += 1
                tok[node] = t
                par[node] = parent
                dep[node] = j + 1
                prev_parent = parent
                prev_token = t
                w = 0.0
                bits = np.uint8(0)
            w += row_weight[row]
            bits |= row_bits[row]
            active[kept] = row
            node_of[kept] = node
            kept += 1
        if node >= 0:
            wgt[node] = w
            src[node] = bits
        n_active = kept
        if n_active == 0:
            break
    return tok[:count].copy(), par[:count].copy(), dep[:count].copy(), wgt[:count].copy(), src[:count].copy()


def empty_trie() -> Trie:
    return Trie(
        np.empty(0, np.int64),
        np.empty(0, np.int64),
        np.empty(0, np.int64),
        np.empty(0, np.float64),
        np.empty(0, np.uint8),
    )


def build_trie(retrieved: Sequence[Retrieved]) -> Trie:
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


@jit(inline=True)
def _ranks_before(w: np.ndarray, i: np.ndarray, a: int, b: int) -> bool:
    """Entry a ranks before entry b: heavier, or as heavy and earlier in BFS order."""
    return w[a] > w[b] or (w[a] == w[b] and i[a] < i[b])


@jit(inline=True)
def _heap_push(hw: np.ndarray, hi: np.ndarray, size: int, w: float, node: int, worst_first: bool) -> None:
    """Push onto the binary heap hw/hi[:size] (best entry on top, or the worst if worst_first)."""
    pos = size
    hw[pos] = w
    hi[pos] = node
    while pos > 0:
        up = (pos - 1) >> 1
        if _ranks_before(hw, hi, up, pos) == worst_first:
            hw[pos], hw[up] = hw[up], hw[pos]
            hi[pos], hi[up] = hi[up], hi[pos]
            pos = up
        else:
            break


@jit(inline=True)
def _heap_pop(hw: np.ndarray, hi: np.ndarray, size: int, worst_first: bool) -> None:
    """Remove the top of the heap hw/hi[:size] (its new size is size - 1)."""
    size -= 1
    hw[0] = hw[size]
    hi[0] = hi[size]
    pos = 0
    while True:
        top = pos
        child = 2 * pos + 1
        if child < size and _ranks_before(hw, hi, child, top) != worst_first:
            top = child
        child += 1
        if child < size and _ranks_before(hw, hi, child, top) != worst_first:
            top = child
        if top == pos:
            break
        hw[pos], hw[top] = hw[top], hw[pos]
        hi[pos], hi[top] = hi[top], hi[pos]
        pos = top


@jit(inline=True)
def _first_at_least(a: np.ndarray, v: int) -> int:
    """The first index i with a[i] >= v in the non-decreasing array a (len(a) if none)."""
    lo = 0
    hi = a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def _top_c(parents: np.ndarray, weights: np.ndarray, c: int) -> np.ndarray:
    """Best-first walk from the root: take the best candidate (weight desc, index asc), make
    its children candidates. Every node ranks after its parent (weight <=, index >), so this
    takes exactly the global top-c nodes, and they form a connected subtree.

    Children of node p are the contiguous block where parents == p (parents are non-decreasing
    in BFS order). When r nodes remain to be taken, only the r best children of a block can
    ever be taken (a child is taken only after every better sibling), so a large block (the
    root may have thousands of children) is first cut to its best r with a small heap.
    """
    n = parents.shape[0]
    c = min(c, n)
    chosen = np.empty(c, np.int64)
    heap_w = np.empty(n, np.float64)  # candidates, best on top
    heap_i = np.empty(n, np.int64)
    best_w = np.empty(c, np.float64)  # a block's best r children, worst on top
    best_i = np.empty(c, np.int64)
    size = 0
    node = -1  # the root
    for taken in range(c):
        remaining = c - taken
        first = _first_at_least(parents, node)
        last = _first_at_least(parents, node + 1)
        if last - first <= remaining:
            for child in range(first, last):
                _heap_push(heap_w, heap_i, size, weights[child], child, False)
                size += 1
        else:
            kept = 0
            for child in range(first, last):
                if kept < remaining:
                    _heap_push(best_w, best_i, kept, weights[child], child, True)
                    kept += 1
                elif weights[child] > best_w[0]:  # ties keep the earlier child already kept
                    _heap_pop(best_w, best_i, kept, True)
                    _heap_push(best_w, best_i, kept - 1, weights[child], child, True)
            for j in range(kept):
                _heap_push(heap_w, heap_i, size, best_w[j], best_i[j], False)
                size += 1
        node = heap_i[0]
        chosen[taken] = node
        _heap_pop(heap_w, heap_i, size, False)
        size -= 1
    return np.sort(chosen)


def select_top_c(trie: Trie, c: int) -> np.ndarray:
    """Indices (sorted) of exactly min(c, len(trie)) nodes: the heaviest, ties broken by
    smaller depth then BFS index. Weights never grow from parent to child, so they form a
    connected subtree hanging off the root. `trie` must be in BFS order (as `build_trie` and
    `subtree` return it): the children of a node are found as a contiguous block."""
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
