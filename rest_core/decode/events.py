"""Step events: the contract between the engine and every consumer (app, bench, CLI).

The engine yields one immutable `StepEvent` per forward step. Consumers never reach into
the engine: everything they show or measure is in these objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rest_core.drafting.feeds import Feed
from rest_core.drafting.trie import Trie
from rest_core.sources import SOURCE_CONTEXT, SOURCE_DATASTORE, source_name

# The bits that name a draft token's sources (a node proposed by several ORs them) are part of
# this contract; they and their names live in rest_core.sources.
__all__ = ["SOURCE_CONTEXT", "SOURCE_DATASTORE", "MatchInfo", "StepEvent", "StepTimings", "Totals"]


@dataclass(frozen=True)
class MatchInfo:
    """What one draft source found for this step."""

    source_bit: int  # the source's bit, see rest_core.sources
    suffix_len: int  # length of the longest matched context suffix; 0 = no match
    suffix_tokens: tuple[int, ...]  # the matched suffix itself
    occurrences: int  # total occurrences of that suffix in the source
    sample: tuple[tuple[int, ...], ...]  # a few retrieved continuations (cut at separators)
    name: str = ""  # the source's name ("context", a store's name); "" = the bit's default name
    # Where the first sampled occurrences start (row i of `sample` follows positions[i] +
    # suffix_len): a datastore's token-stream position (rest_core.store.datastore.Datastore.document_at
    # finds its document), or the context's token index for the context source.
    positions: tuple[int, ...] = ()

    @property
    def source(self) -> str:
        """The source's name: "context", the store's name ("code"), or "datastore" for the
        engine's one unnamed store."""
        return self.name or source_name(self.source_bit)


@dataclass(frozen=True)
class StepTimings:
    """Milliseconds of one step's phases: total = retrieve + draft + forward + accept (draft:
    merging the sources' tries, choosing the subtree, laying it out). The last three break two
    of them down further (for `bench profile`): mask_ms and head_ms are parts of forward_ms
    (building the tree's mask and positions; the output head when lazy logits score rows
    during the walk), commit_ms is the part of accept_ms that keeps the accepted KV rows and
    extends the sources."""

    retrieve_ms: float = 0.0
    draft_ms: float = 0.0
    forward_ms: float = 0.0
    accept_ms: float = 0.0
    total_ms: float = 0.0
    mask_ms: float = 0.0
    head_ms: float = 0.0
    commit_ms: float = 0.0


@dataclass(frozen=True)
class Totals:
    """Running totals after this step (prefill excluded from elapsed_s, reported apart)."""

    prompt_tokens: int
    new_tokens: int
    steps: int
    draft_tokens: int  # emitted tokens that came from accepted drafts
    elapsed_s: float  # decode time since the end of prefill
    prefill_ms: float
    retrieval_ms: float  # retrieval + drafting, summed over steps

    @property
    def mean_generated_length(self) -> float:
        """M: generated tokens per forward step."""
        return self.new_tokens / self.steps if self.steps else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mean_token_ms(self) -> float:
        return 1000.0 * self.elapsed_s / self.new_tokens if self.new_tokens else 0.0

    @property
    def retrieval_ms_per_token(self) -> float:
        return self.retrieval_ms / self.new_tokens if self.new_tokens else 0.0

    @property
    def draft_share(self) -> float:
        return self.draft_tokens / self.new_tokens if self.new_tokens else 0.0


@dataclass(frozen=True)
class StepEvent:
    """One forward step of REST (or of plain decoding, which has an empty draft)."""

    step: int  # 0-based
    method: Literal["rest", "ar"]
    matches: tuple[MatchInfo, ...]  # one per enabled draft source
    trie: Trie | None  # the whole retrieved (merged) trie; None when nothing was retrieved
    draft_idx: tuple[int, ...]  # indices into `trie` of the selected top-c nodes
    draft: Trie | None  # the selected subtree that was verified (nodes in BFS order)
    accepted: tuple[int, ...]  # indices into `draft` of the accepted path, root side first
    tokens: tuple[int, ...]  # every token emitted this step (accepted drafts, then the model's own)
    token_sources: tuple[int, ...]  # per emitted token: source bitmask that drafted it; 0 = model's own
    c: int  # the node budget c used this step (chosen per step in auto mode)
    timings: StepTimings
    totals: Totals
    finished: bool
    finish_reason: Literal["eos", "length"] | None = None
    # Set when `trie` holds only the part a page draws (rest_core.ui.tree_layout.compact_event): the
    # whole retrieved trie's node count. None: `trie` is the whole retrieved trie.
    trie_nodes: int | None = None
    # per draft node, the auto budget's predicted chance that the model's path runs through it
    # (empty for fixed budgets): what the benchmark's reliability chart checks
    predicted: tuple[float, ...] = ()
    # per verified row (the root first, then each draft node), the model's likeliest next token
    # there, off the walk's path too: what a rejected branch's nodes would have been checked
    # against. Empty unless asked for (Engine.generate(explain=True): it scores every row).
    row_tokens: tuple[int, ...] = ()
    # the heaviest first-level nodes of `trie`, heaviest first, each with how many of every
    # source's continuations run through it and the commonest of them (at most FEED_NODES x
    # FEED_EXAMPLES short examples): which retrieved continuations made the drafted branches.
    # Empty unless asked for (Engine.generate(explain=True), or inspect=True: the chat inspector's two).
    feeds: tuple[Feed, ...] = ()
    # the auto budget drafted nothing this step to time a plain step (rest_core.budget.auto's probe)
    probe: bool = False

    @property
    def accepted_len(self) -> int:
        """How many draft tokens this step accepted (tokens beyond the model's own)."""
        return sum(1 for s in self.token_sources if s)
