"""REST decoding: prefill, then per step retrieve -> build tree -> verify -> accept -> commit KV
-> emit a StepEvent. Plain autoregressive decoding is the same loop with an empty draft.

The model is any unmodified Hugging Face causal LM that takes a ready 4-D attention mask and
position ids (sdpa or eager attention). The draft tree is verified in one forward pass over
[root, node 1, ..., node N] where the root is the last emitted token (its KV is not cached
yet), each node attends to the cached context, the root, its ancestors and itself, and sits at
position (root position + depth). After acceptance only the root and the accepted path stay in
the cache, so the cache always holds the KV of every emitted token but the last.
"""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from rest_core.config import GenerationConfig
from rest_core.events import MatchInfo, StepEvent, StepTimings, Totals
from rest_core.processors import ModelProcessors, model_processors, resolve_sampling
from rest_core.sampling import Uniforms, accept
from rest_core.trie import Trie

MATCH_SAMPLE_ROWS = 8  # continuations kept per source in an event (for display)
_EMPTY_DRAFT = Trie(*(np.empty(0, dt) for dt in (np.int64, np.int64, np.int64, np.float64, np.uint8)))


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


# --- the forward-cost curve (draft budget "auto") --------------------------------------------


@dataclass(frozen=True)
class CostCurve:
    """Median milliseconds of one forward over q tokens (with a few hundred cached tokens)."""

    sizes: tuple[int, ...]
    ms: tuple[float, ...]

    def __call__(self, q: np.ndarray | int) -> np.ndarray:
        """Interpolated cost; linear extrapolation past the largest measured size."""
        q = np.asarray(q, dtype=np.float64)
        s, m = np.asarray(self.sizes, np.float64), np.asarray(self.ms, np.float64)
        out = np.interp(q, s, m)
        if len(s) >= 2:
            slope = (m[-1] - m[-2]) / (s[-1] - s[-2])
            out = np.where(q > s[-1], m[-1] + slope * (q - s[-1]), out)
        return out


