"""The REST proposer for vLLM (rest_core.serve.proposer), driven without vLLM: a fake VllmConfig
and batch arrays shaped like vLLM 0.32's (token_ids_cpu (256, 2048) int32, num_tokens_no_spec
(256,) int32, one sampled list per row), and a stand-in engine that verifies each row's draft
against a known answer as vLLM's chain verification would (accept the longest agreeing prefix,
then one token of the model's own)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.config import ConfigError
from rest_core.serve import proposer as proposer_module
from rest_core.serve import served_sources
from rest_core.serve.proposer import RestProposer
from rest_core.serve.settings import ServedStore, ServeSettings, rest_config, speculative_config
from rest_core.store.build import build_datastore
from rest_core.store.format import DatastoreError

MAX_REQS, MAX_LEN = 256, 2048
ANSWER = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
)
CORPUS = [ANSWER, "def div(a, b):\n    return a / b\n", "print('hello world')\n" * 3]
FLAT = CostCurve((1, 8192), (10.0, 10.0))


@pytest.fixture(scope="module")
def tok():
    from tests.tiny_models import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tok) -> Path:
    """A folder holding the model's tokenizer, as vLLM's model_config.model names one."""
    folder = tmp_path_factory.mktemp("model")
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, tok) -> Path:
    out = tmp_path_factory.mktemp("stores") / "code"
    build_datastore(CORPUS, tok, out, verbose=False)
    return out


def fake_config(model_dir: Path, rest: dict, k: int = 8) -> SimpleNamespace:
    return SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=k, method="custom_class"),
        model_config=SimpleNamespace(model=str(model_dir), tokenizer=str(model_dir), max_model_len=MAX_LEN),
        device_config=SimpleNamespace(device_type="cpu"),
        additional_config={"rest": rest},
    )


def make(model_dir, store_dir, method="hybrid", k=8, curve=FLAT, **more) -> RestProposer:
    rest = rest_config(method, [ServedStore(str(store_dir), "code")], cost_curve=curve, **more)
    return RestProposer(fake_config(model_dir, rest, k))


class Engine:
    """vLLM's side of the hook: a persistent batch of requests, each with a known answer; after
    every step it calls propose() and then verifies the returned drafts as chains."""

    def __init__(self, proposer: RestProposer, tok, prompts: list[str], answers: list[str], cost=None) -> None:
        self.p, self.cost = proposer, cost
        self.prompts = [tok(x, add_special_tokens=False).input_ids for x in prompts]
        self.answers = [tok(x, add_special_tokens=False).input_ids for x in answers]
        self.done = [0] * len(prompts)  # answer tokens emitted so far
        self.drafts: list[list[int]] = [[] for _ in prompts]
        self.order = list(range(len(prompts)))  # request in each row
        self.accepted = self.drafted = self.steps = 0
        self.now = 0.0
        proposer.clock = lambda: self.now

    def step(self, prefill_rows: tuple[int, ...] = ()) -> list[list[int]]:
        """One engine step: verify each row's draft, emit, then ask for the next drafts."""
        tokens = 0
        sampled = []
        for row, r in enumerate(self.order):
            if row in prefill_rows:
                sampled.append([])
                continue
            answer, d = self.answers[r], self.drafts[r]
            n = 0
            while n < len(d) and self.done[r] + n < len(answer) and d[n] == answer[self.done[r] + n]:
                n += 1
            self.accepted += n
            self.drafted += len(d)
            tokens += 1 + len(d)
            new = answer[self.done[r] : self.done[r] + n + 1]
            self.done[r] += len(new)
            if self.done[r] > len(answer) - 2 * self.p.k:  # finished: a new request takes the row
                self.done[r], new = 1, answer[:1]
            sampled.append(new)
        if self.cost is not None:
            self.now += float(self.cost(tokens)) / 1000.0
        ids = np.zeros((MAX_REQS, MAX_LEN), np.int32)
        lens = np.zeros(MAX_REQS, np.int32)
        for row, r in enumerate(self.order):
            ctx = self.prompts[r] + self.answers[r][: self.done[r]]
            ids[row, : len(ctx)] = ctx
            lens[row] = len(ctx)
        out = self.p.propose(sampled, lens, ids, slot_mappings={})
        assert len(out) == len(self.order)
        for row, r in enumerate(self.order):
            assert isinstance(out[row], list) and all(isinstance(t, int) for t in out[row])
            assert len(out[row]) <= self.p.k
            self.drafts[r] = out[row]
        self.steps += 1
        return out

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()


