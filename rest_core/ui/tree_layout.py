"""Which trie nodes the draft tree draws and where (`tree_view`): the accepted path, the draft
and the heaviest retrieved-only nodes (`_drawn`), a crowded level folded (`fold_siblings`), the
model's own token's place (`model_token_place`) and each node's row (`layout_rows`); and the
compact events a session keeps (`compact_event`). Drawn by `rest_core.ui.trie_view`."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rest_core.decode.events import StepEvent
from rest_core.drafting.trie import Trie
from rest_core.ui.tree_key import draft_states


def model_token_place(
    event: StepEvent, trie: Trie, nodes: np.ndarray, parent_pos: np.ndarray, accepted: np.ndarray
) -> tuple[int | None, int, int]:
    """The model's own last token: (token, where it hangs, its shown position if the trie had it)."""
    if not (event.tokens and event.token_sources and event.token_sources[-1] == 0):
        return None, -1, -1
    model_token = int(event.tokens[-1])
    acc_nodes = [k for k, t in enumerate(nodes) if accepted[t]]
    model_parent_pos = max(acc_nodes, key=lambda k: trie.depths[nodes[k]]) if acc_nodes else -1
    model_in_trie_pos = -1
    for k in range(len(nodes)):
        if parent_pos[k] == model_parent_pos and int(trie.tokens[nodes[k]]) == model_token:
            model_in_trie_pos = k
    return model_token, model_parent_pos, model_in_trie_pos


def _children(trie: Trie, nodes: np.ndarray, parent_pos: np.ndarray, drafted: np.ndarray) -> list[list[int]]:
    """Each shown node's children (index n: the root's), as the layout orders them: the drafted ones
    in their verify-table row order (the draft's breadth-first order, which `nodes` keeps), so the
    row numbers read downwards in every column; then the retrieved-only ones, heaviest first."""
    n = len(nodes)
    children: list[list[int]] = [[] for _ in range(n + 1)]
    for k, p in enumerate(parent_pos):
        children[p if p >= 0 else n].append(k)

    def order(k: int) -> tuple:
        return (0, k, 0) if drafted[k] else (1, -trie.weights[nodes[k]], int(trie.tokens[nodes[k]]))

    for ch in children:
        ch.sort(key=order)
    return children


def fold_siblings(
    trie: Trie,
    nodes: np.ndarray,
    parent_pos: np.ndarray,
    keep: np.ndarray,
    max_rows: int,
    star: bool,
    drafted: np.ndarray | None = None,
) -> tuple[set[int], dict[int, list[int]]]:
    """Where a level crowds: the shown positions to hide, and per parent (-1: the root) the
    children folded into one "+N more" node, so the layout needs at most `max_rows` rows (the
    model's token takes one). The crowdedest level gives up its lightest child first, with its
    subtree; nodes where `keep` holds (the accepted path) and their ancestors never fold."""
    n = len(nodes)
    children = _children(trie, nodes, parent_pos, np.zeros(n, bool) if drafted is None else drafted)
    protect = keep.copy()
    for k in np.flatnonzero(keep):
        p = int(parent_pos[k])
        while p >= 0 and not protect[p]:
            protect[p] = True
            p = int(parent_pos[p])
    hidden: set[int] = set()
    folds: dict[int, list[int]] = {}

    def rows(k: int) -> int:  # rows under k (k = n: the root), folds included
        shown = [c for c in children[k] if c not in hidden]
        fold = int((k if k < n else -1) in folds)
        return fold + sum(rows(c) for c in shown) if shown or fold else int(k < n)

    def subtree(k: int) -> list[int]:
        return [k] + [d for c in children[k] for d in subtree(c)]

    while rows(n) + int(star) > max_rows:
        best: tuple[int, int, int] | None = None  # (shown children, parent, the child to fold)
        for k, ch in enumerate(children):
            shown = [c for c in ch if c not in hidden]
            cand = [c for c in shown if not protect[c]]
            parent = k if k < n else -1
            if len(cand) >= 2 or (parent in folds and cand):
                if best is None or len(shown) > best[0]:
                    lightest = min(cand, key=lambda c: (trie.weights[nodes[c]], -int(trie.tokens[nodes[c]])))
                    best = (len(shown), parent, lightest)
        if best is None:
            break
        _, parent, child = best
        hidden.update(subtree(child))
        folds.setdefault(parent, []).append(child)
    return hidden, folds