def measure_cost_curve(model, max_q: int, context_len: int = 256, reps: int = 2) -> CostCurve:
    """Time forwards of 1, 2, 4, ..., max_q tokens after a `context_len`-token cache.

    Takes the fastest of `reps` runs per size (other jobs on the machine only ever add time)
    and makes the curve non-decreasing in q. Stays within the model's positions: the context
    is at most half of them, and position ids past the last one are clamped to it (the cost
    of a forward does not depend on the position values; a learned position table would
    overflow).
    """
    from transformers import DynamicCache

    limit = _max_positions(model.config)
    if limit:
        context_len = max(1, min(context_len, limit // 2))
    device = model.get_input_embeddings().weight.device
    vocab = model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, vocab, (1, context_len), generator=gen).to(device)
    sizes = [1]
    while sizes[-1] < max_q:
        sizes.append(min(sizes[-1] * 2, max_q))
    mask_kind, layout = _mask_kind(model), _mask_layout(model.config)
    with torch.inference_mode():
        cache = DynamicCache()
        model(input_ids=ctx, **_cache_kw(model, cache))
        ms = []
        for q in sizes:
            ids = torch.randint(0, vocab, (1, q), generator=gen).to(device)
            chain = np.tril(np.ones((q, q), dtype=bool))  # a chain: same cost as any tree of q
            offsets = np.arange(q) if not limit else np.minimum(np.arange(q), limit - 1 - context_len)
            times = []
            for rep in range(reps + 1):
                t0 = time.perf_counter()
                _forward(model, ids, cache, context_len, chain, offsets, mask_kind, layout)
                _sync(device)
                if rep:  # the first run warms up
                    times.append(1000 * (time.perf_counter() - t0))
                _truncate(cache, context_len)
            ms.append(min(times))
    return CostCurve(tuple(sizes), tuple(np.maximum.accumulate(ms).tolist()))


RANK_BUCKETS = 9  # auto budget calibration per node rank: 1, 2-3, 4-7, ..., 256+


def rank_buckets(n: int) -> np.ndarray:
    """(n,) bucket of the ranks 1..n: floor(log2(rank)), capped."""
    return np.minimum(np.log2(np.arange(1, n + 1)).astype(np.int64), RANK_BUCKETS - 1)


def choose_budget(
    trie: Trie, c_max: int, curve: CostCurve, overhead_ms: float, calibration: float | np.ndarray
) -> tuple[int, float]:
    """The c in [0, c_max] maximising expected tokens per second, and its predicted accepted count.

    A node's share of the root's weight estimates the chance that the model's own path runs
    through it; summed over the top-c nodes it is the expected number of accepted drafts
    (the accepted path is a chain, so accepted = sum over nodes of [node accepted]).
    `calibration` (a number, or one per rank bucket, see `rank_buckets`) scales that estimate
    by what was actually accepted so far at that rank.
    """
    if len(trie) == 0 or c_max <= 0:
        return 0, 0.0
    root_weight = float(trie.weights[trie.depths == 1].sum())
    if root_weight <= 0:
        return 0, 0.0
    w = trie.weights
    if w.shape[0] > c_max:  # only the c_max heaviest matter (tries reach tens of thousands of nodes)
        w = np.partition(w, w.shape[0] - c_max)[w.shape[0] - c_max :]
    w = np.sort(w)[::-1]
    cal = np.asarray(calibration, dtype=np.float64)
    if cal.ndim:
        cal = cal[rank_buckets(w.shape[0])]
    gain = np.concatenate(([0.0], np.cumsum(cal * w / root_weight)))  # expected accepted, c = 0..
    cs = np.arange(gain.shape[0])
    rate = (1.0 + gain) / (overhead_ms + curve(cs + 1))
    best = int(np.argmax(rate))
    return best, float(gain[best])


# --- the engine ------------------------------------------------------------------------------


@dataclass
class _DecodeState:
    """The decode state of one generation: emitted ids and the KV of all of them but the last."""

    ids: list[int]
    cache: Any  # transformers DynamicCache holding ids[:-1]
    prompt_len: int


class Engine:
    """Generate with REST (or plain decoding) from an unmodified Hugging Face causal LM.

    datastore: a `rest_core.datastore.Datastore`, a path to one, or None (context source only,
    or plain decoding). reuse_cache: keep the KV cache of the last generation, so the next
    call whose prompt extends it (a conversation's next turn) only prefills the new tokens.
    selector: picks the draft from the merged trie, `(trie, c) -> sorted node indices` forming
    a subtree; default the paper's top-c by weight (an ablation swaps in random continuations).
    """

    def __init__(
        self,
        model,
        tokenizer: Any = None,
        datastore: Any = None,
        *,
        reuse_cache: bool = True,
        cost_curve: CostCurve | None = None,
        selector: Callable[[Trie, int], np.ndarray] | None = None,
    ) -> None:
        from rest_core.trie import select_top_c

        self.model = model
        self.selector = selector or select_top_c
        self.tokenizer = tokenizer
        if isinstance(datastore, (str, bytes)) or hasattr(datastore, "__fspath__"):
            from rest_core.datastore import Datastore

            datastore = Datastore.open(datastore, tokenizer)
        self.datastore = datastore
        self.reuse_cache = reuse_cache
        self.device = model.get_input_embeddings().weight.device
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self.max_positions = _max_positions(model.config)
        self.stop_ids = _stop_ids(model, tokenizer)
        self._mask_kind = _mask_kind(model)
        self._sliding_window = _sliding_window(model.config)
        self._layout = _mask_layout(model.config)
        params = inspect.signature(model.forward).parameters
        self._prefill_kwargs = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self._cost_curve = cost_curve
        self._warm = False
        self._lock = threading.Lock()
        self._saved: _DecodeState | None = None
        # Auto budget: per rank bucket, drafts accepted vs predicted from the trie weights. The
        # prior (ratio 1) must not be pessimistic: a budget of 0 drafts nothing and learns nothing.
        self._accepted_sum = np.full(RANK_BUCKETS, 0.5)
        self._predicted_sum = np.full(RANK_BUCKETS, 0.5)
        self._overhead_ms = 1.0  # per-step time outside the forward, running mean
        self._observed: dict[int, tuple[int, float]] = {}  # q -> (count, mean forward ms)
        if datastore is not None and self.datastore.separator > self.vocab_size:
            raise ValueError(
                f"the datastore's vocabulary ({self.datastore.separator}) is larger than the model's "
                f"({self.vocab_size}): it was built with another tokenizer"
            )

    # -- prompt encoding --

    def encode(self, prompt: str | list[dict], chat: bool = False) -> list[int]:
        """Token ids of a prompt: plain text, or a conversation (list of {role, content}) /
        a single user turn (chat=True) through the tokenizer's chat template."""
        if self.tokenizer is None:
            raise ValueError("Engine.encode needs a tokenizer")
        if isinstance(prompt, str) and not chat:
            if not prompt:
                raise ValueError("the prompt is empty")
            return list(self.tokenizer(prompt).input_ids)
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if not messages or not any(m.get("content") for m in messages):
            raise ValueError("the prompt is empty")
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError("this tokenizer has no chat template: use a plain prompt (chat=False)")
        add_prompt = messages[-1].get("role") != "assistant"
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_prompt)
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    # -- generation --

    def generate(self, prompt_ids: Sequence[int], config: GenerationConfig | None = None) -> Iterator[StepEvent]:
        """Yield one StepEvent per forward step. Bad input raises here, before any work."""
        config = config or GenerationConfig()
        ids = self._check_prompt(prompt_ids)
        max_new = min(config.max_new_tokens, self.max_positions - len(ids)) if self.max_positions else config.max_new_tokens
        # The model's own generation config, as `generate` applies it (top-k default, penalties).
        config = replace(config, sampling=resolve_sampling(self.model, config.sampling))
        processors = model_processors(self.model, config.sampling, len(ids), config.max_new_tokens)
        return self._run(ids, config, max_new, processors)

    def forward_cost(self, max_q: int = 64) -> CostCurve:
        """The measured forward-cost curve (measured once per engine, extended when needed)."""
        if self._cost_curve is None or self._cost_curve.sizes[-1] < max_q:
            self._cost_curve = measure_cost_curve(self.model, max_q)
        return self._cost_curve

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

    def _sources(self, config: GenerationConfig) -> list[Any]:
        if config.method == "ar":
            return []
        from rest_core.retrieval import ContextSource, DatastoreSource

        d = config.draft
        sources: list[Any] = []
        if d.use_datastore and self.datastore is not None and d.datastore_weight > 0:
            sources.append(DatastoreSource(self.datastore, config.retrieval, weight=d.datastore_weight))
        if d.use_context and d.context_weight > 0:
            sources.append(ContextSource(config.retrieval, weight=d.context_weight))
        return sources

    def _run(
        self, prompt: list[int], config: GenerationConfig, max_new: int, processors: ModelProcessors | None = None
    ) -> Iterator[StepEvent]:
        greedy = config.sampling.greedy
        uniforms = None if greedy else Uniforms(config.sampling.seed)
        sources = self._sources(config)
        auto = config.draft.budget == "auto" and config.method == "rest"
        curve = self.forward_cost(config.draft.c + 1) if auto and sources else None
        if sources and not self._warm:
            # Load (or compile, on a fresh machine) the retrieval kernels before timing anything.
            from rest_core.retrieval import warm_up

            warm_up()
            self._warm = True

        t0 = time.perf_counter()
        state = self._prefill(prompt)
        prefill_ms = 1000 * (time.perf_counter() - t0)
        ctx = _Context(prompt)
        for s in sources:
            s.reset(ctx.view())

        new_tokens = steps = draft_tokens = 0
        elapsed_s = retrieval_ms = 0.0
        consistent = True  # whether state.cache holds exactly state.ids[:-1]
        try:
            while True:
                t_step = time.perf_counter()
                remaining = max_new - new_tokens

                # 1. retrieve: each source's continuations of the longest matching suffix
                retrieved = [s.retrieve(ctx.view()) for s in sources]
                t_retrieved = time.perf_counter()

                # 2. tree: merge into one weighted trie, keep the budget's best nodes
                trie, draft_idx, draft, budget = self._draft(
                    retrieved, config, remaining, len(state.ids), curve, auto
                )
                t_tree = time.perf_counter()

                # 3. verify: one forward over [root] + draft nodes
                consistent = False
                root = state.ids[-1]
                cache_len = len(state.ids) - 1
                if draft is None:
                    logits = self._forward_plain(root, state.cache)
                    children: dict = {}
                else:
                    logits = self._forward_tree(root, draft, state.cache, cache_len)
                    children = _child_table(draft)
                _sync(self.device)
                t_forward = time.perf_counter()

                # 4. accept: the model's own tokens along the draft
                tokens, rows = accept(
                    logits, children, config.sampling, uniforms, max_tokens=remaining, stop_ids=self.stop_ids,
                    process=processors.after(state.ids) if processors else None,
                )
                # 5. commit: keep the root and the accepted rows but the last emitted token's
                with torch.inference_mode():
                    _commit(state.cache, cache_len, rows[: len(tokens) - 1])
                state.ids.extend(tokens)
                ctx.extend(tokens)
                consistent = True
                for s in sources:
                    s.extend(tokens)
                t_end = time.perf_counter()

                # 6. emit
                accepted = tuple(r - 1 for r in rows)
                token_sources = tuple(int(draft.sources[n]) for n in accepted) + (0,) * (len(tokens) - len(rows))
                steps += 1
                new_tokens += len(tokens)
                draft_tokens += len(rows)
                step_s = t_end - t_step
                elapsed_s += step_s
                retrieval_ms += 1000 * (t_tree - t_step)
                if auto:
                    self._learn(
                        trie,
                        draft,
                        accepted,
                        1000 * (step_s - (t_forward - t_tree)),
                        1 + (len(draft) if draft is not None else 0),
                        1000 * (t_forward - t_tree),
                    )
                finish = None
                if tokens[-1] in self.stop_ids:
                    finish = "eos"
                elif new_tokens >= max_new:
                    finish = "length"
                yield StepEvent(
                    step=steps - 1,
                    method=config.method,
                    matches=tuple(_match_info(s.name, r) for s, r in zip(sources, retrieved)),
                    trie=trie,
                    draft_idx=tuple(int(i) for i in draft_idx),
                    draft=draft,
                    accepted=accepted,
                    tokens=tuple(tokens),
                    token_sources=token_sources,
                    budget=budget,
                    timings=StepTimings(
                        retrieve_ms=1000 * (t_retrieved - t_step),
                        tree_ms=1000 * (t_tree - t_retrieved),
                        forward_ms=1000 * (t_forward - t_tree),
                        accept_ms=1000 * (t_end - t_forward),
                        total_ms=1000 * step_s,
                    ),
                    totals=Totals(
                        prompt_tokens=len(prompt),
                        new_tokens=new_tokens,
                        steps=steps,
                        draft_tokens=draft_tokens,
                        elapsed_s=elapsed_s,
                        prefill_ms=prefill_ms,
                        retrieval_ms=retrieval_ms,
                    ),
                    finished=finish is not None,
                    finish_reason=finish,
                )
                if finish is not None:
                    return
        finally:
            # Also when the consumer stops early: the cache still holds ids[:-1] exactly.
            if self.reuse_cache and consistent:
                with self._lock:
                    self._saved = state

    # -- the phases --

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
            _truncate(cache, keep)
        else:
            cache = DynamicCache()
        todo = prompt[keep:-1]
        if todo:
            with torch.inference_mode():
                self.model(
                    input_ids=torch.tensor([todo], device=self.device),
                    **_cache_kw(self.model, cache),
                    **self._prefill_kwargs,
                )
        return _DecodeState(ids=list(prompt), cache=cache, prompt_len=len(prompt))

    def _draft(
        self,
        retrieved: list[Any],
        config: GenerationConfig,
        remaining: int,
        n_ids: int,
        curve: CostCurve | None,
        auto: bool,
    ) -> tuple[Trie | None, np.ndarray, Trie | None, int]:
        """(merged trie or None, selected indices into it, draft subtree or None, budget)."""
        from rest_core.trie import build_trie, subtree

        empty = np.empty(0, np.int64)
        if not retrieved:
            return None, empty, None, 0
        # Each source contributes its weight spread over its continuations: the trie's weights
        # are then a weighted mixture of the sources' next-token statistics.
        parts = [replace(r, weight=r.weight / r.continuations.shape[0]) for r in retrieved if r.continuations.shape[0]]
        c = config.draft.c
        if not parts:
            return None, empty, None, c
        trie = build_trie(parts)
        if len(trie) == 0:
            return None, empty, None, c
        # Never draft deeper than the tokens still wanted or the model's context allows.
        max_depth = remaining
        if self.max_positions:
            max_depth = min(max_depth, self.max_positions - n_ids)
        pool = trie
        pool_idx = None
        if int(trie.depths.max()) > max_depth:
            pool_idx = np.flatnonzero(trie.depths <= max_depth)
            pool = subtree(trie, pool_idx)
        if auto and curve is not None:
            calibration = np.clip(self._accepted_sum / self._predicted_sum, 0.05, 1.5)
            c, _ = choose_budget(pool, c, self._corrected(curve), self._overhead_ms, calibration)
        idx = self.selector(pool, c) if len(pool) else empty
        if pool_idx is not None:
            idx = pool_idx[idx]
        if idx.size == 0:
            return trie, empty, None, c
        return trie, idx, subtree(trie, idx), c

    def _forward_plain(self, root: int, cache) -> torch.Tensor:
        """(1, V) logits for the root alone: the same call a plain decoding step makes."""
        if self._layout:  # our full-length cache needs our own sliding-window / chunk mask
            return self._forward_tree(root, _EMPTY_DRAFT, cache, _cache_length(cache))
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([[root]], device=self.device), **_cache_kw(self.model, cache))
        return out.logits[0]

    def _forward_tree(self, root: int, draft: Trie, cache, cache_len: int) -> torch.Tensor:
        """(N+1, V) logits for the root and every draft node, in one tree-masked forward."""
        from rest_core.tree import position_offsets, tree_attention_mask

        ids = torch.tensor([[root, *draft.tokens.tolist()]], device=self.device)
        with torch.inference_mode():
            out = _forward(
                self.model, ids, cache, cache_len, tree_attention_mask(draft), position_offsets(draft),
                self._mask_kind, self._layout,
            )
        return out.logits[0]

    def _learn(
        self,
        trie: Trie | None,
        draft: Trie | None,
        accepted: Sequence[int],
        overhead_ms: float,
        q: int,
        forward_ms: float,
    ) -> None:
        """Update the auto budget from one step: per rank bucket, the predicted acceptance of
        the verified nodes vs what was accepted; the per-step overhead; the forward cost at q."""
        if trie is not None and draft is not None and len(draft):
            root_weight = float(trie.weights[trie.depths == 1].sum())
            order = np.lexsort((np.arange(len(draft)), -draft.weights))  # rank order, as selected
            buckets = rank_buckets(len(draft))
            hit = np.zeros(len(draft))
            hit[list(accepted)] = 1.0
            np.add.at(self._predicted_sum, buckets, draft.weights[order] / root_weight)
            np.add.at(self._accepted_sum, buckets, hit[order])
        self._overhead_ms += 0.1 * (overhead_ms - self._overhead_ms)
        n, mean = self._observed.get(q, (0, 0.0))
        self._observed[q] = (n + 1, mean + (forward_ms - mean) / min(n + 1, 20))  # mean, then EMA

    def _corrected(self, curve: CostCurve) -> CostCurve:
        """The measured curve with sizes seen at least 3 times replaced by their observed cost
        (the machine's load changes; the one-off measurement may have been unlucky)."""
        seen = {q: ms for q, (n, ms) in self._observed.items() if n >= 3}
        if not seen:
            return curve
        points = dict(zip(curve.sizes, curve.ms))
        # Scale unobserved sizes by how far observation drifted from measurement overall.
        ratios = [ms / float(curve(q)) for q, ms in seen.items()]
        drift = float(np.median(ratios))
        points = {q: ms * drift for q, ms in points.items()}
        points.update(seen)
        sizes = sorted(points)
        return CostCurve(tuple(sizes), tuple(np.maximum.accumulate([points[q] for q in sizes]).tolist()))