def test_drafts_from_the_store_and_the_context_are_accepted(model_dir, store_dir, tok):
    p = make(model_dir, store_dir, "hybrid")
    engine = Engine(p, tok, ["def add(a, b):\n"], [ANSWER[15:] + ANSWER * 2])  # never runs out in 12 steps
    engine.run(12)
    assert engine.drafted > 0 and engine.accepted / engine.drafted > 0.5  # the answer is in the store
    snap = p.snapshot()
    assert snap["accepted_tokens"] == engine.accepted  # the proposer's own count from the contexts' growth
    assert snap["drafted_by_source"]["code"] > 0
    assert snap["resolved_drafts"] > 0 and snap["req_ids"] == "rows"  # no runner above: rows are keys
    assert all(len(r["drafted"]) <= p.k for r in p.records)


def test_rest_drafts_from_the_store_only(model_dir, store_dir, tok):
    p = make(model_dir, store_dir, "rest")
    engine = Engine(p, tok, ["zzz"], ["print('hello world')\nprint('hello world')\n"])
    engine.run(6)
    assert all(req.context is None for req in p.requests.values())
    assert p.snapshot()["drafted_by_source"]["context"] == 0


def test_a_partial_prefill_row_gets_no_draft_and_nothing_exceeds_k(model_dir, store_dir, tok):
    p = make(model_dir, store_dir, "hybrid", k=3)
    engine = Engine(p, tok, ["def add(a, b):\n", "def sub"], [ANSWER[15:], ANSWER[40:]])
    out = engine.step(prefill_rows=(1,))
    assert out[1] == []
    engine.run(5)
    assert max(len(d) for d in engine.drafts) <= 3


def test_no_draft_past_the_model_length(model_dir, store_dir):
    p = make(model_dir, store_dir, "hybrid", k=8)
    ids = np.zeros((MAX_REQS, MAX_LEN), np.int32)
    ctx = (list(b"ab") * MAX_LEN)[: MAX_LEN - 3]  # a repeating context: the context source drafts
    ids[0, : len(ctx)] = ctx
    lens = np.zeros(MAX_REQS, np.int32)
    lens[0] = len(ctx)
    out = p.propose([[ctx[-1]]], lens, ids)
    assert len(out[0]) <= MAX_LEN - len(ctx) - 1 == 2


def test_reordered_rows_are_rebuilt_from_their_tokens_not_confused(model_dir, store_dir, tok):
    p = make(model_dir, store_dir, "hybrid")
    prompts, answers = ["def add(a, b):\n", "print("], [ANSWER[15:], "'hello world')\n" * 4]
    engine = Engine(p, tok, prompts, answers)
    engine.run(3)
    engine.order.reverse()  # vLLM condensed the batch: the requests swapped rows
    engine.run(6)
    assert p.totals.rebuilt >= 2  # each row now held another request's context, checked and rebuilt
    for row, r in enumerate(engine.order):  # every cached context is the one its row holds
        req = p.requests[("row", row)]
        assert req.ids.tolist() == engine.prompts[r] + engine.answers[r][: engine.done[r]]
        assert len(req.context) == len(req.ids)


class Runner:
    """Stands for vLLM's GPUModelRunner, which hands itself to its drafter (as
    `vllm_adapter.hook_runner` makes it do) and holds input_batch.req_ids."""

    def __init__(self, proposer, engine) -> None:
        self.proposer, self.engine = proposer, engine
        self.input_batch = SimpleNamespace(req_ids=[])
        self.requests: dict = {}
        proposer.attach_runner(self)
        # A step takes 40 ms on the proposer's clock whatever this machine's load: its learned
        # step cost, and so whether drafting pays, must not depend on how busy the test runner is.
        self.now = 0.0
        proposer.clock = lambda: self.now

    def propose_draft_token_ids(self, *args, **kwargs):
        self.input_batch.req_ids = [f"req-{r}" for r in self.engine.order]
        return self.proposer.propose(*args, **kwargs)


