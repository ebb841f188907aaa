"""What a client of the vLLM server learns from the REST proposer's draft log
(rest_core.serve.records), and the per-request options it sends (vllm_xargs: RequestOptions).

The proposer is driven without vLLM, by the stand-in engine of test_serve_proposer (vLLM's chain
verification against known answers) behind a stand-in of vLLM's model runner, whose `requests`
hold each request's SamplingParams.extra_args as vLLM 0.32's does."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rest_core.serve.records import DraftLog, DraftRecord, answer_steps, parse_record, request_prefix
from rest_core.serve.settings import RequestOptions, request_xargs
from rest_core.sources import SOURCE_CONTEXT
from tests.serve.test_serve_proposer import ANSWER, Engine, make, model_dir, store_dir, tok  # noqa: F401

PROMPT = "def add(a, b):\n"


class Runner:
    """vLLM's GPUModelRunner, handed to the drafter: `input_batch.req_ids` and
    `requests[id].sampling_params.extra_args`."""

    def __init__(self, proposer, engine, extras: list[dict | None]) -> None:
        self.proposer, self.engine = proposer, engine
        self.input_batch = SimpleNamespace(req_ids=[])
        self.requests = {
            f"cmpl-{r}-0-abcd1234": SimpleNamespace(sampling_params=SimpleNamespace(extra_args=x))
            for r, x in enumerate(extras)
        }
        proposer.attach_runner(self)

    def propose_draft_token_ids(self, *args, **kwargs):
        self.input_batch.req_ids = [f"cmpl-{r}-0-abcd1234" for r in self.engine.order]
        return self.proposer.propose(*args, **kwargs)


def served(p, tokenizer, answers: list[str], extras: list[dict | None]) -> Engine:
    engine = Engine(p, tokenizer, [PROMPT] * len(answers), answers)
    runner = Runner(p, engine, extras)
    engine.p = SimpleNamespace(propose=runner.propose_draft_token_ids, k=p.k)
    return engine


def test_the_log_explains_every_accepted_draft_as_soon_as_the_step_ends(model_dir, store_dir, tok, tmp_path):  # noqa: F811
    log = tmp_path / "drafts.jsonl"
    p = make(model_dir, store_dir, "hybrid", log=str(log))
    engine = served(p, tok, [ANSWER[15:] * 3], [None])
    reader = DraftLog(log)
    prefix = request_prefix("cmpl-0")
    reader.watch(prefix)
    prompt_len = len(engine.prompts[0])
    for n in range(1, 13):
        engine.step()  # no FLUSH_S wait: each call writes what it resolved before it returns
        reader.poll()
        output = engine.answers[0][: engine.done[0]]
        steps = answer_steps(reader.records(prefix), prompt_len, output)
        assert len(steps) == n == engine.steps  # one Step per engine step
        assert sum(s.accepted for s in steps) == engine.accepted
        assert [s.end for s in steps][-1] == len(output)
    assert engine.accepted > 10  # the test saw real drafts
    drafted = [s for s in steps if s.accepted]
    assert all(len(s.bits) == s.accepted and all(b for b in s.bits) for s in drafted)


def test_a_request_can_turn_drafting_off_or_choose_its_sources(model_dir, store_dir, tok, tmp_path):  # noqa: F811
    log = tmp_path / "drafts.jsonl"
    p = make(model_dir, store_dir, "hybrid", log=str(log))
    extras = [None, request_xargs(off=True), request_xargs(["code"], context=False), request_xargs([])]
    engine = served(p, tok, [ANSWER[15:] * 3] * 4, extras)
    per_req: dict[int, list[list[int]]] = {r: [] for r in range(4)}
    for _ in range(12):
        out = engine.step()
        for row, r in enumerate(engine.order):
            per_req[r].append(out[row])
    assert sum(map(len, per_req[0])) > 0  # as the server is set up: drafts
    assert sum(map(len, per_req[1])) == 0  # rest_off: plain decoding on the same engine
    assert sum(map(len, per_req[2])) > 0 and sum(map(len, per_req[3])) > 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    bits = {
        r: {b for x in lines if x.get("req", "").startswith(f"cmpl-{r}-") for b in x.get("bits", ())} for r in range(4)
    }
    assert bits[2] and not any(b & SOURCE_CONTEXT for b in bits[2])  # the store only
    assert bits[3] and all(b == SOURCE_CONTEXT for b in bits[3])  # no store: the context only
    assert any(b & SOURCE_CONTEXT for b in bits[0])


def test_request_options_parse_what_the_client_sends_and_ignore_the_rest():
    assert RequestOptions.parse(None) == RequestOptions()
    assert RequestOptions.parse(request_xargs(["a", "b"], off=True, context=False)) == RequestOptions(
        True, frozenset({"a", "b"}), False
    )
    assert RequestOptions.parse({"rest_stores": ["x"]}).stores == frozenset({"x"})
    assert RequestOptions.parse({"rest_stores": ""}).stores == frozenset()
    assert RequestOptions.parse({"rest_stores": 3, "rest_off": "maybe"}) == RequestOptions()
    assert RequestOptions.parse("junk") == RequestOptions()


def rec(n: int, drafted: tuple[int, ...], accepted: int, bits: int = 1) -> DraftRecord:
    return DraftRecord(n, drafted, (bits,) * len(drafted), accepted)


def test_answer_steps_trust_a_chain_only_where_its_tokens_are_the_output():
    out = [5, 6, 7, 8, 9, 10]
    steps = answer_steps([rec(11, (6, 7, 99), 2), rec(14, (9,), 1), rec(10, (1,), 0)], 10, out)
    assert [(s.start, s.end, s.accepted) for s in steps] == [(0, 1, 0), (1, 4, 2), (4, 6, 1)]
    # from where an earlier call's steps ended: the same steps, the earlier ones left out
    assert answer_steps([rec(11, (6, 7, 99), 2), rec(14, (9,), 1), rec(10, (1,), 0)], 10, out, begin=4) == steps[2:]
    # a record whose "accepted" tokens are not the output's (another request's) explains nothing
    assert all(s.accepted == 0 for s in answer_steps([rec(11, (1, 2), 2)], 10, out))
    # the output ends inside a step (the length limit): the step ends with it
    assert [(s.start, s.end, s.accepted) for s in answer_steps([rec(10, (5, 6, 7), 3)], 10, out[:2])] == [(0, 2, 2)]


def test_the_log_reader_keeps_only_watched_requests_and_survives_partial_and_bad_lines(tmp_path):
    path = tmp_path / "drafts.jsonl"
    line = {"kind": "draft", "req": "cmpl-a-0-1234", "context_len": 4, "drafted": [1, 2], "bits": [1, 3], "accepted": 1}
    other = {**line, "req": "cmpl-b-0-9999"}
    text = json.dumps(line) + "\n" + json.dumps(other) + "\n" + '{"kind": "draft", "req": broken\n' + '{"kind": "st'
    path.write_text(text)
    log = DraftLog(path, max_bytes=10)
    log.watch("cmpl-a-0-")
    assert log.poll() == 1
    assert log.records("cmpl-a-0-") == [DraftRecord(4, (1, 2), (1, 3), 1)]
    with open(path, "a") as f:  # the cut line ends: not a draft line, dropped
        f.write('ep"}\n' + json.dumps({**line, "context_len": 7}) + "\n")
    assert log.poll() == 1 and len(log.records("cmpl-a-0-")) == 2
    assert parse_record(json.dumps({**line, "accepted": None})) is None  # not resolved yet
    assert not log.trim()  # someone is reading
    log.forget("cmpl-a-0-")
    assert log.trim() and path.stat().st_size == 0  # past max_bytes, nobody reading: emptied
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    log.watch("cmpl-a-0-")
    assert log.poll() == 1


def test_a_missing_log_is_no_records(tmp_path):
    log = DraftLog(tmp_path / "none.jsonl")
    log.watch("x")
    assert log.poll() == 0 and log.records("x") == []


@pytest.mark.parametrize("stream_id", ["cmpl-3f2a", "cmpl-x"])
def test_request_prefix_is_vllm_0_32s_internal_id_start(stream_id):
    assert f"{stream_id}-0-1a2b3c4d".startswith(request_prefix(stream_id))
