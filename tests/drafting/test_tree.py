"""Tree layout: attention mask, positions, parent rows and child lookup, by hand."""

from __future__ import annotations

import numpy as np

from rest_core.drafting.tree import child_table, layout, parent_rows, position_offsets, tree_attention_mask
from rest_core.drafting.trie import Trie, empty_trie


def draft(tokens, parents) -> Trie:
    parents = np.asarray(parents, dtype=np.int64)
    depths = np.zeros(len(parents), dtype=np.int64)
    for i, p in enumerate(parents):
        depths[i] = 1 if p < 0 else depths[p] + 1
    n = len(parents)
    return Trie(np.asarray(tokens, np.int64), parents, depths, np.ones(n), np.ones(n, np.uint8))


# root -> a(0) -> c(2) -> e(4)
#      -> b(1)    d(3) (child of a)
D = draft([10, 11, 12, 13, 14], [-1, -1, 0, 0, 2])


def test_mask_hand_worked():
    expect = np.array(
        [
            # r  a  b  c  d  e
            [1, 0, 0, 0, 0, 0],  # root
            [1, 1, 0, 0, 0, 0],  # a
            [1, 0, 1, 0, 0, 0],  # b
            [1, 1, 0, 1, 0, 0],  # c: root, a, itself
            [1, 1, 0, 0, 1, 0],  # d: root, a, itself
            [1, 1, 0, 1, 0, 1],  # e: root, a, c, itself
        ],
        dtype=bool,
    )
    mask = tree_attention_mask(D)
    assert mask.dtype == np.bool_ and mask.shape == (6, 6)
    assert np.array_equal(mask, expect)


def test_chain_mask_is_causal():
    chain = draft([1, 2, 3, 4], [-1, 0, 1, 2])
    assert np.array_equal(tree_attention_mask(chain), np.tril(np.ones((5, 5), dtype=bool)))


def test_positions_parents_children():
    assert position_offsets(D).tolist() == [0, 1, 1, 2, 2, 3]
    assert parent_rows(D).tolist() == [-1, 0, 0, 1, 1, 3]
    assert child_table(D) == {(0, 10): 1, (0, 11): 2, (1, 12): 3, (1, 13): 4, (3, 14): 5}


def test_layout_walk():
    tree = layout(D)
    assert len(tree) == 5
    assert tree.child(0, 10) == 1 and tree.child(1, 12) == 3 and tree.child(3, 14) == 5
    assert tree.child(0, 12) is None
    # what the verify forward and the lazy head's chains read: mask, positions and parent rows
    assert np.array_equal(tree.mask, tree_attention_mask(D)) and tree.positions.tolist() == [0, 1, 1, 2, 2, 3]
    assert tree.parents.tolist() == [-1, 0, 0, 1, 1, 3] and tree.tokens.tolist() == [10, 11, 12, 13, 14]


def test_empty_draft():
    tree = layout(empty_trie())
    assert tree.mask.tolist() == [[True]]
    assert tree.positions.tolist() == [0] and tree.parents.tolist() == [-1]
    assert tree.children == {} and len(tree) == 0