def test_request_ids_from_the_runner_follow_reordered_rows(model_dir, store_dir, tok):
    p = make(model_dir, store_dir, "hybrid")
    engine = Engine(p, tok, ["def add(a, b):\n", "print("], [ANSWER[15:], "'hello world')\n" * 4])
    runner = Runner(p, engine)
    engine.p = SimpleNamespace(propose=runner.propose_draft_token_ids, k=p.k)
    engine.run(3)
    engine.order.reverse()
    engine.run(4)
    assert p.totals.req_ids == "runner" and p.totals.rebuilt == 0
    assert sorted(p.requests) == ["req-0", "req-1"]


def test_the_step_cost_is_learned_and_a_full_batch_on_a_steep_device_drafts_nothing(model_dir, store_dir, tok):
    steep = CostCurve((1, 8192), (10.0, 10.0 + 8191 * 200.0))  # every verified token costs 20 plain steps
    p = make(model_dir, store_dir, "hybrid", curve=FLAT)  # the prior believes tokens are free
    prompts = ["def add(a, b):\n"] * 8
    engine = Engine(p, tok, prompts, [ANSWER[15:] * 15] * 8, cost=steep)
    engine.run(3)
    assert engine.drafted > 0  # on the prior's word
    engine.run(400)
    assert p.totals.steps_timed > 100 and p.totals.steps_explored > 0
    assert float(p.cost(64)) > 5 * float(FLAT(64))
    recent = engine.drafted
    engine.run(16)
    assert engine.drafted - recent <= 8  # at most one exploring step's drafts


def test_steps_that_skip_retrieval_leave_the_contexts_behind_and_retrieval_catches_them_up(model_dir, store_dir, tok):
    """At a full batch on a CPU most steps skip retrieval; such a step only checks each row's
    tokens (no indexing, no chains), so the request's context index lags its tokens until the
    next step that retrieves, which indexes what it missed: the same index as built from scratch."""
    from rest_core.drafting.context_source import ContextSource

    steep = CostCurve((1, 8192), (10.0, 10.0 + 8191 * 200.0))
    p = make(model_dir, store_dir, "hybrid", curve=steep)
    engine = Engine(p, tok, ["def add(a, b):\n"] * 4, [ANSWER[15:] * 6] * 4, cost=steep)
    engine.run(12)
    assert p.totals.steps_skipped >= 10 and engine.drafted == 0
    assert p.totals.rows == 4 * 12 and p.totals.length_hist == {0: 48}  # as if every row drafted nothing
    lagging = [req for req in p.requests.values() if len(req.context) < len(req.ids)]
    assert lagging  # skipped steps did not index their new tokens
    for req in p.requests.values():
        p._retrieve(req, req.ids)
        fresh = ContextSource(p.settings.retrieval, p.settings.context_weight)
        fresh.reset(req.ids)
        assert len(req.context) == len(req.ids)
        assert req.context._ends == fresh._ends and req.context._ids == fresh._ids


def test_a_prior_that_overstates_the_cost_is_corrected_by_exploring(model_dir, store_dir, tok):
    steep = CostCurve((1, 8192), (10.0, 10.0 + 8191 * 20.0))
    p = make(model_dir, store_dir, "hybrid", curve=steep)  # the device is in fact flat
    engine = Engine(p, tok, ["def add(a, b):\n"] * 4, [ANSWER[15:] * 6] * 4, cost=FLAT)
    engine.run(3)
    assert engine.drafted == 0 and p.totals.steps_skipped > 0  # nothing could pay: nothing retrieved
    engine.run(150)
    recent = engine.drafted
    engine.run(10)
    assert engine.drafted - recent > 10  # drafting every step again


def test_stores_are_opened_once_per_process_and_checked_against_the_tokenizer(model_dir, store_dir, tmp_path, tok):
    a = make(model_dir, store_dir, "rest")
    b = make(model_dir, store_dir, "hybrid")
    assert a.stores[0].datastore is b.stores[0].datastore
    other = tmp_path / "other-model"
    changed = type(tok).from_pretrained(model_dir)
    changed.add_tokens(["<extra>"])
    changed.save_pretrained(other)
    with pytest.raises(DatastoreError, match="rebuild the datastore"):
        RestProposer(fake_config(other, rest_config("rest", [ServedStore(str(store_dir), "code")])))