def layout_rows(
    trie: Trie,
    nodes: np.ndarray,
    parent_pos: np.ndarray,
    model_token: int | None,
    model_parent_pos: int,
    fold_parents: tuple[int, ...] = (),
    drafted: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Each shown node's row (index n: the model's token, n + 2 + i: the i-th "+N more" node,
    hanging under `fold_parents[i]`) and how many rows the layout has."""
    # Leaves get consecutive rows in depth-first order (children as `_children` orders them), a fold after its
    # siblings, the model's token a leaf of its own, last under its parent; a parent sits at the
    # mean of its children's rows. Index n is the star, n + 1 the root.
    n = len(nodes)
    children = _children(trie, nodes, parent_pos, np.zeros(n, bool) if drafted is None else drafted)
    children = children[:n] + [[], children[n]] + [[] for _ in fold_parents]
    for i, p in enumerate(fold_parents):
        children[p if p >= 0 else n + 1].append(n + 2 + i)
    if model_token is not None:
        children[model_parent_pos if model_parent_pos >= 0 else n + 1].append(n)
    y = np.zeros(n + 2 + len(fold_parents))
    next_row = [0.0]

    def place(k: int) -> float:
        kids = children[k] if k != n else []
        real = [c for c in kids if c != n]
        if not real:  # a leaf; a leaf under which the star hangs keeps its row, the star takes the next
            y[k] = next_row[0]
            next_row[0] += 1
            if kids:
                place(n)
        else:  # a parent sits at the mean of its drawn children's rows, not the star's
            rows = {c: place(c) for c in kids}
            y[k] = float(np.mean([rows[c] for c in real]))
        return y[k]

    for k in children[n + 1]:
        place(k)
    return y, int(next_row[0])


@dataclass(frozen=True)
class TreeView:
    """The part of a step's trie that is drawn, with each node's role (testable without Plotly)."""

    nodes: np.ndarray  # trie indices shown, BFS order
    selected: np.ndarray  # bool per shown node: in the verified top-c draft
    accepted: np.ndarray  # bool per shown node: on the accepted path
    x: np.ndarray  # depth
    y: np.ndarray  # vertical position
    parent_pos: np.ndarray  # position in `nodes` of each node's parent, -1 = root
    total_nodes: int
    model_token: int | None  # the token the model emitted itself at the end of the accepted path
    model_parent_pos: int  # where that token hangs (-1 = root)
    model_in_trie_pos: int  # its shown position if the retrieved trie had it (but not drafted), else -1
    star_x: float = 0.0  # where the model's token is drawn: a row of its own, under its parent
    star_y: float = 0.0
    states: tuple[str, ...] = ()  # per shown node: its `DraftState` ("retrieved" when not drafted)
    rows: int = 0  # rows of the layout: each leaf, and the model's token, has one of its own
    # a crowded level's lightest siblings, folded into one "+N more" node each:
    # (its parent's position, -1 = root; its x; its y; the trie indices folded, subtrees included)
    folds: tuple[tuple[int, float, float, tuple[int, ...]], ...] = ()
    # per shown node: its row in the verify table and the mask (draft index + 1), 0 when not drafted
    draft_rows: tuple[int, ...] = ()


def draft_to_trie(trie: Trie, draft: Trie) -> np.ndarray:
    """Trie index of every draft node (matched by token path, so any node order works). A draft
    is at most a few dozen nodes and a trie tens of thousands (K=5000): each draft node is looked
    up among its parent's children with array compares, no table over the whole trie."""
    out = np.full(len(draft), -1, dtype=np.int64)
    for i in range(len(draft)):
        p = int(draft.parents[i])
        tp = -1 if p < 0 else int(out[p])
        if p >= 0 and tp < 0:
            continue  # its parent is not in the trie, so neither is it
        hit = np.flatnonzero((trie.parents == tp) & (trie.tokens == int(draft.tokens[i])))
        out[i] = int(hit[0]) if len(hit) else -1
    return out


TRIE_MAX_NODES = 40  # nodes drawn per step (the accepted path and the draft first)
TRIE_MAX_EXTRA = 8  # of which at most this many retrieved-only nodes
HEAVIEST_KEPT = 64  # a compact event also keeps the heaviest retrieved-only nodes (Why this c?, c <= 64)


