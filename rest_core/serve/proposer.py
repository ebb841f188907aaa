"""REST inside vLLM: `RestProposer`, the class vLLM's speculative `custom_class` hook loads in
its worker process (`speculative_config={"method": "custom_class", "model":
"rest_core.serve.proposer.RestProposer", "num_speculative_tokens": K}`; the settings ride in
`additional_config["rest"]`, see `rest_core.serve.settings`). vLLM is never imported: the
`VllmConfig` and the batch arrays are read duck-typed, so the tests drive the class with fakes.

What vLLM 0.32 calls, after each engine step's sampling:

    propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None)

one entry per batch row: the tokens this step emitted for the row (empty: a partial prefill),
the row's context length and its tokens (row i's context is token_ids_cpu[i, :n_i]: prompt and
every token emitted so far). It wants one list of at most K draft ids per row; vLLM verifies
each as a chain in the next step (it has no tree verification) and emits exactly what the
model would have emitted without it.

Per step: each row's context feeds its sources (the datastores, and with "hybrid" its own
context source, kept per request and extended by the new tokens only), whose continuations make
the engine's merged trie; the acceptance model picks the likeliest chain in it
(`rest_core.budget.chain.chain_draft`); then one rule over the whole batch chooses how much of
each chain to draft, so that the next verify step yields the most tokens per millisecond
(`rest_core.budget.chain.batch_lengths`). The step's cost is learned online: the time between
the end of one propose() call and the start of the next is one engine step over the tokens this
proposer asked it to verify (rows x 1 + the drafts), which corrects a prior cost curve
(`rest_core.budget.cost_curve.ObservedCosts`); how many drafts each request then accepted
(its context grew by accepted + 1) recalibrates the acceptance model.

vLLM passes no request ids. Rows can be reordered between steps, so a row's request is read from
the calling model runner (`input_batch.req_ids`; not an API, so only when it is there and agrees
with the batch), and every cached context is checked against the row's tokens before it is
extended: a mismatch (another request in that row) rebuilds it from the row, so a wrong guess
costs time, never correctness.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel
from rest_core.budget.auto import EXPLORE_EVERY, AutoBudget
from rest_core.budget.chain import BatchPlan, ChainDraft, batch_lengths, chain_draft
from rest_core.budget.cost_curve import ObservedCosts
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.serve.settings import CONFIG_KEY, ServeSettings, StoreSpec
from rest_core.sources import KINDS, SourceTable, kind_of

# A step's observed time is filed under the nearest of these sizes (scaled by the prior's ratio
# between the two), so that batches of many different token counts still add up to enough
# observations per size for `ObservedCosts` to trust.
COST_GRID: tuple[int, ...] = tuple(sorted({int(round(2 ** (i / 2))) for i in range(0, 27)}))  # 1 .. 8192
# Observations (steps) after which a size's observed cost is trusted half as much: long, because
# only a few sizes are seen while the batch is steady (the engine's auto budget, one chat's steps: 16).
COST_HALF_LIFE = 512
_OUTLIER = 20.0  # a step this many times slower than the same size's running mean is not learned

_STORES: dict[tuple[str, str], Any] = {}  # (folder, tokenizer fingerprint) -> opened Datastore, once per process


def open_store(path: str, tokenizer: Any, check: bool = True) -> Any:
    """The datastore at `path`, opened once per process (vLLM may build several proposers in one
    worker) and checked against the model's tokenizer."""
    from rest_core.store.datastore import Datastore
    from rest_core.store.tokenizer_id import tokenizer_fingerprint

    key = (str(Path(path).resolve()), tokenizer_fingerprint(tokenizer) if (check and tokenizer is not None) else "")
    if key not in _STORES:
        _STORES[key] = Datastore.open(path, tokenizer if check else None)
    return _STORES[key]


def load_tokenizer(vllm_config: Any) -> Any:
    """The model's tokenizer, as vLLM was told to load it."""
    from transformers import AutoTokenizer

    mc = vllm_config.model_config
    name = getattr(mc, "tokenizer", None) or mc.model
    return AutoTokenizer.from_pretrained(name, trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))