def test_records_are_bounded_and_resolved_into_the_log(model_dir, store_dir, tok, tmp_path):
    log, stats = tmp_path / "drafts.jsonl", tmp_path / "stats.json"
    p = make(model_dir, store_dir, "hybrid", log=str(log), stats=str(stats))
    p2 = RestProposer(
        fake_config(
            model_dir, {**rest_config("hybrid", [ServedStore(str(store_dir), "code")], cost_curve=FLAT), "records": 3}
        )
    )
    for proposer in (p, p2):
        Engine(proposer, tok, ["def add(a, b):\n"], [ANSWER[15:]]).run(15)
    assert len(p2.records) == 3
    import json

    p.clock = lambda: 1e9  # FLUSH_S later: the next step writes the log and the totals of the 15 before it
    p.propose([], np.zeros(MAX_REQS, np.int32), np.zeros((MAX_REQS, MAX_LEN), np.int32))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert any(x["kind"] == "step" for x in lines)
    lines = [x for x in lines if x["kind"] == "draft"]
    assert lines and all(x["accepted"] is not None and x["accepted"] <= len(x["drafted"]) for x in lines)
    assert json.loads(stats.read_text())["calls"] == 15


def test_settings_are_checked_once_with_clear_messages(store_dir):
    with pytest.raises(ConfigError, match="method must be one of"):
        ServeSettings.parse({"method": "magic"})
    with pytest.raises(ConfigError, match="give at least one"):
        ServeSettings.parse({"method": "rest"})
    with pytest.raises(ConfigError, match="unknown REST proposer setting"):
        ServeSettings.parse({"method": "context", "c": 3})
    with pytest.raises(ConfigError, match="n_max"):
        ServeSettings.parse({"method": "context", "n_min": 4, "n_max": 2})
    assert ServeSettings.parse({"method": "context", "cost_curve": {"sizes": [1, 8], "ms": [5, 9]}}).prior_curve(
        "cpu"
    ).ms == (5.0, 9.0)
    assert ServeSettings.parse({"method": "context"}).prior_curve("cuda") is proposer_module.ServeSettings.parse(
        {"method": "context", "cost_curve": "gpu"}
    ).prior_curve("cpu")
    assert speculative_config(4) == {
        "method": "custom_class",
        "model": "rest_core.serve.proposer.RestProposer",
        "num_speculative_tokens": 4,
    }


class OneRequest:
    """vLLM's runner serving one request at a time to its end: it holds the request's id and
    SamplingParams.extra_args where the proposer reads them (`vllm_adapter.RunnerView`)."""

    def __init__(self, proposer: RestProposer) -> None:
        self.p = proposer
        self.input_batch = SimpleNamespace(req_ids=[])
        self.requests: dict = {}
        proposer.attach_runner(self)
        # A step takes 40 ms on the proposer's clock whatever this machine's load: its learned
        # step cost, and so whether drafting pays, must not depend on how busy the test runner is.
        self.now = 0.0
        proposer.clock = lambda: self.now

    def propose_draft_token_ids(self, sampled, lens, ids):
        return self.p.propose(sampled, lens, ids)

    def serve(self, rid: str, prompt: list[int], answer: list[int], extra: dict | None = None) -> list[dict]:
        """Greedy chain verification against `answer`; the proposer's records of this request."""
        self.input_batch.req_ids = [rid]
        self.requests = {rid: SimpleNamespace(sampling_params=SimpleNamespace(extra_args=extra))}
        ids, lens = np.zeros((MAX_REQS, MAX_LEN), np.int32), np.zeros(MAX_REQS, np.int32)
        done, new = 1, answer[:1]
        while done < len(answer):
            ctx = prompt + answer[:done]
            ids[0, : len(ctx)], lens[0] = ctx, len(ctx)
            self.now += 0.04
            draft = self.propose_draft_token_ids([new], lens, ids)[0]
            n = 0
            while n < len(draft) and done + n < len(answer) and draft[n] == answer[done + n]:
                n += 1
            new = answer[done : done + n + 1]
            done += len(new)
        self.input_batch.req_ids, self.requests = [], {}
        self.propose_draft_token_ids([], lens, ids)  # the request has ended: not in the batch any more
        return [r for r in self.p.records if r["req"] == rid]


PHRASE = " The quick brown fox jumps over the lazy dog while the zebra counts"


def answers_drafted(records: list[dict], table) -> int:
    bit = table.bit("answers")
    return sum(1 for r in records for m in r["sources"] if m & bit)