def _drawn(event: StepEvent, max_nodes: int, max_extra: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which trie nodes the figure draws (accepted path, then drafted, then at most `max_extra`
    retrieved-only nodes, heaviest first, closed under ancestors), as boolean masks over the
    trie: (drawn, selected, accepted), and the trie index of each draft node (-1: not found)."""
    trie = event.trie
    assert trie is not None
    n = len(trie)
    selected = np.zeros(n, dtype=bool)
    accepted = np.zeros(n, dtype=bool)
    d2t = np.zeros(0, dtype=np.int64)
    if event.draft is not None and len(event.draft):
        d2t = draft_to_trie(trie, event.draft)
        ok = d2t >= 0
        selected[d2t[ok]] = True
        acc = [int(d2t[i]) for i in event.accepted if d2t[i] >= 0]
        accepted[acc] = True
    else:
        selected[[i for i in event.draft_idx if 0 <= i < n]] = True

    order = _draw_order(trie, selected, accepted, max_extra)
    keep = np.zeros(n, dtype=bool)
    count = 0
    extra = 0
    for i in order:
        if count >= max_nodes:
            break
        if not selected[i]:
            if extra >= max_extra:
                break  # the rest of the order is retrieved-only nodes too
            extra += 1
        j = int(i)
        while j >= 0 and not keep[j]:  # add the node with its missing ancestors
            keep[j] = True
            count += 1
            j = int(trie.parents[j])
    return keep, selected, accepted, d2t


def _draw_order(trie: Trie, selected: np.ndarray, accepted: np.ndarray, max_extra: int) -> np.ndarray:
    """The order `_drawn` walks: accepted path, drafted nodes, then the rest; heavier first,
    shallower on ties, then by index. Only the first `max_extra` retrieved-only nodes can be
    drawn, so only those ranked at or above the max_extra-th heaviest weight are sorted (ties
    included): the same order's prefix, without sorting a K=5000 trie of 80,000 nodes."""
    rest = np.flatnonzero(~selected)
    if max_extra <= 0:
        rest = rest[:0]
    elif max_extra < len(rest):
        w = trie.weights[rest]
        cut = np.partition(w, len(w) - max_extra)[len(w) - max_extra]
        rest = rest[w >= cut]
    cand = np.concatenate([np.flatnonzero(selected), rest])
    key = np.lexsort((cand, trie.depths[cand], -trie.weights[cand], ~selected[cand], ~accepted[cand]))
    return cand[key]


def compact_event(event: StepEvent, max_extra: int = TRIE_MAX_EXTRA) -> StepEvent:
    """The event with its trie cut to what the page can show of it: the nodes the figure draws,
    the whole verified draft (at most c nodes) and the `HEAVIEST_KEPT` heaviest retrieved-only
    nodes (what a budget up to 64 would verify: Why this c? and the sources' shares read them),
    closed under ancestors and re-indexed; `draft_idx` follows and
    `trie_nodes` keeps the whole trie's size for the figure's title. A step's retrieved trie
    holds tens of thousands of nodes at K=5000, so a session keeps these instead; the figure and
    the inspector of the compact event equal those of the full one.

    Why the figure is unchanged: the kept nodes keep their relative (breadth-first) order, every
    drawn node's ancestors are drawn, and the kept nodes are the drawing order's first ones (the
    whole draft, then at least `max_extra` retrieved-only nodes, with their ancestors), which
    hold whatever prefix of that order the figure draws; so `_drawn` picks the same nodes."""
    trie = event.trie
    if trie is None or len(trie) == 0 or event.trie_nodes is not None:
        return event
    keep, _, _, d2t = _drawn(event, len(trie), max(max_extra, HEAVIEST_KEPT))
    keep[d2t[d2t >= 0]] = True
    keep[[i for i in event.draft_idx if 0 <= i < len(trie)]] = True
    old = np.flatnonzero(keep)  # ascending: the breadth-first order is kept
    new_of = np.full(len(trie) + 1, -1, dtype=np.int64)  # old index -> new; slot -1 maps the root to -1
    new_of[old] = np.arange(len(old))
    small = Trie(
        tokens=trie.tokens[old].copy(),
        parents=new_of[trie.parents[old]],
        depths=trie.depths[old].copy(),
        weights=trie.weights[old].copy(),
        sources=trie.sources[old].copy(),
    )
    draft_idx = tuple(int(new_of[i]) for i in event.draft_idx if 0 <= i < len(trie))
    return replace(event, trie=small, draft_idx=draft_idx, trie_nodes=len(trie))


MAX_ROWS = 10  # rows the figure's height holds with 12 px labels on a phone; retrieved-only nodes give way first


def tree_view(event: StepEvent, max_nodes: int = TRIE_MAX_NODES, max_extra: int = TRIE_MAX_EXTRA) -> TreeView | None:
    """Choose which trie nodes to draw (see `_drawn`) and lay them out: depth to the right,
    drafted siblings in their row order from the top (`_children`), every leaf and the model's own token in a row of its own; fewer
    retrieved-only nodes where their rows would crowd the drafted ones, then, where the draft
    alone needs more than MAX_ROWS rows, a crowded level's lightest siblings folded into one
    "+N more" node (`fold_siblings`)."""
    trie = event.trie
    if trie is None or len(trie) == 0:
        return None
    view = _laid_out(event, max_nodes, max_extra)
    while view.rows > MAX_ROWS and max_extra > 0:
        max_extra -= 1
        view = _laid_out(event, max_nodes, max_extra)
    if view.rows > MAX_ROWS:
        view = _laid_out(event, max_nodes, max_extra, MAX_ROWS)
    return view


def _folded(
    event: StepEvent, keep: np.ndarray, accepted: np.ndarray, selected: np.ndarray, max_rows: int
) -> list[tuple[int, tuple[int, ...]]]:
    """Clear from `keep` the nodes `fold_siblings` folds; per fold, its parent's trie index (-1:
    the root) and the trie indices it holds."""
    trie = event.trie
    assert trie is not None
    nodes = np.flatnonzero(keep)
    pos = {int(t): k for k, t in enumerate(nodes)}
    parent_pos = np.array([pos.get(int(trie.parents[t]), -1) for t in nodes], dtype=np.int64)
    star = bool(event.tokens and event.token_sources and event.token_sources[-1] == 0)
    hidden, folds = fold_siblings(trie, nodes, parent_pos, accepted[nodes], max_rows, star, selected[nodes])
    keep[nodes[sorted(hidden)]] = False
    out = []
    for p, kids in folds.items():
        under = {int(nodes[k]) for k in kids}
        held = tuple(int(t) for t in nodes if int(t) in under or _under(trie, int(t), under))
        out.append((int(nodes[p]) if p >= 0 else -1, held))
    return out


def _under(trie: Trie, t: int, tops: set[int]) -> bool:
    while t >= 0:
        if t in tops:
            return True
        t = int(trie.parents[t])
    return False


def _laid_out(event: StepEvent, max_nodes: int, max_extra: int, max_rows: int = 0) -> TreeView:
    """The drawn nodes (`_drawn`) with their states, the model's own token and their rows;
    with `max_rows`, a crowded level's lightest siblings folded (`_folded`)."""
    trie = event.trie
    assert trie is not None
    keep, selected, accepted, d2t = _drawn(event, max_nodes, max_extra)
    folded = _folded(event, keep, accepted, selected, max_rows) if max_rows else []
    nodes = np.flatnonzero(keep)  # BFS order, so parents come before children
    pos = {int(t): k for k, t in enumerate(nodes)}
    parent_pos = np.array([pos.get(int(trie.parents[t]), -1) for t in nodes], dtype=np.int64)
    state_of = {int(t): st for t, st in zip(d2t, draft_states(event)) if t >= 0}
    states = tuple(state_of.get(int(t), "retrieved") for t in nodes)
    row_of = {int(t): i + 1 for i, t in enumerate(d2t) if t >= 0}
    model_token, model_parent_pos, model_in_trie_pos = model_token_place(event, trie, nodes, parent_pos, accepted)
    fold_parents = tuple(pos.get(p, -1) for p, _ in folded)
    y, rows = layout_rows(trie, nodes, parent_pos, model_token, model_parent_pos, fold_parents, selected[nodes])
    n = len(nodes)
    x = trie.depths[nodes].astype(float)
    folds = tuple(
        (p, (float(x[p]) if p >= 0 else 0.0) + 1, -float(y[n + 2 + i]), held)
        for i, (p, (_, held)) in enumerate(zip(fold_parents, folded))
    )
    star_x = (float(x[model_parent_pos]) if model_parent_pos >= 0 else 0.0) + 1
    return TreeView(
        nodes=nodes,
        selected=selected[nodes],
        accepted=accepted[nodes],
        x=x,
        y=-y[:n],
        parent_pos=parent_pos,
        total_nodes=event.trie_nodes if event.trie_nodes is not None else len(trie),
        model_token=model_token,
        model_parent_pos=model_parent_pos,
        model_in_trie_pos=model_in_trie_pos,
        star_x=star_x,
        star_y=-float(y[n]),
        states=states,
        rows=rows,
        folds=folds,
        draft_rows=tuple(row_of.get(int(t), 0) for t in nodes),
    )