# --- helpers ---------------------------------------------------------------------------------


class _Context:
    """The growing context (prompt + generated ids) as a numpy array without re-copying."""

    def __init__(self, ids: Sequence[int]) -> None:
        self._buf = np.empty(max(256, 2 * len(ids)), dtype=np.int64)
        self._n = len(ids)
        self._buf[: self._n] = ids

    def extend(self, ids: Sequence[int]) -> None:
        need = self._n + len(ids)
        if need > self._buf.shape[0]:
            grown = np.empty(2 * need, dtype=np.int64)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        self._buf[self._n : need] = ids
        self._n = need

    def view(self) -> np.ndarray:
        return self._buf[: self._n]


def _forward(
    model,
    ids: torch.Tensor,
    cache,
    cache_len: int,
    tree_mask: np.ndarray,
    offsets: np.ndarray,
    mask_kind: str,
    layout: MaskLayout | None = None,
):
    """One forward over q new tokens after `cache_len` cached ones with a (q, q) tree mask:
    4-D mask (1, 1, q, cache_len + q), position ids cache_len + offsets. Models with sliding
    windows or attention chunks (`layout`) get those limits in the mask too: one mask for all
    layers, or one per layer type when the model reads its masks by layer type."""
    device = ids.device
    q = ids.shape[1]
    allowed = torch.ones((1, 1, q, cache_len + q), dtype=torch.bool, device=device)
    allowed[0, 0, :, cache_len:] = torch.from_numpy(tree_mask).to(device)
    positions = torch.from_numpy(offsets + cache_len).to(device).unsqueeze(0)  # (1, q)
    if layout is None:
        mask: Any = _as_mask(model, allowed, mask_kind)
    else:
        key_pos = torch.cat([torch.arange(cache_len, device=device), positions[0]])  # (cache_len + q,)
        masks = {kind: _as_mask(model, allowed & layout.limit(kind, positions[0], key_pos), mask_kind)
                 for kind in layout.kinds}
        mask = masks if layout.by_layer_type else masks[layout.kinds[0]]
    return model(input_ids=ids, attention_mask=mask, position_ids=positions, **_cache_kw(model, cache))


