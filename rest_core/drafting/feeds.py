"""Which retrieved continuations fed a step's heaviest first-level trie nodes: per node, how many
of each source's continuations start with its token and the commonest of them, so a page can show
the continuations that actually made the branches the step drafted (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rest_core.drafting.source import Retrieved
from rest_core.drafting.trie import Trie

FEED_NODES = 5  # heaviest first-level nodes described per step
FEED_EXAMPLES = 3  # continuations shown per node
FEED_TOKENS = 8  # tokens kept of each example


@dataclass(frozen=True)
class Example:
    """One distinct continuation through a node, cut to its first tokens."""

    tokens: tuple[int, ...]  # the continuation's first tokens (at most FEED_TOKENS)
    count: int  # retrieved continuations that begin with exactly these tokens
    more: bool  # some of them go on past `tokens`


@dataclass(frozen=True)
class Feed:
    """The continuations through one first-level node of the merged trie."""

    token: int  # the node's token (the first token after the matched suffix)
    weight: float  # its weight in the merged trie (each source's weight spread over its own rows)
    # per source that retrieved anything, in the step's order: (source bit, continuations that
    # begin with `token`, continuations it retrieved)
    counts: tuple[tuple[int, int, int], ...]
    examples: tuple[Example, ...]  # the commonest distinct continuations through it, commonest first
    first_level: float = 0.0  # the weight of all the trie's first-level nodes together (0: unknown)

    @property
    def share(self) -> float | None:
        """Its weight over the first level's: what the step picks its nodes by (None when unknown)."""
        return self.weight / self.first_level if self.first_level > 0 else None

    @property
    def fed(self) -> int:
        """Continuations, over all sources, that run through this node."""
        return sum(n for _, n, _ in self.counts)

    @property
    def retrieved(self) -> int:
        return sum(k for _, _, k in self.counts)


def feeds(
    retrieved: Sequence[Retrieved],
    trie: Trie | None,
    nodes: int = FEED_NODES,
    examples: int = FEED_EXAMPLES,
    length: int = FEED_TOKENS,
    lead: int | None = None,
) -> tuple[Feed, ...]:
    """The `nodes` heaviest first-level nodes of `trie` (built from `retrieved`), heaviest first,
    each with its continuations per source and its `examples` commonest continuations cut to
    `length` tokens (ties: the continuation that sorts first). `lead`: a token whose first-level
    node goes first, whatever its weight (the step's accepted first token)."""
    parts = [r for r in retrieved if r.continuations.shape[0]]
    if trie is None or not len(trie) or not parts or nodes <= 0:
        return ()
    first = np.flatnonzero(trie.depths == 1)
    order = first[np.lexsort((first, -trie.weights[first]))]  # weight desc, then BFS order
    if lead is not None:
        order = np.concatenate([order[trie.tokens[order] == lead], order[trie.tokens[order] != lead]])
    order = order[:nodes]
    level = float(trie.weights[first].sum())
    out = []
    for i in order:
        tok = int(trie.tokens[i])
        through = [r.continuations[r.continuations[:, 0] == tok] for r in parts]
        counts = tuple(
            (int(r.source_bit), int(t.shape[0]), int(r.continuations.shape[0])) for r, t in zip(parts, through)
        )
        out.append(Feed(tok, float(trie.weights[i]), counts, _commonest(through, examples, length), level))
    return tuple(out)


def _commonest(rows: Sequence[np.ndarray], n: int, length: int) -> tuple[Example, ...]:
    """The `n` commonest distinct first-`length`-token prefixes of the rows (-1 = ended)."""
    width = max(r.shape[1] for r in rows)
    padded = np.full((sum(r.shape[0] for r in rows), max(width, length + 1)), -1, dtype=np.int64)
    at = 0
    for r in rows:
        padded[at : at + r.shape[0], : r.shape[1]] = r
        at += r.shape[0]
    keys, inverse, counts = np.unique(padded[:, :length], axis=0, return_inverse=True, return_counts=True)
    more = np.zeros(len(keys), dtype=bool)
    np.logical_or.at(more, inverse.reshape(-1), padded[:, length] >= 0)
    best = np.lexsort((np.arange(len(keys)), -counts))[:n]  # count desc, then sorted order
    return tuple(Example(tuple(int(t) for t in keys[j] if t >= 0), int(counts[j]), bool(more[j])) for j in best)
