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
(`rest_core.budget.cost_curve.ShapedCorrection`: a fitted line, with the own cost of each size
timed often enough blended in); how many drafts each request then accepted
(its context grew by accepted + 1) recalibrates the acceptance model.

vLLM passes no request ids. Rows can be reordered between steps, so a row's request is read from
the calling model runner (`input_batch.req_ids`; not an API, so only when it is there and agrees
with the batch), and every cached context is checked against the row's tokens before it is
extended: a mismatch (another request in that row) rebuilds it from the row, so a wrong guess
costs time, never correctness. From the same runner comes each request's `vllm_xargs`
(`rest_core.serve.settings.RequestOptions`): drafting off for it, or a subset of the stores.

With a draft log (`log`), each resolved chain is one line (request id, the context length it
was drafted at, its tokens, their sources as labels and bits, how many were accepted), flushed
at the end of every call: before vLLM sends the tokens a line explains, so a client streaming
the request can highlight them (`rest_core.serve.records`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel, NodeFeatures
from rest_core.budget.auto import EXPLORE_EVERY, AutoBudget
from rest_core.budget.chain import BatchPlan, ChainDraft, batch_lengths, chain_drafts, likeliest_path
from rest_core.budget.cost_curve import ShapedCorrection
from rest_core.devices import device_type
from rest_core.drafting.answers_source import AnswerNamespaces
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.source import Retrieved
from rest_core.serve.settings import (
    ANSWERS_NAME,
    CONFIG_KEY,
    MAX_ANSWER_NAMESPACES,
    RequestOptions,
    ServedStore,
    ServeSettings,
)
from rest_core.serve.totals import ProposerTotals
from rest_core.sources import MAX_STORES, SourceTable
from rest_core.store.opened import OpenStores

MAX_CHECK_EVERY = 256  # skipped steps: the longest wait before retrieving is tried again
CHECKS_BEFORE_BACKOFF = 4  # tries that did not pay before the wait between them doubles
COST_HALF_LIFE = 256  # steps: how fast what a step costs is relearned (a load change, a new batch size)
FLUSH_S = 1.0  # the totals file is written at most this often (the log: every call)
_OUTLIER = 20.0  # a step this many times slower than predicted is not learned (the process was paused)

# The stores opened in this process: vLLM may build several proposers in one worker.
_STORES = OpenStores()


def open_store(path: str, tokenizer: Any, check: bool = True) -> Any:
    """The datastore at `path`, opened once per process and checked against the model's tokenizer."""
    return _STORES.open(path, tokenizer if check else None)


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
    context: ContextSource | None  # `ids` indexed as far as the last step that retrieved
    start: int = 0  # where its answer starts in `ids` (its prompt's length, as first seen)
    pending: ChainDraft | None = None  # the chain drafted last step, outcome not yet seen
    model: AcceptanceModel | None = None  # the acceptance model that scored it
    record: dict[str, Any] | None = None
    steps: int = 0
    opts: RequestOptions = field(default_factory=RequestOptions)  # what the request asked (vllm_xargs)


@dataclass
class _Step:
    """The last propose() call: when it ended and how many tokens each row's request verifies next."""

    end: float
    drafted: dict[Any, int] = field(default_factory=dict)  # request key -> draft length
    clean: bool = True  # only decoding rows, every one known before (no prefill in the batch)
    explored: bool = False  # drafted because retrieving was tried again (`_worth_retrieving`)


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
            print(
                f"REST proposer: m={s.retrieval.m} < num_speculative_tokens={self.k}: chains stop at m", file=sys.stderr
            )
        self.device_type = _device_type(vllm_config)
        stores: list[tuple[ServedStore, Any]] = []
        if s.use_stores:
            tok = tokenizer if tokenizer is not None else (load_tokenizer(vllm_config) if s.check_tokenizer else None)
            stores = [(spec_, open_store(spec_.path, tok, s.check_tokenizer)) for spec_ in s.stores]
        names = [spec_.name for spec_, _ in stores]
        answers = s.use_answers and len(names) < MAX_STORES and ANSWERS_NAME not in names
        if s.use_answers and not answers:
            print(
                f"REST proposer: no bit left for earlier answers (or a store is named {ANSWERS_NAME!r})",
                file=sys.stderr,
            )
        self.table = SourceTable.for_stores(names + ([ANSWERS_NAME] if answers else []))
        # The answers this server finished, per namespace (RequestOptions.answers).
        self.answers_bit = self.table.bit(ANSWERS_NAME) if answers else 0
        self.histories = AnswerNamespaces(s.answers_tokens, MAX_ANSWER_NAMESPACES)
        self.stores = [
            DatastoreSource(ds, s.retrieval, spec_.weight, bit=src.bit, name=src.name)
            for (spec_, ds), src in zip(stores, self.table.stores[: len(stores)], strict=True)
        ]
        # The step's cost: the prior curve, corrected by every step timed (`_learn_cost`).
        self.cost = ShapedCorrection(s.prior_curve(self.device_type), half_life=COST_HALF_LIFE)
        # What the auto budget knows about acceptance: a recalibrated copy of the prior model per
        # set of sources (the cost part of AutoBudget is not used: a batch's cost is `self.cost`).
        self.budget = AutoBudget(None, AcceptanceModel.load())
        self.requests: dict[Any, _Request] = {}
        self.records: deque[dict[str, Any]] = deque(maxlen=s.records)
        self.totals = ProposerTotals(self.table)
        self._last: _Step | None = None
        self._idle = 0  # steps in a row that had candidates but drafted nothing
        self._full_ms = 0.5  # running mean of propose()'s time per row when it retrieves
        self._bare_ms = 0.05  # ... and when it only keeps the contexts up to date
        self._verdicts: dict[int, float] = {}  # batch size class -> retrieving's rate over skipping's
        self._since_check = 0  # skipped steps since retrieving was last tried
        self._failed_checks: dict[int, int] = {}  # batch size class -> tries in a row that did not pay
        self._to_learn: dict[int, tuple[AcceptanceModel, list, list]] = {}  # this step's outcomes, per model
        self._since_explore = 0  # steps since the plan was last pushed off its optimum
        self._log = open(s.log, "a", encoding="utf-8") if s.log else None  # noqa: SIM115 - lives as long as the proposer
        self.clock = time.perf_counter  # what step times are read from (a test's fake clock)
        self._flushed = -float("inf")  # when the log and totals were last written
        warm_up()  # compile (or load) the retrieval and trie kernels before the first step
        likeliest_path(np.array([-1, 0], np.int64), np.array([0.5, 0.4]))  # and the chain's

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
        self._flush(start)
        rows = len(sampled_token_ids)
        ids, extras = _caller_rows(rows)
        keys: list[Any] = ids if ids is not None else [("row", i) for i in range(rows)]
        if rows:
            self.totals.req_ids = "runner" if ids is not None else "rows"
        previous, step = self._last, _Step(0.0)
        lengths = [int(num_tokens_no_spec[i]) for i in range(rows)]
        # Rows that may draft: not a partial prefill (it emitted nothing), not at the length limit.
        drafting = [i for i in range(rows) if len(sampled_token_ids[i]) and lengths[i] < self.max_model_len - 1]
        step.clean = len(drafting) == rows
        retrieve, at_least = self._worth_retrieving(len(drafting), rows)
        step.explored = at_least > 0
        if retrieve and self._idle >= EXPLORE_EVERY:
            at_least = max(at_least, len(drafting))
        found: list[list[Retrieved]] = []
        models: list[AcceptanceModel | None] = []
        rooms: list[int] = []
        for i in drafting:
            ctx = np.asarray(token_ids_cpu[i, : lengths[i]])
            req, known = self._request(keys[i], ctx, extras[i] if extras else None)
            step.clean &= known and previous is not None and keys[i] in previous.drafted
            room = min(self.k, self.max_model_len - lengths[i] - 1) if (retrieve and not req.opts.off) else 0
            found.append(self._retrieve(req, ctx) if room > 0 else [])
            models.append(req.model)
            rooms.append(room)
        self._learn_outcomes()
        if previous is not None and step.clean and previous.clean:
            self._learn_cost(previous, start, [keys[i] for i in drafting])
        if retrieve:
            chains = chain_drafts(found, models, rooms)
            best, plan = self._plan(chains, rows, at_least)
            # Retrieving steps that had candidates but drafted nothing count towards exploring
            # (see `AutoBudget`); steps that skipped retrieval are `_worth_retrieving`'s business.
            had = any(len(c) for c in chains)
            self._idle = self._idle + 1 if (had and plan.tokens == len(chains)) else 0
            out = self._cut(rows, drafting, chains, plan, keys, lengths, step)
        else:
            out = self._skip(rows, drafting, keys, step)
        self._forget_others(set(keys))
        end = self.clock()
        self._propose_ms(retrieve, 1000.0 * (end - start), rows)
        if retrieve and drafting:
            self._judge_retrieval(best, len(drafting), rows)
        step.end = end
        if self._log is not None and previous is not None:
            self._log_step(previous, step, rows, [keys[i] for i in drafting], start, end, retrieve)
        self._last = step
        self._end_call(1000.0 * (end - start))
        return out

    def _end_call(self, ms: float) -> None:
        self.totals.calls += 1
        self.totals.propose_ms += ms
        if self._log is not None:
            self._log.flush()  # this step's resolved records, before vLLM sends the tokens they explain

    def _cut(
        self,
        rows: int,
        drafting: list[int],
        chains: list[ChainDraft],
        plan: BatchPlan,
        keys: list[Any],
        lengths: list[int],
        step: _Step,
    ) -> list[list[int]]:
        """Each row's draft: its chain cut to the planned length (nothing for rows not drafting),
        remembered for learning from what the next call sees."""
        out: list[list[int]] = [[] for _ in range(rows)]
        for i, chain, length in zip(drafting, chains, plan.lengths, strict=True):
            drafted = chain.cut(length)
            out[i] = drafted.tokens.tolist()
            self._remember(keys[i], drafted, chain, lengths[i])
            step.drafted[keys[i]] = len(drafted)
        return out

    def _skip(self, rows: int, drafting: list[int], keys: list[Any], step: _Step) -> list[list[int]]:
        """No row drafts (retrieval skipped): what `_cut` and `_remember` would do for empty chains,
        without building them. At a full batch on a CPU most steps skip, so this is what a step
        costs the engine."""
        self.totals.steps_skipped += 1
        self._since_explore += 1  # as `_plan` counts a step that drafted nothing
        for i in drafting:
            req = self.requests[keys[i]]
            req.steps += 1
            req.pending = req.record = None
            step.drafted[keys[i]] = 0
        self.totals.add_empty(len(drafting))
        return [[] for _ in range(rows)]

    def _log_step(
        self, previous: _Step, step: _Step, rows: int, drafting: list[Any], start: float, end: float, retrieve: bool
    ) -> None:
        """One line of the step log: the step that ended as this call began (its wall time, what it
        verified) and this call's time."""
        verified = sum(1 + previous.drafted.get(key, 0) for key in drafting)
        self._log.write(
            json.dumps(
                {
                    "kind": "step",
                    "rows": rows,
                    "tokens": verified,
                    "clean": bool(step.clean and previous.clean),
                    "step_ms": round(1000.0 * (start - previous.end), 3),
                    "propose_ms": round(1000.0 * (end - start), 3),
                    "retrieved": retrieve,
                    "drafted_next": sum(step.drafted.values()),
                }
            )
            + "\n"
        )

    def _plan(self, chains: list[ChainDraft], rows: int, at_least: int) -> tuple[BatchPlan, BatchPlan]:
        """(the best plan, the plan to draft): each chain's length for the next step. Only sizes
        that are verified get timed, so the cost curve's slope is learned only if the batch's
        token count varies: the plan drafted is pushed off the best one, up to `at_least`
        tokens (when exploring, see `_worth_retrieving`) or, every EXPLORE_EVERY steps, down to
        half the best plan's drafts, so that a prior that overstates or understates how the
        cost grows is corrected either way."""
        curve, overhead = self.cost.curve(), self._full_ms * rows
        probs = [c.p for c in chains]
        best = batch_lengths(probs, curve, overhead_ms=overhead, limit=self.k)
        drafted = best.tokens - len(chains)
        if at_least > drafted:
            self._since_explore = 0
            return best, batch_lengths(probs, curve, overhead_ms=overhead, at_least=at_least, limit=self.k)
        self._since_explore += 1
        if drafted >= 2 and self._since_explore >= EXPLORE_EVERY:
            self._since_explore = 0
            self.totals.steps_explored += 1
            return best, batch_lengths(probs, curve, overhead_ms=overhead, at_most=drafted // 2, limit=self.k)
        return best, best

    # -- whether to retrieve at all ---------------------------------------------------------

    def _worth_retrieving(self, b: int, rows: int) -> tuple[bool, int]:
        """(whether this step looks for drafts at all, how many drafted tokens it must try at
        least). Retrieval and scoring cost time per row (`_full_ms`, against `_bare_ms` for a
        step that only keeps the contexts up to date), so the choice is the plan's own rate, one
        level up: a step that drafts must yield more tokens per millisecond than one that does
        not even look. No when even certain drafts could not pay for their verify, or when
        recent steps of a batch this size drafted less than their retrieval cost
        (`_judge_retrieval`); either is rechecked after EXPLORE_EVERY skipped steps, an interval
        that doubles (up to MAX_CHECK_EVERY) once CHECKS_BEFORE_BACKOFF rechecks in a row found
        that drafting does not pay (at a full batch on a CPU a verify step with a few drafts cost
        2.6x a plain one, so rechecking every 16 steps cost about 10%), drafting a quarter
        as many tokens as there are rows at least, so that a bigger step is timed and a cost
        curve that says "never" can be proved wrong."""
        if b == 0:
            return False, 0
        key = _size_class(b)
        verdict = self._verdicts.get(key)
        if (verdict is None or verdict >= 1.0) and self._could_pay(b, rows):
            self._failed_checks.pop(key, None)
            return True, 0
        self._since_check += 1
        failed = self._failed_checks.get(key, 0)
        if self._since_check >= min(EXPLORE_EVERY << max(0, failed - CHECKS_BEFORE_BACKOFF), MAX_CHECK_EVERY):
            self._since_check = 0
            self._failed_checks[key] = failed + 1
            self.totals.steps_explored += 1
            return True, -(-b // 4)
        return False, 0

    def _could_pay(self, b: int, rows: int) -> bool:
        """Whether any number of drafted tokens, all accepted, would yield more tokens per
        millisecond than a step that does not look for drafts."""
        curve = self.cost.curve()
        bare = b / (self._bare_ms * rows + float(curve(b)))
        n = np.arange(1, b * self.k + 1)
        return bool(np.any((b + n) / (self._full_ms * rows + curve(b + n)) > bare))

    def _judge_retrieval(self, plan: BatchPlan, b: int, rows: int) -> None:
        """A retrieving step's expected rate against a step that skips retrieval, as a running
        mean per batch size class (>= 1: retrieving pays)."""
        bare = b / (self._bare_ms * rows + float(self.cost(b)))
        ratio = plan.rate / bare if bare > 0 else 1.0
        key = _size_class(b)
        old = self._verdicts.get(key)
        self._verdicts[key] = ratio if old is None else old + 0.2 * (ratio - old)

    def _propose_ms(self, retrieved: bool, ms: float, rows: int) -> None:
        per_row = ms / max(rows, 1)
        if retrieved:
            self._full_ms += 0.1 * (per_row - self._full_ms)
        else:
            self._bare_ms += 0.1 * (per_row - self._bare_ms)

    # -- per request ------------------------------------------------------------------------

    def _request(self, key: Any, ctx: np.ndarray, extra: Any = None) -> tuple[_Request, bool]:
        """The request's state, extended by its new tokens; rebuilt from the row when the row no
        longer holds the context it had (another request, or a request seen for the first time).
        Collects the outcome of the chain drafted for it last step. Returns (state, was it known).
        `extra`: the request's SamplingParams.extra_args, read when the state is made."""
        req = self.requests.get(key)
        n = ctx.shape[0]
        if req is not None and req.ids.shape[0] <= n and np.array_equal(req.ids, ctx[: req.ids.shape[0]]):
            self._outcome(req, ctx[req.ids.shape[0] :])
            req.ids = ctx.copy()
            return req, True
        if req is not None:
            self.totals.rebuilt += 1
            self._archive(req)  # another request in this row: the one before has ended
        context = None
        if self.settings.use_context:  # indexed when first retrieved from (`_retrieve`)
            context = ContextSource(self.settings.retrieval, self.settings.context_weight)
        req = _Request(ctx.copy(), context, start=max(n - 1, 0), opts=RequestOptions.parse(extra))
        self.requests[key] = req
        return req, False

    def _retrieve(self, req: _Request, ctx: np.ndarray) -> list[Retrieved]:
        """What this request's sources find for its context (and the acceptance model that will
        score it, kept on the request to learn from the outcome)."""
        retrieved = []
        tail = ctx[-self.settings.retrieval.n_max :]
        for store in self.stores:
            if req.opts.stores is not None and store.name not in req.opts.stores:
                continue
            store.reset(tail)  # a store's source keeps only the last n_max tokens: shared by all rows
            retrieved.append(store.retrieve())
        if req.context is not None and req.opts.context:
            # Indexed only up to the last step that retrieved: skipped steps leave it behind.
            req.context.extend(ctx[len(req.context) :])
            retrieved.append(req.context.retrieve())
        if self.answers_bit and req.opts.answers is not None:
            history = self.histories.get(req.opts.answers)
            r, bit = self.settings.retrieval, self.answers_bit
            retrieved.append(history.retrieve(tail, r, bit, 1.0) if history else Retrieved.empty(bit, r.m))
        req.model = self.budget.model_for(retrieved) if retrieved else None
        return retrieved

    # -- learning -------------------------------------------------------------------------

    def _outcome(self, req: _Request, new: np.ndarray) -> None:
        """The row's context grew by `new` since the last step: accepted drafts + one token of
        the model's own. Queues what the acceptance model learns (`_learn_outcomes`) and
        resolves the step's record."""
        chain, req.pending = req.pending, None
        if chain is None or len(chain) == 0 or new.shape[0] == 0:
            return
        accepted = int(new.shape[0]) - 1
        if accepted > len(chain) or not np.array_equal(new[:accepted], chain.tokens[:accepted]):
            return  # not what was drafted (the scheduler cut the draft, or the row was reused): nothing to learn
        observed = min(accepted + 1, len(chain))  # accepted ones, and the first rejected one
        if chain.features is not None and req.model is not None:
            queue = self._to_learn.setdefault(id(req.model), (req.model, [], []))
            queue[1].append(chain.features.take(np.arange(observed)))
            queue[2].append(np.arange(observed) < accepted)
        self.totals.resolve(chain, accepted)
        if req.record is not None:
            req.record["accepted"] = accepted
            if self._log is not None:
                bits = req.record["sources"]
                record = {**req.record, "sources": [self.table.origin(m).label for m in bits], "bits": bits}
                self._log.write(json.dumps(record) + "\n")

    def _learn_outcomes(self) -> None:
        """One update per acceptance model from every request's outcome this step."""
        for model, feats, outcomes in self._to_learn.values():
            model.learn(NodeFeatures.concat(feats), np.concatenate(outcomes))
        self._to_learn.clear()

    def _learn_cost(self, previous: _Step, start: float, keys: list[Any]) -> None:
        """The time since the last call was one engine step verifying each of these requests'
        last token and drafts."""
        tokens = sum(1 + previous.drafted[k] for k in keys)
        ms = 1000.0 * (start - previous.end)
        if tokens == 0 or ms <= 0.0:
            return  # nothing verified
        # The fitted line is enough to tell a pause from a step, and costs no rebuild of the curve.
        if self.cost.observations > 16 and ms > _OUTLIER * float(self.cost.line(tokens)):
            return  # a hiccup (a pause of the whole process), not what such a step costs
        if previous.explored and ms < 0.8 * float(self.cost(tokens)):
            self._failed_checks.clear()  # the cost was overstated: try again at the usual pace
        self.cost.observe(tokens, ms)
        self.totals.steps_timed += 1

    def _remember(self, key: Any, drafted: ChainDraft, chain: ChainDraft, n: int) -> None:
        req = self.requests[key]
        req.steps += 1
        req.pending = drafted if len(drafted) else None
        self.totals.add(chain, drafted)
        if len(drafted) or len(chain):
            record = {
                "kind": "draft",
                "req": key if not isinstance(key, tuple) else f"row{key[1]}",
                "step": req.steps,
                "context_len": n,
                "drafted": [int(t) for t in drafted.tokens],
                "sources": drafted.sources.tolist(),  # bitmasks; named when the record is written
                "p": [round(float(x), 4) for x in drafted.p],
                "candidates": len(chain),
                "accepted": None,
            }
            self.records.append(record)
            req.record = record if len(drafted) else None
        else:
            req.record = None

    def _forget_others(self, keys: set[Any]) -> None:
        """Requests not in this batch have finished (or were preempted: they are rebuilt when
        they return)."""
        for key in [k for k in self.requests if k not in keys]:
            self._archive(self.requests.pop(key))

    def _archive(self, req: _Request) -> None:
        """An ended request's answer (what it generated, as far as the proposer saw it) joins its
        namespace's history of answers."""
        if self.answers_bit and req.opts.answers is not None and req.ids.shape[0] > req.start:
            self.histories.add(req.opts.answers, req.ids[req.start :])

    # -- reporting --------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The running totals and the learned cost curve (JSON-ready)."""
        curve, prior = self.cost.curve(), self.cost.prior
        b, a, g = self.cost.params
        return {
            **self.totals.as_dict(),
            "method": self.settings.method,
            "k": self.k,
            "pid": os.getpid(),
            "stores": [s.name for s in self.stores],
            "answers": self.histories.totals(),
            "cost_curve": {"sizes": list(curve.sizes), "ms": [round(x, 3) for x in curve.ms]},
            "cost_correction": {"scale": round(b, 4), "fixed_ms": round(a, 3), "ms_per_token": round(g, 4)},
            "prior_curve": {"sizes": list(prior.sizes), "ms": list(prior.ms)},
        }

    def _flush(self, now: float) -> None:
        """Write the running totals, at most every FLUSH_S seconds: opening and writing the file
        costs about a millisecond on this machine's disk (a step of one request, 30; of 32
        requests, 155), and at a full batch a step that drafts nothing costs the proposer well
        under one. Called at the start of a step, so what is written is complete up to the step
        before: a reader that wants a generation's totals runs one more short request after it,
        FLUSH_S later."""
        if now - self._flushed < FLUSH_S:
            return
        self._flushed = now
        if self.settings.stats:
            with open(self.settings.stats, "w", encoding="utf-8") as f:
                f.write(json.dumps(self.snapshot()))


def _caller_rows(rows: int) -> tuple[list[str] | None, list[Any] | None]:
    """Each row's request id and its SamplingParams.extra_args (the request's vllm_xargs), read
    from the model runner that called propose() (vLLM 0.32's GPUModelRunner.propose_draft_token_ids,
    whose `self` holds `input_batch.req_ids` and `requests`). Not an API: (None, None) unless the
    ids are there with one per row; extras None where the runner keeps no request states."""
    try:
        runner = sys._getframe(2).f_locals.get("self")
        ids = list(runner.input_batch.req_ids)
    except Exception:  # noqa: BLE001 - any vLLM that does not look like 0.32
        return None, None
    if len(ids) != rows or not all(isinstance(r, str) for r in ids):
        return None, None
    states = getattr(runner, "requests", None)
    if not isinstance(states, dict):
        return ids, None
    extras = []
    for rid in ids:
        params = getattr(states.get(rid), "sampling_params", None)
        extras.append(getattr(params, "extra_args", None))
    return ids, extras


def _size_class(b: int) -> int:
    """Batch sizes judged together: 1, 2, 3-4, 5-8, 9-16, ..."""
    return int(np.ceil(np.log2(max(b, 1))))


def _device_type(vllm_config: Any) -> str:
    dc = getattr(vllm_config, "device_config", None)
    dev = getattr(dc, "device_type", None) or str(getattr(dc, "device", "") or "")
    return device_type(str(dev) or "cpu")