def _as_mask(model, allowed: torch.Tensor, mask_kind: str) -> torch.Tensor:
    if mask_kind == "bool":
        return allowed
    # eager attention adds the mask to the scores
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)


def _cache_length(cache) -> int:
    layer = cache.layers[0] if cache.layers else None
    return 0 if layer is None or layer.keys is None else int(layer.keys.shape[-2])


FULL, SLIDING, CHUNKED = "full_attention", "sliding_attention", "chunked_attention"


@dataclass(frozen=True)
class MaskLayout:
    """Which attention limits beyond causality a model's layers use, read as transformers reads
    them (`masking_utils.create_masks_for_generate`): per layer type when the config lists
    `layer_types` (Gemma 2/3, Cohere2, gpt-oss, Qwen2/3 with use_sliding_window past
    max_window_layers, Llama 4 chunks); else one `sliding_window` for every layer (Mistral,
    Phi-3, Starcoder2, Mixtral); else one `attention_chunk_size` for every layer.

    kinds: the layer kinds present (the single kind first when not by_layer_type).
    """

    kinds: tuple[str, ...]
    by_layer_type: bool  # the model takes a {layer type: mask} dict, else one mask
    window: int | None = None  # sliding layers: a query sees keys less than `window` positions back
    chunk: int | None = None  # chunked layers: a query sees keys of its own chunk of positions

    def limit(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(q, k) bool: which keys the layer kind lets each query see (before causality)."""
        if kind == SLIDING:  # transformers' sliding_window_overlay: kv > q - window
            return (q_pos[:, None] - k_pos[None, :]) < self.window
        if kind == CHUNKED:  # chunked_overlay: same chunk of positions
            return (q_pos[:, None] // self.chunk) == (k_pos[None, :] // self.chunk)
        return torch.ones((q_pos.shape[0], k_pos.shape[0]), dtype=torch.bool, device=q_pos.device)


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _mask_layout(config) -> MaskLayout | None:
    """The model's attention limits beyond causality (see MaskLayout), or None for plain causal
    attention. Layer types whose state a tree forward cannot verify (recurrent, compressed)
    are refused: a silently wrong mask would break the lossless guarantee."""
    text = _text_config(config)
    window = getattr(text, "sliding_window", None) or None
    chunk = getattr(text, "attention_chunk_size", None) or None
    types = getattr(text, "layer_types", None)
    if types is not None:
        kinds = tuple(dict.fromkeys(types))
        unknown = [k for k in kinds if k not in (FULL, SLIDING, CHUNKED)]
        if unknown:
            raise ValueError(
                f"layer type {unknown[0]!r} cannot be verified with a tree attention mask "
                f"(supported: {FULL}, {SLIDING}, {CHUNKED})"
            )
        for kind, size, name in ((SLIDING, window, "sliding_window"), (CHUNKED, chunk, "attention_chunk_size")):
            if kind in kinds and not size:
                raise ValueError(f"the model config has {kind} layers but no {name}")
        if set(kinds) <= {FULL}:
            return None
        # Always a full-attention mask too: some models build rotary or other tables per kind.
        kinds = tuple(dict.fromkeys((*kinds, FULL)))
        return MaskLayout(kinds=kinds, by_layer_type=True, window=window, chunk=chunk)
    if window:
        return MaskLayout(kinds=(SLIDING,), by_layer_type=False, window=int(window))
    if chunk:
        return MaskLayout(kinds=(CHUNKED,), by_layer_type=False, chunk=int(chunk))
    return None


def _sliding_window(config) -> int | None:
    """The sliding window of a model with sliding-window layers (some or all), else None."""
    layout = _mask_layout(config)
    return layout.window if layout is not None and SLIDING in layout.kinds else None


def _commit(cache, cache_len: int, rows: Sequence[int]) -> None:
    """Keep the cached context, the root (row 0) and `rows` (accepted draft rows, in path order);
    drop every other verified row. In place on every layer, O(accepted) copying."""
    keep = cache_len + 1 + len(rows)
    if rows and list(rows) != list(range(1, len(rows) + 1)):
        src = torch.tensor([cache_len + r for r in rows], device=cache.layers[0].keys.device)
        for layer in cache.layers:
            # Advanced indexing copies first, so overlapping source and target slots are safe.
            layer.keys[..., cache_len + 1 : keep, :] = layer.keys[..., src, :]
            layer.values[..., cache_len + 1 : keep, :] = layer.values[..., src, :]
    _truncate(cache, keep)


def _truncate(cache, length: int) -> None:
    """Keep the first `length` positions of every layer (a view, no copy)."""
    for layer in cache.layers:
        if layer.keys is not None and layer.keys.shape[-2] > length:
            layer.keys = layer.keys[..., :length, :]
            layer.values = layer.values[..., :length, :]


def _child_table(draft: Trie) -> dict[tuple[int, int], int]:
    from rest_core.tree import child_table

    return child_table(draft)


def _match_info(name: str, r: Any) -> MatchInfo:
    sample = []
    for row in r.continuations[:MATCH_SAMPLE_ROWS].tolist():
        cut = row.index(-1) if -1 in row else len(row)
        sample.append(tuple(row[:cut]))
    return MatchInfo(
        source=name,
        suffix_len=int(r.suffix_len),
        suffix_tokens=tuple(int(t) for t in r.suffix_tokens),
        occurrences=int(r.occurrences),
        sample=tuple(sample),
    )


def _mask_kind(model) -> str:
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl == "sdpa":
        return "bool"
    if impl == "eager":
        return "additive"
    raise ValueError(
        f"attention implementation {impl!r} cannot take a tree attention mask; load the model with "
        f"attn_implementation='sdpa' (or 'eager')"
    )


def _max_positions(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _stop_ids(model, tokenizer) -> tuple[int, ...]:
    """EOS ids as `model.generate` uses them: the generation config's, else the config's,
    else the tokenizer's."""
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if eos is not None:
            return tuple(int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]))
    return ()


_CACHE_KW: dict[type, str] = {}


def _cache_kw(model, cache) -> dict[str, Any]:
    """The KV cache argument under the name this transformers version uses ("cache" in 5.24+,
    "past_key_values" before)."""
    cls = type(model)
    if cls not in _CACHE_KW:
        params = inspect.signature(model.forward).parameters
        _CACHE_KW[cls] = "cache" if "cache" in params else "past_key_values"
    return {_CACHE_KW[cls]: cache, "use_cache": True}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
