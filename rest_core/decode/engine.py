"""REST decoding: prefill, then per step retrieve -> build tree -> verify -> accept -> commit KV
-> emit a StepEvent. Plain autoregressive decoding is the same loop with an empty draft.

The model is any unmodified Hugging Face causal LM that takes a ready 4-D attention mask and
position ids (sdpa or eager attention). The draft tree is verified in one forward pass over
[root, node 1, ..., node N] where the root is the last emitted token (its KV is not cached
yet), each node attends to the cached context, the root, its ancestors and itself, and sits at
position (root position + depth). After acceptance only the root and the accepted path stay in
the cache, so the cache always holds the KV of every emitted token but the last.

The tree forward and its masks are in `masks`, the cache surgery in `kv`, what differs between
models and library versions in `compat`, and the forward-cost curve in `cost`.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from rest_core.budget.auto import AutoBudget
from rest_core.budget.cost_curve import CostCurve
from rest_core.config import GenerationConfig
from rest_core.decode.compat import cache_kw, max_positions, stop_ids, sync
from rest_core.decode.cost import measure_cost_curve
from rest_core.decode.events import MatchInfo, StepEvent, StepTimings, Totals
from rest_core.decode.heads import LazyLogits, OutputHead, likeliest_chains
from rest_core.decode.kv import keep_rows, truncate
from rest_core.decode.masks import mask_kind, mask_layout, tree_forward
from rest_core.decode.models import input_device
from rest_core.decode.processors import ModelProcessors, model_processors, resolve_sampling
from rest_core.decode.prompts import encode_prompt
from rest_core.decode.sampling import Uniforms, accept
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.draft import Draft, Selector, build_draft, warm_up
from rest_core.drafting.feeds import Feed, feeds
from rest_core.drafting.source import DraftSource, Retrieved
from rest_core.drafting.trie import Trie, select_top_c
from rest_core.sources import SourceTable
from rest_core.store.opened import as_datastore

MATCH_SAMPLE_ROWS = 8  # continuations kept per source in an event (for display)
INSPECTOR_FEEDS = 2  # first-level branches whose continuations a step keeps outside the step-through


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationResult:
    """Everything one generation produced, collected from its events."""

    token_ids: list[int]  # generated ids only
    text: str | None  # decoded generated text, when a tokenizer was given
    events: list[StepEvent]
    totals: Totals | None
    finish_reason: str | None


def collect(events: Iterable[StepEvent], tokenizer: Any = None) -> GenerationResult:
    """Run a generation to the end and gather its tokens, text and events."""
    evs = list(events)
    ids = [t for e in evs for t in e.tokens]
    text = tokenizer.decode(ids, skip_special_tokens=True) if tokenizer is not None else None
    last = evs[-1] if evs else None
    return GenerationResult(
        token_ids=ids,
        text=text,
        events=evs,
        totals=last.totals if last else None,
        finish_reason=last.finish_reason if last else None,
    )


# --- the engine ------------------------------------------------------------------------------


@dataclass
class _DecodeState:
    """The decode state of one generation: emitted ids and the KV of all of them but the last."""

    ids: list[int]
    cache: Any  # transformers DynamicCache holding ids[:-1]
    prompt_len: int


@dataclass
class _Tally:
    """Running totals of one generation (prefill is timed apart from the steps)."""

    prompt_tokens: int
    prefill_ms: float
    new_tokens: int = 0
    steps: int = 0
    draft_tokens: int = 0
    elapsed_s: float = 0.0
    retrieval_ms: float = 0.0

    def add(self, tokens: int, drafted: int, timings: StepTimings) -> Totals:
        """Count one step; the totals after it."""
        self.steps += 1
        self.new_tokens += tokens
        self.draft_tokens += drafted
        self.elapsed_s += timings.total_ms / 1000
        self.retrieval_ms += timings.retrieve_ms + timings.draft_ms
        return Totals(
            prompt_tokens=self.prompt_tokens,
            new_tokens=self.new_tokens,
            steps=self.steps,
            draft_tokens=self.draft_tokens,
            elapsed_s=self.elapsed_s,
            prefill_ms=self.prefill_ms,
            retrieval_ms=self.retrieval_ms,
        )


class _StepClock:
    """The clock of one step: its start, then the end of each timed phase, marked by name in
    the order they run."""

    PHASES = ("retrieve", "draft", "verify", "walk", "commit")  # verify: the forward; walk: acceptance

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._ends: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """`phase` ends now."""
        if phase not in self.PHASES:
            raise ValueError(f"no step phase {phase!r} (phases: {', '.join(self.PHASES)})")
        self._ends[phase] = time.perf_counter()

    def _ms(self, after: str | None, until: str) -> float:
        """Milliseconds from the end of phase `after` (None: the step's start) to the end of `until`."""
        return 1000 * (self._ends[until] - (self._start if after is None else self._ends[after]))

    def timings(self, head_ms: float = 0.0, mask_ms: float = 0.0) -> StepTimings:
        """head_ms: time the walk spent in the output head (lazy logits), which counts as the
        forward's; mask_ms: the part of the forward spent building its mask and positions."""
        return StepTimings(
            retrieve_ms=self._ms(None, "retrieve"),
            draft_ms=self._ms("retrieve", "draft"),
            forward_ms=self._ms("draft", "verify") + head_ms,
            accept_ms=self._ms("verify", "commit") - head_ms,  # the walk and the commit
            total_ms=self._ms(None, "commit"),
            mask_ms=mask_ms,
            head_ms=head_ms,
            commit_ms=self._ms("walk", "commit"),
        )


class Engine:
    """Generate with REST (or plain decoding) from an unmodified Hugging Face causal LM.

    datastore: a `rest_core.store.datastore.Datastore`, a path to one, or None (context source only,
    or plain decoding). datastores: instead, several named stores (or paths), {"code": a,
    "chat": b}: each is a draft source of its own (bits and colours in `source_table`, the
    first store blue unless `fixed_stores` names it), merged into one trie; `DraftConfig.stores` picks them per generation. reuse_cache: keep the KV cache of the last generation, so the next
    call whose prompt extends it (a conversation's next turn) only prefills the new tokens.
    cost_curve: the forward-cost curve of the auto budget (measured on first use if None).
    selector: picks the draft from the merged trie, `(trie, c) -> sorted node indices` forming
    a subtree; default the paper's top-c by weight (an ablation swaps in random continuations).
    With the default selector, budget "auto" chooses the nodes itself (`AutoBudget.plan`).
    lazy_logits: run the output head only over the rows the acceptance walk visits
    (`rest_core.decode.heads`); models whose head cannot be split off keep the full forward.
    fixed_stores: store names that keep one bit (so one colour) whichever of them an engine
    holds, by their place in this list (`rest_core.sources.stable_bits`); others follow.
    learn_across_calls: False: each generation's auto budget starts from the measured curve and
    the prior, not from what earlier generations taught it (the app: see `Runtime.engine`).
    """

    def __init__(
        self,
        model,
        tokenizer: Any = None,
        datastore: Any = None,
        *,
        datastores: Mapping[str, Any] | None = None,
        reuse_cache: bool = True,
        cost_curve: CostCurve | None = None,
        selector: Selector | None = None,
        lazy_logits: bool = True,
        fixed_stores: Sequence[str] = (),
        learn_across_calls: bool = True,
    ) -> None:
        self.model = model
        self.selector = selector or select_top_c
        self.tokenizer = tokenizer
        if datastores is not None and datastore is not None:
            raise ValueError("give the engine either datastore= (one store) or datastores= (named stores), not both")
        named = dict(datastores) if datastores is not None else ({} if datastore is None else {"datastore": datastore})
        # One table of the engine's sources (names -> bits); refuses more than six stores.
        self.source_table = SourceTable.for_stores(list(named), fixed_stores)
        self.datastores: dict[str, Any] = {name: as_datastore(store, tokenizer) for name, store in named.items()}
        self.datastore = next(iter(self.datastores.values()), None)  # the first (or only) store
        self.reuse_cache = reuse_cache
        self.device = input_device(model)
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self.max_positions = max_positions(model.config)
        self.stop_ids = stop_ids(model, tokenizer)
        self.auto_budget = AutoBudget(cost_curve)  # learns over generations unless learn_across_calls is False
        self._learn_across = learn_across_calls
        self._mask_kind = mask_kind(model)
        self._layout = mask_layout(model.config)
        self._lazy_logits = lazy_logits
        self._head: OutputHead | None = None
        self._head_checked = False  # whether output_head() has split and checked the head
        params = inspect.signature(model.forward).parameters
        self._prefill_kwargs = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self._warm = False
        self._lock = threading.Lock()
        self._saved: _DecodeState | None = None
        for name, store in self.datastores.items():
            if store.separator > self.vocab_size:
                which = "the datastore" if datastores is None else f"datastore {name!r}"
                raise ValueError(
                    f"{which}'s vocabulary ({store.separator}) is larger than the model's "
                    f"({self.vocab_size}): it was built with another tokenizer"
                )

    # -- prompt encoding --

    def encode(self, prompt: str | list[dict], chat: bool = False) -> list[int]:
        """Token ids of a prompt (see `encode_prompt`)."""
        if self.tokenizer is None:
            raise ValueError("Engine.encode needs a tokenizer")
        return encode_prompt(self.tokenizer, prompt, chat)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def forget_cache(self) -> None:
        """Drop the KV cache kept for the next turn (its conversation was cleared or closed)."""
        with self._lock:
            self._saved = None

    # -- generation --

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig | None = None,
        *,
        explain: bool = False,
        inspect: bool = False,
    ) -> Iterator[StepEvent]:
        """Yield one StepEvent per forward step. Bad input raises here, before any work.
        `explain`: the step-through's extras, after each step's clock: score the rows the walk
        never visits (StepEvent.row_tokens; with lazy logits it costs the output head over every
        row) and count the continuations behind the heaviest first-level nodes (StepEvent.feeds).
        `inspect`: the chat inspector's feeds only (the accepted first token's branch and the
        heaviest other; about 0.7 ms a step at K = 5,000), so a benchmark pays for neither."""
        config = config or GenerationConfig()
        ids = self._check_prompt(prompt_ids)
        self._store_weights(config)  # an unknown store name: an error now, not at the first step
        max_new = (
            min(config.max_new_tokens, self.max_positions - len(ids)) if self.max_positions else config.max_new_tokens
        )
        # The model's own generation config, as `generate` applies it (top-k default, penalties).
        config = replace(config, sampling=resolve_sampling(self.model, config.sampling))
        processors = model_processors(self.model, config.sampling, len(ids), config.max_new_tokens)
        return self._run(ids, config, max_new, processors, explain, inspect)

    def output_head(self) -> OutputHead | None:
        """Split the model's output head from its body for lazy logits. The first call checks
        the split by running the model on a few tokens; later calls return what it found.
        None: verify with the full forward (lazy logits off, or a head that cannot be split)."""
        if not self._head_checked:
            self._head = OutputHead.of(self.model) if self._lazy_logits else None
            self._head_checked = True
        return self._head

    def forward_cost(self, max_q: int = 64, max_seconds: float = 0.0, reps: int = 2) -> CostCurve:
        """The measured forward-cost curve, the fastest of `reps` runs per size (measured once per engine, again for more
        sizes or runs; a given curve is kept). `max_seconds` (> 0) bounds it; a curve it cut short is not kept."""
        curve = self.auto_budget.curve
        if curve is None or curve.sizes[-1] < max_q or 0 < curve.reps < reps:
            curve = measure_cost_curve(self.model, max_q, reps=reps, head=self.output_head(), max_seconds=max_seconds)
            if curve.sizes[-1] >= max_q:
                self.auto_budget.curve = curve
        return curve

    def _check_prompt(self, prompt_ids: Sequence[int]) -> list[int]:
        try:
            ids = [int(t) for t in prompt_ids]
        except (TypeError, ValueError):
            raise ValueError("prompt_ids must be a sequence of token ids") from None
        if not ids:
            raise ValueError("the prompt is empty")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt token id {bad[0]} is outside the model's vocabulary (0..{self.vocab_size - 1})")
        if self.max_positions and len(ids) >= self.max_positions:
            raise ValueError(
                f"the prompt has {len(ids)} tokens; the model's context is {self.max_positions} tokens "
                f"(leave room for at least one new token)"
            )
        return ids

    def _run(
        self,
        prompt: list[int],
        config: GenerationConfig,
        max_new: int,
        processors: ModelProcessors | None,
        each: bool,
        inspect: bool = False,
    ) -> Iterator[StepEvent]:
        sources, head, auto, uniforms = self._prepare(config)
        budget = self.auto_budget if self._learn_across else self.auto_budget.fresh()
        plan = budget.plan if auto and self.selector is select_top_c else None  # an ablation's selector drafts c
        state, tally = self._start(prompt, sources)
        consistent = True  # whether state.cache holds exactly state.ids[:-1]
        try:
            while True:
                remaining = max_new - tally.new_tokens
                clock = _StepClock()
                retrieved = [s.retrieve() for s in sources]  # each source's continuations
                clock.mark("retrieve")
                draft = self._draft(retrieved, config, len(state.ids), remaining, plan)  # merged, chosen, laid out
                clock.mark("draft")
                consistent = False
                logits, mask_ms = self._verify(state, draft, head)  # one forward over [root] + draft nodes
                clock.mark("verify")
                tokens, rows = accept(  # the model's own tokens, along the draft while it agrees
                    logits,
                    draft.tree.children,
                    config.sampling,
                    uniforms,
                    max_tokens=remaining,
                    stop_ids=self.stop_ids,
                    process=processors.after(state.ids) if processors else None,
                )
                clock.mark("walk")
                self._commit(state, tokens, rows, sources)  # keep the accepted path's KV
                consistent = True
                clock.mark("commit")
                timings = clock.timings(head_ms=getattr(logits, "head_ms", 0.0), mask_ms=mask_ms)
                accepted = tuple(r - 1 for r in rows)  # rows count the root; nodes do not
                budget.step_done(draft, accepted, timings.forward_ms, timings.total_ms, retrieved, auto)
                totals = tally.add(len(tokens), len(rows), timings)
                event = self._event(
                    config,
                    max_new,
                    retrieved=retrieved,
                    draft=draft,
                    accepted=accepted,
                    tokens=tokens,
                    timings=timings,
                    totals=totals,
                    row_tokens=_row_argmax(logits) if each else (),  # after the clock: not part of the step
                    feeds=_step_feeds(retrieved, draft.trie, tokens[0] if accepted else None, each, inspect),
                    probe=budget.take_probe(),  # whether it drafted nothing to time a plain step
                )
                yield event
                if event.finished:
                    return
        finally:
            self._save(state, consistent)  # also when the consumer stops early: the cache holds ids[:-1] exactly

    def _prepare(self, config: GenerationConfig) -> tuple[list[DraftSource], OutputHead | None, bool, Uniforms | None]:
        """What a generation needs before its clock starts: its draft sources, the output head
        (lazy logits), whether the auto budget drafts (its cost curve measured now) and the
        sampling's uniforms (None when greedy)."""
        sources = self._sources(config)
        head = self.output_head() if sources else None  # split and checked before any step is timed
        auto = config.draft.budget == "auto" and config.method == "rest"
        if auto and sources:
            self.forward_cost(config.draft.c + 1)
        uniforms = None if config.sampling.greedy else Uniforms(config.sampling.seed)
        return sources, head, auto, uniforms

    def _start(self, prompt: list[int], sources: list[DraftSource]) -> tuple[_DecodeState, _Tally]:
        """Prefill the prompt (timed apart from the steps) and start the sources on it."""
        t0 = time.perf_counter()
        state = self._prefill(prompt)
        tally = _Tally(len(prompt), prefill_ms=1000 * (time.perf_counter() - t0))
        for s in sources:
            s.reset(prompt)
        return state, tally

    def _save(self, state: _DecodeState, consistent: bool) -> None:
        """Keep the decode state for the next turn's prefill, if cache reuse is on and its cache
        holds exactly state.ids[:-1] (`consistent`)."""
        if self.reuse_cache and consistent:
            with self._lock:
                self._saved = state

    # -- the phases --

    def _sources(self, config: GenerationConfig) -> list[DraftSource]:
        """The draft sources this configuration enables (none for plain decoding)."""
        if config.method == "ar":
            return []
        d = config.draft
        sources: list[DraftSource] = []
        for name, weight in self._store_weights(config):
            store, bit = self.datastores[name], self.source_table.bit(name)
            sources.append(DatastoreSource(store, config.retrieval, weight=weight, bit=bit, name=name))
        if d.use_context and d.context_weight > 0:
            sources.append(ContextSource(config.retrieval, weight=d.context_weight))
        if sources and not self._warm:
            # Load (or compile, on a fresh machine) the retrieval kernels before timing anything.
            warm_up()
            self._warm = True
        return sources

    def _store_weights(self, config: GenerationConfig) -> list[tuple[str, float]]:
        """(name, weight) of each store that drafts in this generation, in the engine's order:
        the stores `config.draft.stores` names (default all), each at datastore_weight times
        its share; stores of weight 0 are left out."""
        d = config.draft
        if d.stores is None:
            shares = {name: 1.0 for name in self.datastores}
        else:
            shares = dict(d.stores)
            unknown = [n for n in shares if n not in self.datastores]
            if unknown:
                held = ", ".join(self.datastores) or "none"
                raise ValueError(f"no datastore named {unknown[0]!r} in this engine (it has: {held})")
        if config.method == "ar" or not d.use_datastore:
            return []
        return [
            (n, d.datastore_weight * shares[n]) for n in self.datastores if shares.get(n, 0) * d.datastore_weight > 0
        ]

    def _prefill(self, prompt: list[int]) -> _DecodeState:
        """A decode state whose cache holds prompt[:-1], reusing the last generation's cache
        for the longest common prefix (the earlier turns of a conversation)."""
        from transformers import DynamicCache

        with self._lock:
            saved, self._saved = self._saved, None
        keep = 0
        if saved is not None:
            cached = saved.ids[: len(saved.ids) - 1]
            limit = min(len(cached), len(prompt) - 1)
            while keep < limit and cached[keep] == prompt[keep]:
                keep += 1
        if keep > 0:
            cache = saved.cache
            truncate(cache, keep)
        else:
            cache = DynamicCache()
        todo = prompt[keep:-1]
        if todo:
            with torch.inference_mode():
                self.model(
                    input_ids=torch.tensor([todo], device=self.device),
                    **cache_kw(self.model, cache),
                    **self._prefill_kwargs,
                )
        return _DecodeState(ids=list(prompt), cache=cache, prompt_len=len(prompt))

    def _draft(self, retrieved: list[Retrieved], config: GenerationConfig, n_ids: int, remaining: int, plan) -> Draft:
        """The step's draft, merged, chosen (by the auto budget's `plan` where it drafts) and laid
        out, never deeper than the tokens still wanted or the context allows."""
        max_depth = min(remaining, self.max_positions - n_ids) if self.max_positions else remaining
        return build_draft(
            retrieved, config.draft.c, max_depth=max_depth, plan=plan if retrieved else None, selector=self.selector
        )

    def _verify(
        self, state: _DecodeState, draft: Draft, head: OutputHead | None
    ) -> tuple[torch.Tensor | LazyLogits, float]:
        """(q, V) logits for the root (the last emitted token, not cached yet) and every draft
        node, in one forward, and the milliseconds spent building its inputs (mask, positions).
        An empty draft is the same call a plain decoding step makes. With lazy logits, a
        draft's forward runs the model's body only: its rows are scored when the acceptance
        walk reaches them, the likeliest chain at a time (`head`: the engine's output head)."""
        root, cache_len = state.ids[-1], len(state.ids) - 1
        lazy = head is not None and len(draft) > 0
        mask_ms = 0.0
        with torch.inference_mode():
            if len(draft) == 0 and not self._layout:
                out = self.model(
                    input_ids=torch.tensor([[root]], device=self.device), **cache_kw(self.model, state.cache)
                )
            else:  # (a full-length cache needs our own sliding-window / chunk mask even for the root alone)
                tree, model = draft.tree, head.body if lazy else self.model
                ids = torch.tensor([[root, *tree.tokens.tolist()]], device=self.device)
                out, mask_ms = tree_forward(
                    model,
                    ids,
                    state.cache,
                    cache_len,
                    tree.mask,
                    tree.positions,
                    kind=self._mask_kind,
                    layout=self._layout,
                )
        sync(self.device)
        if not lazy:
            return out.logits[0], mask_ms
        chain = likeliest_chains(draft.tree.parents, _reach_score(draft))
        return LazyLogits(out.last_hidden_state[0], head, chain), mask_ms

    def _commit(self, state: _DecodeState, tokens: list[int], rows: list[int], sources: list[DraftSource]) -> None:
        """Emit `tokens`: keep the KV of the root and the accepted rows but the last token's
        (the next step's root), drop the rest of the verified rows; each draft source reads them."""
        with torch.inference_mode():
            keep_rows(state.cache, len(state.ids) - 1, rows[: len(tokens) - 1])
        state.ids.extend(tokens)
        for source in sources:
            source.extend(tokens)

    def _event(
        self,
        config: GenerationConfig,
        max_new: int,
        *,
        retrieved: list[Retrieved],
        draft: Draft,
        accepted: tuple[int, ...],
        tokens: list[int],
        timings: StepTimings,
        totals: Totals,
        row_tokens: tuple[int, ...] = (),
        feeds: tuple[Feed, ...] = (),
        probe: bool = False,
    ) -> StepEvent:
        """What this step did, for every consumer; it finishes on EOS or at max_new tokens."""
        finish: Literal["eos", "length"] | None = None
        if tokens[-1] in self.stop_ids:
            finish = "eos"
        elif totals.new_tokens >= max_new:
            finish = "length"
        drafted_by = tuple(int(draft.nodes.sources[n]) for n in accepted) if accepted else ()
        return StepEvent(
            step=totals.steps - 1,
            method=config.method,
            matches=tuple(_match_info(r, self.source_table.name(r.source_bit)) for r in retrieved),
            trie=draft.trie,
            draft_idx=tuple(int(i) for i in draft.idx),
            draft=draft.nodes,
            accepted=accepted,
            tokens=tuple(tokens),
            token_sources=drafted_by + (0,) * (len(tokens) - len(accepted)),
            c=draft.c,
            timings=timings,
            totals=totals,
            finished=finish is not None,
            finish_reason=finish,
            predicted=tuple(float(p) for p in draft.predicted),
            row_tokens=row_tokens,
            feeds=feeds,
            probe=probe,
        )