@dataclass
class _Request:
    """What the proposer keeps for one request between steps."""

    ids: np.ndarray  # its context as of the last step (to check the row still holds it)
    context: ContextSource | None
    pending: ChainDraft | None = None  # the chain drafted last step, outcome not yet seen
    model: AcceptanceModel | None = None  # the acceptance model that scored it
    record: dict[str, Any] | None = None
    steps: int = 0


@dataclass
class _Step:
    """The last propose() call: when it ended and how many tokens each row's request verifies next."""

    end: float
    drafted: dict[Any, int] = field(default_factory=dict)  # request key -> draft length
    clean: bool = True  # only decoding rows, every one known before (no prefill in the batch)


class RestProposer:
    """REST drafts for vLLM: chains from the datastores (and the request's own context) with
    batch-aware lengths. Constructed by vLLM as `RestProposer(vllm_config)`."""

    def __init__(self, vllm_config: Any, *, tokenizer: Any = None) -> None:
        from rest_core.drafting.draft import warm_up

        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(vllm_config.model_config.max_model_len)
        extra = getattr(vllm_config, "additional_config", None) or {}
        self.settings = ServeSettings.parse(extra.get(CONFIG_KEY) if isinstance(extra, dict) else None)
        s = self.settings
        if s.retrieval.m < self.k:
            # Continuations shorter than K cap every chain below what vLLM was told to verify.
            print(f"REST proposer: m={s.retrieval.m} < num_speculative_tokens={self.k}: chains stop at m",
                  file=sys.stderr)
        self.device_type = _device_type(vllm_config)
        stores: list[tuple[StoreSpec, Any]] = []
        if s.use_stores:
            tok = tokenizer if tokenizer is not None else (load_tokenizer(vllm_config) if s.check_tokenizer else None)
            stores = [(spec_, open_store(spec_.path, tok, s.check_tokenizer)) for spec_ in s.stores]
        self.table = SourceTable.for_stores([spec_.name for spec_, _ in stores])
        self.stores = [
            DatastoreSource(ds, s.retrieval, spec_.weight, bit=src.bit, name=src.name)
            for (spec_, ds), src in zip(stores, self.table.stores, strict=True)
        ]
        self.budget = AutoBudget(s.prior_curve(self.device_type), AcceptanceModel.load(), ObservedCosts(COST_HALF_LIFE, fit_shape=True))
        self.requests: dict[Any, _Request] = {}
        self.records: deque[dict[str, Any]] = deque(maxlen=s.records)
        self.totals = _Totals(self.table)
        self._last: _Step | None = None
        self._idle = 0  # steps in a row that had candidates but drafted nothing
        self._since_explore = 0  # steps since the plan was last pushed off its optimum
        self._row_ms = 0.5  # running mean of propose()'s own time per row
        self._log = open(s.log, "a", encoding="utf-8") if s.log else None  # noqa: SIM115 - lives as long as the proposer
        self.clock = time.perf_counter  # what step times are read from (a test's fake clock)
        warm_up()  # compile (or load) the retrieval and trie kernels before the first step

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """vLLM's CPU runner calls this with the target model whenever a drafter exists; REST
        drafts without a model."""

    # -- the step -------------------------------------------------------------------------

    def propose(
        self,
        sampled_token_ids: Any,
        num_tokens_no_spec: Any,
        token_ids_cpu: np.ndarray,
        slot_mappings: Any = None,
        **_: Any,
    ) -> list[list[int]]:
        start = self.clock()
        rows = len(sampled_token_ids)
        ids = _caller_req_ids(rows)
        keys: list[Any] = ids if ids is not None else [("row", i) for i in range(rows)]
        if rows:
            self.totals.req_ids = "runner" if ids is not None else "rows"
        previous, step = self._last, _Step(0.0)
        lengths = [int(num_tokens_no_spec[i]) for i in range(rows)]
        # Rows that may draft: not a partial prefill (it emitted nothing), not at the length limit.
        drafting = [i for i in range(rows) if len(sampled_token_ids[i]) and lengths[i] < self.max_model_len - 1]
        step.clean = len(drafting) == rows
        explore = self._idle >= EXPLORE_EVERY
        retrieve = explore or self._drafting_can_pay(len(drafting), rows)
        chains: list[ChainDraft] = []
        for i in drafting:
            ctx = np.asarray(token_ids_cpu[i, : lengths[i]])
            req, known = self._request(keys[i], ctx)
            step.clean &= known and previous is not None and keys[i] in previous.drafted
            room = min(self.k, self.max_model_len - lengths[i] - 1)
            chains.append(self._chain(req, ctx, room) if (room > 0 and retrieve) else ChainDraft())
        if not retrieve:
            self.totals.steps_skipped += 1
        if previous is not None and step.clean and previous.clean:
            self._learn_cost(previous, start, [keys[i] for i in drafting])
        plan = self._plan(chains, rows, explore)
        # Steps that could have drafted but did not count towards exploring (see `AutoBudget`).
        passed_up = any(len(c) for c in chains) or not retrieve
        self._idle = self._idle + 1 if (passed_up and plan.tokens == len(chains)) else 0
        out: list[list[int]] = [[] for _ in range(rows)]
        for i, chain, length in zip(drafting, chains, plan.lengths, strict=True):
            drafted = chain.cut(length)
            out[i] = [int(t) for t in drafted.tokens]
            self._remember(keys[i], drafted, chain, lengths[i])
            step.drafted[keys[i]] = len(drafted)
        self._forget_others(set(keys))
        end = self.clock()
        self._row_ms += 0.1 * (1000.0 * (end - start) / max(rows, 1) - self._row_ms)
        step.end = end
        self._last = step
        self.totals.calls += 1
        self.totals.propose_ms += 1000.0 * (end - start)
        self._flush()
        return out

    def _plan(self, chains: list[ChainDraft], rows: int, explore: bool) -> BatchPlan:
        """Each chain's length for the next step. Only sizes that are verified get timed, so the
        cost curve's slope is learned only if the batch's token count varies: every
        EXPLORE_EVERY steps the plan is pushed off its optimum, up (after that many steps that
        drafted nothing: at least one token per row) or down (half the planned drafts), so that
        a prior that overstates or understates how the cost grows is corrected either way."""
        curve, overhead = self.budget.corrected_curve(), self._row_ms * rows
        probs = [c.p for c in chains]
        if explore:
            self._since_explore = 0
            return batch_lengths(probs, curve, overhead_ms=overhead, at_least=len(chains), limit=self.k)
        plan = batch_lengths(probs, curve, overhead_ms=overhead, limit=self.k)
        drafted = plan.tokens - len(chains)
        self._since_explore += 1
        if drafted >= 2 and self._since_explore >= EXPLORE_EVERY:
            self._since_explore = 0
            self.totals.steps_explored += 1
            return batch_lengths(probs, curve, overhead_ms=overhead, at_most=drafted // 2, limit=self.k)
        return plan

    def _drafting_can_pay(self, b: int, rows: int) -> bool:
        """Whether any draft could pay in a step of b decoding rows, even if every drafted token
        were certain to be accepted; if not, the step retrieves nothing (it saves the
        retrieval's time when a full batch on a slow device makes every extra token a loss)."""
        if b == 0:
            return False
        curve, overhead = self.budget.corrected_curve(), self._row_ms * rows
        n = np.arange(1, b * self.k + 1)
        return bool(np.any((b + n) / (overhead + curve(b + n)) > b / (overhead + float(curve(b)))))

    def _request(self, key: Any, ctx: np.ndarray) -> tuple[_Request, bool]:
        """The request's state, extended by its new tokens; rebuilt from the row when the row no
        longer holds the context it had (another request, or a request seen for the first time).
        Learns the outcome of the chain drafted for it last step. Returns (state, was it known)."""
        req = self.requests.get(key)
        n = ctx.shape[0]
        if req is not None and req.ids.shape[0] <= n and np.array_equal(req.ids, ctx[: req.ids.shape[0]]):
            new = ctx[req.ids.shape[0]:]
            self._outcome(req, new)
            if req.context is not None:
                req.context.extend(new)
            req.ids = ctx.copy()
            return req, True
        if req is not None:
            self.totals.rebuilt += 1
        context = None
        if self.settings.use_context:
            context = ContextSource(self.settings.retrieval, self.settings.context_weight)
            context.reset(ctx)
        req = _Request(ctx.copy(), context)
        self.requests[key] = req
        return req, False

    def _chain(self, req: _Request, ctx: np.ndarray, room: int) -> ChainDraft:
        """The likeliest chain of at most `room` tokens from this request's sources."""
        retrieved = []
        tail = ctx[-self.settings.retrieval.n_max:]
        for store in self.stores:
            store.reset(tail)  # a store's source keeps only the last n_max tokens: shared by all rows
            retrieved.append(store.retrieve())
        if req.context is not None:
            retrieved.append(req.context.retrieve())
        if not retrieved:
            return ChainDraft()
        req.model = self.budget.model_for(retrieved)
        return chain_draft(retrieved, req.model, room)

    # -- learning -------------------------------------------------------------------------

    def _outcome(self, req: _Request, new: np.ndarray) -> None:
        """The row's context grew by `new` since the last step: accepted drafts + one token of
        the model's own. Teaches the acceptance model and resolves the step's record."""
        chain, req.pending = req.pending, None
        if chain is None or len(chain) == 0 or new.shape[0] == 0:
            return
        accepted = int(new.shape[0]) - 1
        if accepted > len(chain) or not np.array_equal(new[:accepted], chain.tokens[:accepted]):
            return  # not what was drafted (the scheduler cut the draft, or the row was reused): nothing to learn
        observed = min(accepted + 1, len(chain))  # accepted ones, and the first rejected one
        outcome = np.arange(observed) < accepted
        if chain.features is not None and req.model is not None:
            req.model.learn(chain.features.take(np.arange(observed)), outcome)
        self.totals.resolve(chain, accepted)
        if req.record is not None:
            req.record["accepted"] = accepted
            if self._log is not None:
                self._log.write(json.dumps(req.record) + "\n")

    def _learn_cost(self, previous: _Step, start: float, keys: list[Any]) -> None:
        """The time since the last call was one engine step verifying each of these requests'
        last token and drafts: file it under the cost grid."""
        tokens = sum(1 + previous.drafted[k] for k in keys)
        if tokens == 0:
            return
        ms = 1000.0 * (start - previous.end)
        grid = min(COST_GRID, key=lambda q: abs(np.log(q / tokens)))
        prior = self.budget.curve
        ms *= float(prior(grid)) / float(prior(tokens))  # as if the step had verified `grid` tokens
        seen = self.budget.costs.seen.get(grid)
        if ms <= 0.0 or (seen is not None and seen.n >= 3 and ms > _OUTLIER * seen.ms):
            return  # a hiccup (a pause of the whole process), not what such a step costs
        self.budget.costs.observe(grid, ms)
        self.totals.steps_timed += 1

    def _remember(self, key: Any, drafted: ChainDraft, chain: ChainDraft, n: int) -> None:
        req = self.requests[key]
        req.steps += 1
        req.pending = drafted if len(drafted) else None
        self.totals.add(chain, drafted)
        if len(drafted) or len(chain):
            record = {
                "req": key if not isinstance(key, tuple) else f"row{key[1]}",
                "step": req.steps, "context_len": n,
                "drafted": [int(t) for t in drafted.tokens],
                "sources": [self.table.origin(int(m)).label for m in drafted.sources],
                "p": [round(float(x), 4) for x in drafted.p],
                "candidates": len(chain), "accepted": None,
            }
            self.records.append(record)
            req.record = record if len(drafted) else None
        else:
            req.record = None

    def _forget_others(self, keys: set[Any]) -> None:
        """Requests not in this batch have finished (or were preempted: they are rebuilt when
        they return)."""
        for key in [k for k in self.requests if k not in keys]:
            del self.requests[key]

    # -- reporting --------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The running totals and the learned cost curve (JSON-ready)."""
        curve = self.budget.corrected_curve()
        return {
            **self.totals.as_dict(),
            "method": self.settings.method, "k": self.k, "pid": os.getpid(),
            "stores": [s.name for s in self.stores],
            "cost_curve": {"sizes": list(curve.sizes), "ms": [round(x, 3) for x in curve.ms]},
            "prior_curve": {"sizes": list(self.budget.curve.sizes), "ms": list(self.budget.curve.ms)},
        }

    def _flush(self) -> None:
        if self._log is not None:
            self._log.flush()
        path = self.settings.stats
        if path:
            tmp = f"{path}.tmp-{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.snapshot(), f)
            os.replace(tmp, path)


class _Totals:
    """Drafted and accepted tokens per source kind and per named source, over the process."""

    def __init__(self, table: SourceTable) -> None:
        self.table = table
        self.calls = 0
        self.rows = 0
        self.rows_with_candidates = 0
        self.rows_drafted = 0
        self.candidate_tokens = 0
        self.drafted_tokens = 0
        self.accepted_tokens = 0
        self.resolved_drafts = 0
        self.rebuilt = 0
        self.steps_timed = 0  # engine steps whose time was learned
        self.steps_skipped = 0  # steps that retrieved nothing: no draft could pay
        self.steps_explored = 0  # steps that drafted half the plan, to time a smaller step
        self.propose_ms = 0.0
        self.req_ids = "unknown"
        self.drafted_by_kind = dict.fromkeys(KINDS, 0)
        self.accepted_by_kind = dict.fromkeys(KINDS, 0)
        self.drafted_by_source = dict.fromkeys((s.name for s in table), 0)
        self.accepted_by_source = dict.fromkeys((s.name for s in table), 0)
        self.length_hist: dict[int, int] = {}

    def add(self, chain: ChainDraft, drafted: ChainDraft) -> None:
        self.rows += 1
        self.rows_with_candidates += bool(len(chain))
        self.rows_drafted += bool(len(drafted))
        self.candidate_tokens += len(chain)
        self.drafted_tokens += len(drafted)
        self.length_hist[len(drafted)] = self.length_hist.get(len(drafted), 0) + 1
        for m in drafted.sources:
            self.drafted_by_kind[kind_of(int(m))] += 1
        for name, n in self.table.count_sources(int(m) for m in drafted.sources).items():
            self.drafted_by_source[name] += n

    def resolve(self, drafted: ChainDraft, accepted: int) -> None:
        self.resolved_drafts += 1
        self.accepted_tokens += accepted
        for m in drafted.sources[:accepted]:
            self.accepted_by_kind[kind_of(int(m))] += 1
        for name, n in self.table.count_sources(int(m) for m in drafted.sources[:accepted]).items():
            self.accepted_by_source[name] += n

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "table"}
        out["length_hist"] = {str(k): v for k, v in sorted(self.length_hist.items())}
        out["propose_ms"] = round(self.propose_ms, 3)
        return out


def _caller_req_ids(rows: int) -> list[str] | None:
    """The request id of each row, read from the model runner that called propose() (vLLM 0.32's
    GPUModelRunner.propose_draft_token_ids, whose `self` holds `input_batch.req_ids`). Not an API:
    None unless it is there and has one id per row."""
    try:
        runner = sys._getframe(2).f_locals.get("self")
        ids = list(runner.input_batch.req_ids)
    except Exception:  # noqa: BLE001 - any vLLM that does not look like 0.32
        return None
    if len(ids) != rows or not all(isinstance(r, str) for r in ids):
        return None
    return ids


def _device_type(vllm_config: Any) -> str:
    dc = getattr(vllm_config, "device_config", None)
    dev = getattr(dc, "device_type", None) or str(getattr(dc, "device", "") or "")
    return "cpu" if str(dev).startswith("cpu") else ("cuda" if dev else "cpu")