def test_hybrid_drafts_from_an_earlier_answer_of_its_namespace_only(model_dir, store_dir, tok):
    enc = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
    first, second = enc("Tell me a story."), enc("Another one, please.")
    answer = enc("Once upon a time." + PHRASE + ". The end.")
    again = enc("Sure." + PHRASE + " again.")

    def run(first_extra, second_extra, method="hybrid", **more):
        p = make(model_dir, store_dir, method, **more)
        runner = OneRequest(p)
        runner.serve("a", first, answer, first_extra)
        return p, runner.serve("b", second, again, second_extra)

    p, records = run({"rest_answers": "class-1"}, {"rest_answers": "class-1"})
    assert answers_drafted(records, p.table) >= 8  # the phrase, from the first answer
    assert p.snapshot()["answers"]["namespaces"] == 1 and p.snapshot()["accepted_by_source"]["answers"] >= 8
    for other in ({"rest_answers": "class-2"}, {"rest_answers": "off"}):
        p, records = run({"rest_answers": "class-1"}, other)
        assert answers_drafted(records, p.table) == 0  # another namespace, or none: never the first answer
    p, records = run(None, None)  # no xargs: the server's shared namespace
    assert answers_drafted(records, p.table) >= 8
    p, records = run({"rest_answers": 0}, None)  # the first request kept its answer out
    assert answers_drafted(records, p.table) == 0 and p.snapshot()["answers"]["answers"] == 1  # b's own, once ended
    for method, more in (("rest", {}), ("hybrid", {"answers_tokens": 0})):  # the paper's method; or turned off
        p, records = run(None, None, method, **more)
        assert "answers" not in [s.name for s in p.table] and len(p.histories) == 0


def test_answer_namespaces_are_bounded(model_dir, store_dir, tok, monkeypatch):
    monkeypatch.setattr(served_sources, "MAX_ANSWER_NAMESPACES", 3)
    p = make(model_dir, store_dir, "hybrid", answers_tokens=64)
    runner = OneRequest(p)
    answer = tok("a b c d e f g h i j k l m n o p q r s t u v w x y z " * 4, add_special_tokens=False).input_ids
    for i in range(5):
        runner.serve(f"r{i}", [5, 6, 7], answer, {"rest_answers": f"user-{i}"})
    assert p.histories.names() == ["user-2", "user-3", "user-4"]  # the least recently used went
    assert all(len(p.histories.get(n)) <= 64 for n in p.histories.names())


def test_request_options_read_the_answer_namespace():
    from rest_core.serve.settings import RequestOptions, request_xargs

    assert RequestOptions.parse(None).answers == "" and RequestOptions.parse({}).answers == ""
    assert RequestOptions.parse({"rest_answers": "team"}).answers == "team"
    long = RequestOptions.parse({"rest_answers": "x" * 500}).answers
    assert len(long) == 128 and long.startswith("x" * 63 + "#")  # its head and a digest of the whole
    for off in (0, False, "0", "off", "false"):
        assert RequestOptions.parse({"rest_answers": off}).answers is None
    assert RequestOptions.parse({"rest_answers": ["?"]}).answers is None  # not understood: no namespace
    for ns in ("", "team", None):
        assert RequestOptions.parse(request_xargs(answers=ns)).answers == ns
    with pytest.raises(ConfigError, match="answers_tokens"):
        ServeSettings.parse({"method": "context", "answers_tokens": 1})
    with pytest.raises(ConfigError, match="answers_tokens"):
        ServeSettings.parse({"method": "context", "answers_tokens": "many"})
    assert not ServeSettings.parse({"method": "hybrid", "datastores": ["x"], "answers_tokens": 0}).use_answers


def test_tries_that_keep_confirming_drafts_do_not_pay_come_ever_more_rarely(model_dir, store_dir, tok):
    # A full batch where any draft costs far more than it brings, and the prior knows it: every
    # try (forced drafts, to time a bigger step) costs time, so after CHECKS_BEFORE_BACKOFF tries
    # that confirm it the wait between them doubles, up to MAX_CHECK_EVERY steps.
    steep = CostCurve((1, 8192), (10.0, 10.0 + 8191 * 200.0))
    p = make(model_dir, store_dir, "hybrid", curve=steep)
    engine = Engine(p, tok, ["def add(a, b):\n"] * 8, [ANSWER[15:] * 40] * 8, cost=steep)
    engine.run(600)
    # waits of 16 x CHECKS_BEFORE_BACKOFF, 32, 64, 128, 256: 8 tries in 600 steps (one more when a
    # try's step happened to come in cheaper than predicted), against 37 at one every 16 steps
    assert 6 <= p.totals.steps_explored <= 10