# --- helpers ---------------------------------------------------------------------------------


def _row_argmax(logits: torch.Tensor | LazyLogits) -> tuple[int, ...]:
    """The likeliest token at every verified row, (q, V) logits or lazy ones (scored now)."""
    if isinstance(logits, LazyLogits):
        return tuple(logits.argmax(r) for r in range(len(logits)))
    return tuple(int(t) for t in logits.argmax(dim=-1).tolist())


def _step_feeds(
    retrieved: list[Retrieved], trie: Trie | None, lead: int | None, each: bool, inspect: bool
) -> tuple[Feed, ...]:
    """A step's feeds, after its clock: the step-through's, the inspector's (first token `lead`) or none."""
    if each:  # the heaviest first-level branches
        return feeds(retrieved, trie)
    if inspect:  # the accepted first token's branch and the heaviest other (a fraction of a millisecond)
        return feeds(retrieved, trie, nodes=INSPECTOR_FEEDS, lead=lead)
    return ()


def _reach_score(draft: Draft) -> np.ndarray:
    """(q,) how likely the acceptance walk is to reach each row (root first): the predicted
    path probability where the auto budget gave one, else the trie weight."""
    nodes = draft.predicted if len(draft.predicted) == len(draft) else draft.nodes.weights
    return np.concatenate(([np.inf], np.asarray(nodes, dtype=np.float64)))


def _match_info(r: Retrieved, name: str = "") -> MatchInfo:
    sample = []
    for row in r.continuations[:MATCH_SAMPLE_ROWS].tolist():
        cut = row.index(-1) if -1 in row else len(row)
        sample.append(tuple(row[:cut]))
    return MatchInfo(
        source_bit=int(r.source_bit),
        suffix_len=int(r.suffix_len),
        suffix_tokens=tuple(int(t) for t in r.suffix_tokens),
        occurrences=int(r.occurrences),
        sample=tuple(sample),
        name=name,
        positions=tuple(r.positions[:MATCH_SAMPLE_ROWS]),
    )
