"""REST inside vLLM: `RestProposer`, the class vLLM's speculative `custom_class` hook loads in
its worker process (`speculative_config={"method": "custom_class", "model":
"rest_core.serve.proposer.RestProposer", "num_speculative_tokens": K}`; the settings ride in
`additional_config["rest"]`, see `rest_core.serve.settings`). It composes the parts below; what
it reads from vLLM goes through `rest_core.serve.vllm_adapter`, the one module that knows vLLM.

What vLLM 0.32 calls, after each engine step's sampling:

    propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None)

one entry per batch row: the tokens this step emitted for the row (empty: a partial prefill),
the row's context length and its tokens (row i's context is token_ids_cpu[i, :n_i]: prompt and
every token emitted so far). It wants one list of at most K draft ids per row; vLLM verifies
each as a chain in the next step (it has no tree verification) and emits exactly what the
model would have emitted without it.

Per step:
- each row's request is found in the request table (`request_table`), keyed by vLLM's request id
  (from the model runner, `attach_runner`) or by row, and checked against the row's tokens;
- the retrieval policy (`retrieval_policy`) says whether looking for drafts can pay at all;
- the request's sources (`served_sources`: the datastores, its own context, earlier answers)
  make the engine's merged trie, whose likeliest chain the acceptance model picks
  (`rest_core.budget.chain.chain_draft`);
- the batch planner (`batch_planner`) cuts each chain so that the next verify step yields the
  most tokens per millisecond (`rest_core.budget.chain.batch_lengths`);
- the time between two calls is one engine step, which corrects the cost curve (`step_cost`);
  how many drafts each request accepted (its context grew by accepted + 1) recalibrates the
  acceptance model (`acceptance_learner`) and resolves the chain's record in the draft log
  (`log_writer`), flushed at the end of every call: before vLLM sends the tokens a line
  explains, so a client streaming the request can highlight them (`rest_core.serve.records`);
- the running totals (`totals`) are written to the totals file at most every FLUSH_S.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from rest_core.budget.chain import BatchPlan, ChainDraft, chain_drafts, likeliest_path
from rest_core.devices import device_type
from rest_core.drafting.source import Retrieved
from rest_core.serve.acceptance_learner import AcceptanceLearner
from rest_core.serve.batch_planner import BatchPlanner
from rest_core.serve.log_writer import DraftLogWriter
from rest_core.serve.request_table import RequestState, RequestTable
from rest_core.serve.retrieval_policy import RetrievalPolicy
from rest_core.serve.served_sources import ServedSources
from rest_core.serve.settings import CONFIG_KEY, ServeSettings
from rest_core.serve.step_cost import ProposeCall, StepCost
from rest_core.serve.totals import ProposerTotals, TotalsFile
from rest_core.serve.vllm_adapter import RunnerView, VllmSetup, hook_runner


class RestProposer:
    """REST drafts for vLLM: chains from the datastores (and the request's own context) with
    batch-aware lengths. Constructed by vLLM as `RestProposer(vllm_config)`."""

    def __init__(self, vllm_config: Any, *, tokenizer: Any = None) -> None:
        from rest_core.drafting.draft import warm_up

        setup = VllmSetup.read(vllm_config, CONFIG_KEY)
        self.k, self.max_model_len = setup.k, setup.max_model_len
        self.settings = s = ServeSettings.parse(setup.rest)
        if s.retrieval.m < self.k:
            # Continuations shorter than K cap every chain below what vLLM was told to verify.
            print(
                f"REST proposer: m={s.retrieval.m} < num_speculative_tokens={self.k}: chains stop at m", file=sys.stderr
            )
        self.device_type = device_type(setup.device)
        self.sources = ServedSources(s, lambda: tokenizer if tokenizer is not None else setup.load_tokenizer())
        self.table, self.stores, self.histories = self.sources.table, self.sources.stores, self.sources.histories
        self.requests = RequestTable(self.sources.new_context, self.sources.archive, self.sources.options)
        self.step_cost = StepCost(s.prior_curve(self.device_type))
        self.cost = self.step_cost.cost  # what a verify step of T tokens costs (ms), as learned so far
        self.policy = RetrievalPolicy(self.k, self.cost)
        self.planner = BatchPlanner(self.k, self.cost)
        self.acceptance = AcceptanceLearner()
        self.log = DraftLogWriter(self.table, s.records, s.log)
        self.records = self.log.records
        self.totals = ProposerTotals(self.table)
        self.totals_file = TotalsFile(s.stats)
        self.runner: RunnerView | None = None  # vLLM's model runner, once it introduces itself
        self._last: ProposeCall | None = None
        self.clock = time.perf_counter  # what step times are read from (a test's fake clock)
        hook_runner()  # inside vLLM: the runner hands itself over before each propose() call
        warm_up()  # compile (or load) the retrieval and trie kernels before the first step
        likeliest_path(np.array([-1, 0], np.int64), np.array([0.5, 0.4]))  # and the chain's

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """vLLM's runners call this with the target model whenever a drafter exists; REST
        drafts without a model."""

    def attach_runner(self, runner: Any) -> None:
        """vLLM's model runner (through `vllm_adapter.hook_runner`, or a test's fake): where each
        row's request id and vllm_xargs are read. Checked the first time it is seen."""
        if self.runner is None or self.runner.runner is not runner:
            self.runner = RunnerView(runner)

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
        self.totals_file.write(start, self.snapshot)
        rows = len(sampled_token_ids)
        ids, extras = self.runner.rows(rows) if self.runner is not None else (None, None)
        keys: list[Any] = ids if ids is not None else [("row", i) for i in range(rows)]
        if rows:
            self.totals.req_ids = "runner" if ids is not None else "rows"
        previous, step = self._last, ProposeCall(0.0)
        lengths = [int(num_tokens_no_spec[i]) for i in range(rows)]
        # Rows that may draft: not a partial prefill (it emitted nothing), not at the length limit.
        drafting = [i for i in range(rows) if len(sampled_token_ids[i]) and lengths[i] < self.max_model_len - 1]
        step.clean = len(drafting) == rows
        retrieve, at_least = self.policy.decide(len(drafting), rows)
        step.explored = at_least > 0
        self.totals.steps_explored += step.explored
        at_least = self.planner.at_least(retrieve, at_least, len(drafting))
        found: list[list[Retrieved]] = []
        models = []
        rooms: list[int] = []
        for i in drafting:
            ctx = np.asarray(token_ids_cpu[i, : lengths[i]])
            req, known = self._request(keys[i], ctx, extras[i] if extras else None)
            step.clean &= known and previous is not None and keys[i] in previous.drafted
            room = min(self.k, self.max_model_len - lengths[i] - 1) if (retrieve and not req.opts.off) else 0
            found.append(self._retrieve(req, ctx) if room > 0 else [])
            models.append(req.model)
            rooms.append(room)
        self.acceptance.learn()
        if previous is not None and step.clean and previous.clean:
            self._learn_cost(previous, start, [keys[i] for i in drafting])
        if retrieve:
            chains = chain_drafts(found, models, rooms)
            best, plan, halved = self.planner.plan(chains, self.policy.full_ms * rows, at_least)
            self.totals.steps_explored += halved
            out = self._cut(rows, drafting, chains, plan, keys, lengths, step)
        else:
            out = self._skip(rows, drafting, keys, step)
        self.requests.keep_only(set(keys))
        end = self.clock()
        self.policy.timed(retrieve, 1000.0 * (end - start), rows)
        if retrieve and drafting:
            self.policy.judge(best, len(drafting), rows)
        step.end = end
        if previous is not None:
            self.log.step(previous, step, rows, [keys[i] for i in drafting], start, end, retrieve)
        self._last = step
        self.totals.calls += 1
        self.totals.propose_ms += 1000.0 * (end - start)
        self.log.flush()  # this step's resolved records, before vLLM sends the tokens they explain
        return out

    def _cut(
        self,
        rows: int,
        drafting: list[int],
        chains: list[ChainDraft],
        plan: BatchPlan,
        keys: list[Any],
        lengths: list[int],
        step: ProposeCall,
    ) -> list[list[int]]:
        """Each row's draft: its chain cut to the planned length (nothing for rows not drafting),
        remembered for learning from what the next call sees."""
        out: list[list[int]] = [[] for _ in range(rows)]
        for i, chain, length in zip(drafting, chains, plan.lengths, strict=True):
            drafted = chain.cut(length)
            out[i] = drafted.tokens.tolist()
            req = self.requests[keys[i]]
            req.steps += 1
            req.pending = drafted if len(drafted) else None
            self.totals.add(chain, drafted)
            req.record = self.log.drafted(keys[i], req.steps, lengths[i], drafted, chain)
            step.drafted[keys[i]] = len(drafted)
        return out

    def _skip(self, rows: int, drafting: list[int], keys: list[Any], step: ProposeCall) -> list[list[int]]:
        """No row drafts (retrieval skipped): what `_cut` would do for empty chains, without
        building them. At a full batch on a CPU most steps skip, so this is what a step costs
        the engine."""
        self.totals.steps_skipped += 1
        self.planner.skipped()
        for i in drafting:
            req = self.requests[keys[i]]
            req.steps += 1
            req.pending = req.record = None
            step.drafted[keys[i]] = 0
        self.totals.add_empty(len(drafting))
        return [[] for _ in range(rows)]

    # -- per request ------------------------------------------------------------------------

    def _request(self, key: Any, ctx: np.ndarray, extra: Any = None) -> tuple[RequestState, bool]:
        """The request's state, its context now `ctx` (see `RequestTable.find`); collects the
        outcome of the chain drafted for it last step. Returns (state, was it known)."""
        found = self.requests.find(key, ctx, extra)
        self.totals.rebuilt += found.rebuilt
        if found.new is not None:
            self._outcome(found.req, found.new)
        return found.req, found.new is not None

    def _retrieve(self, req: RequestState, ctx: np.ndarray) -> list[Retrieved]:
        """What this request's sources find for its context (and the acceptance model that will
        score it, kept on the request to learn from the outcome)."""
        retrieved = self.sources.retrieve(req, ctx)
        req.model = self.acceptance.model_for(retrieved)
        return retrieved

    def _outcome(self, req: RequestState, new: np.ndarray) -> None:
        """The row's context grew by `new` since the last step: accepted drafts + one token of
        the model's own. Queues what the acceptance model learns and resolves the step's record."""
        chain, req.pending = req.pending, None
        if chain is None or len(chain) == 0 or new.shape[0] == 0:
            return
        accepted = int(new.shape[0]) - 1
        if accepted > len(chain) or not np.array_equal(new[:accepted], chain.tokens[:accepted]):
            return  # not what was drafted (the scheduler cut the draft, or the row was reused): nothing to learn
        self.acceptance.outcome(req.model, chain, accepted)
        self.totals.resolve(chain, accepted)
        if req.record is not None:
            self.log.resolved(req.record, accepted)

    def _learn_cost(self, previous: ProposeCall, start: float, keys: list[Any]) -> None:
        learned, overstated = self.step_cost.learn(previous, start, keys)
        if overstated:
            self.policy.cost_overstated()  # the cost was overstated: try again at the usual pace
        self.totals.steps_timed += learned

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
            "xargs": self.sources.xargs_totals(),
            "cost_curve": {"sizes": list(curve.sizes), "ms": [round(x, 3) for x in curve.ms]},
            "cost_correction": {"scale": round(b, 4), "fixed_ms": round(a, 3), "ms_per_token": round(g, 4)},
            "prior_curve": {"sizes": list(prior.sizes), "ms": list(prior.ms)},
        }
