"""Where the draft tree's nodes sit: the model's own token's place (`model_token_place`) and each
node's row (`layout_rows`), for `rest_core.ui.trie_view.tree_view`."""

from __future__ import annotations

import numpy as np

from rest_core.decode.events import StepEvent
from rest_core.drafting.trie import Trie


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


def layout_rows(
    trie: Trie, nodes: np.ndarray, parent_pos: np.ndarray, model_token: int | None, model_parent_pos: int
) -> tuple[np.ndarray, int]:
    """Each shown node's row (index n: the model's token) and how many rows the layout has."""
    # Leaves get consecutive rows in depth-first order (heavy children first), the model's token
    # a leaf of its own, last under its parent; a parent sits at the mean of its children's rows.
    # Index n is the star, n + 1 the root.
    n = len(nodes)
    children: list[list[int]] = [[] for _ in range(n + 2)]
    for k, p in enumerate(parent_pos):
        children[p if p >= 0 else n + 1].append(k)
    for ch in children:
        ch.sort(key=lambda k: (-trie.weights[nodes[k]], int(trie.tokens[nodes[k]])))
    if model_token is not None:
        children[model_parent_pos if model_parent_pos >= 0 else n + 1].append(n)
    y = np.zeros(n + 1)
    next_row = [0.0]

    def place(k: int) -> float:
        kids = children[k] if k < n else []
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
