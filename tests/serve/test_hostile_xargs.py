"""A request's `vllm_xargs` as a hostile client may send them to `rest_core serve`: huge or odd
`rest_answers` names, thousands of namespaces, unknown store names, odd types. The proposer runs
inside vLLM's engine, so one exception there takes the whole server down, and what it keeps per
request or namespace is memory a client can make it hold. Driven without vLLM, as in
test_serve_proposer.py.

vLLM 0.32's OpenAI server narrows what can arrive: `vllm_xargs` is `dict[str, str | int | float |
list[str | int | float]]` (pydantic: null, objects and nested lists are refused with a 400, JSON
true/false arrive as 1/0); the body is read with `json.loads` (an integer of over 4300 digits is
refused); and the request crosses to the engine core as msgpack (an integer beyond 64 bits or a
lone surrogate cannot be encoded there). The proposer is checked against more than that anyway:
the offline API (`SamplingParams(extra_args=...)`) hands over any object."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rest_core.drafting.answers_source import FIRST_TOKENS
from rest_core.serve import served_sources
from rest_core.serve.settings import _NAMESPACE_CHARS, MAX_ANSWER_NAMESPACES, RequestOptions
from tests.serve import test_serve_proposer as served
from tests.serve.test_serve_proposer import MAX_LEN, MAX_REQS, OneRequest, make

tok, model_dir, store_dir = served.tok, served.model_dir, served.store_dir  # its fixtures

MB = 1_000_000


def kind(value) -> str:
    """A parameter's test id (pytest would print the value: 1 MB, or an integer str() refuses)."""
    return type(value).__name__


class Batch:
    """vLLM's runner serving a batch of requests at once, each with its own xargs, to their end."""

    def __init__(self, proposer) -> None:
        self.p, self.served = proposer, 0
        self.input_batch = SimpleNamespace(req_ids=[])
        self.requests: dict = {}
        proposer.attach_runner(self)

    def serve(self, extras: list, prompt: list[int], answer: list[int]) -> list[list[int]]:
        """Every request's drafts of its last step (the answer emitted one token a step)."""
        rids = [f"b{self.served + i}" for i in range(len(extras))]
        self.served += len(extras)
        self.input_batch.req_ids = rids
        self.requests = {
            r: SimpleNamespace(sampling_params=SimpleNamespace(extra_args=x)) for r, x in zip(rids, extras)
        }
        ids, lens = np.zeros((MAX_REQS, MAX_LEN), np.int32), np.zeros(MAX_REQS, np.int32)
        out: list[list[int]] = []
        for done in range(1, len(answer) + 1):
            ctx = prompt + answer[:done]
            ids[: len(rids), : len(ctx)], lens[: len(rids)] = ctx, len(ctx)
            out = self.p.propose([[answer[done - 1]]] * len(rids), lens, ids)
            assert len(out) == len(rids) and all(len(d) <= self.p.k for d in out)
        self.input_batch.req_ids, self.requests = [], {}
        self.p.propose([], lens, ids)  # they have ended: their answers join their namespaces
        return out


def enc(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False).input_ids


class Raises:
    """What only the offline API can hand over: an object that fails when compared or printed."""

    def __eq__(self, other):
        raise RuntimeError("no")

    __hash__ = object.__hash__

    def __str__(self):
        raise RuntimeError("no")


def test_a_huge_answers_name_is_kept_short_and_stays_its_own_namespace(model_dir, store_dir, tok):
    a, b = "x" * MB + "a", "x" * MB + "b"  # 1 MB names that differ in their last character
    keys = [RequestOptions.parse({"rest_answers": n}).answers for n in (a, b, a)]
    assert all(len(k) <= _NAMESPACE_CHARS for k in keys)
    assert keys[0] != keys[1] and keys[0] == keys[2]  # cut to a prefix, the two would share one
    assert RequestOptions.parse({"rest_answers": "team-a"}).answers == "team-a"  # short names as given
    odd = RequestOptions.parse({"rest_answers": "\ud800" * MB}).answers  # a lone surrogate: no UTF-8 text
    assert odd and len(odd) <= _NAMESPACE_CHARS
    p = make(model_dir, store_dir, "hybrid")
    Batch(p).serve([{"rest_answers": a}, {"rest_answers": b}], [5, 6, 7], enc(tok, " one two three four"))
    assert len(p.histories) == 2 and all(len(n) <= _NAMESPACE_CHARS for n in p.histories.names())


@pytest.mark.parametrize(
    "value", [["team-a"], [], {"a": 1}, 1.5, float("nan"), float("inf"), None, True, 10**5000], ids=kind
)
def test_an_answers_value_not_understood_drafts_from_no_namespace(value):
    # Sharing the server's namespace is the one fallback that could tell one client about another's
    # answers; a client that sent something meant its own, so it gets none.
    opts = RequestOptions.parse({"rest_answers": value})
    assert opts.answers is None and opts.ignored == ("rest_answers",)


def test_xargs_no_json_request_can_send_never_raise(model_dir, store_dir, tok):
    huge = 10**5000  # str() of it raises in Python (over 4300 digits)
    extras = [
        {"rest_answers": huge, "rest_stores": [huge, "code"], "rest_off": huge, "rest_context": huge},
        {"rest_answers": Raises()},
        {"rest_stores": [Raises()]},
        {"rest_off": Raises(), "rest_context": Raises()},
    ]
    assert RequestOptions.parse(extras[0]).stores == frozenset({"code"})
    assert RequestOptions.parse(extras[2]).stores == frozenset()  # a name that is neither text nor a number
    for extra in (extras[1], extras[3]):
        assert RequestOptions.parse(extra).answers is None  # unreadable: no namespace
    p = make(model_dir, store_dir, "hybrid")
    Batch(p).serve(extras, [5, 6, 7], enc(tok, " one two three"))
    assert p.snapshot()["xargs"]["ignored"] == {"rest_answers": 1, "vllm_xargs": 2}


def test_a_request_keeps_the_served_store_names_only():
    served = frozenset({"code", "prose"})
    opts = RequestOptions.parse({"rest_stores": "nope, code"}, served)
    assert opts.stores == frozenset({"code"}) and opts.unknown == ("nope",)
    many = ",".join(f"s{i}" for i in range(150_000)) + ",code," + "y" * MB  # over 2 MB of names
    opts = RequestOptions.parse({"rest_stores": many}, served)
    assert opts.stores == frozenset({"code"})  # not 150,001 names held for the request's lifetime
    assert len(opts.unknown) <= 4 and all(len(n) <= _NAMESPACE_CHARS for n in opts.unknown)
    assert RequestOptions.parse({"rest_stores": ["nope"]}, served).stores == frozenset()  # none served: none


def test_thousands_of_namespaces_hold_bounded_memory(model_dir, store_dir, tok):
    """2,000 namespaces: the latest MAX_ANSWER_NAMESPACES are kept, each holding at most
    --answers-tokens tokens, and a namespace's stream grows with what it holds (a short answer
    costs a few KB, not the 256 KB of 65,536 tokens)."""
    answer = enc(tok, " alpha beta gamma")
    p = make(model_dir, store_dir, "hybrid")  # the default --answers-tokens (65,536)
    runner = Batch(p)
    for start in range(0, 2000, 250):
        runner.serve([{"rest_answers": f"ns-{i}"} for i in range(start, start + 250)], [5, 6, 7], answer)
    kept = p.snapshot()["answers"]
    assert kept["namespaces"] == len(p.histories) == MAX_ANSWER_NAMESPACES == 64
    assert p.histories.names() == [f"ns-{i}" for i in range(2000 - 64, 2000)]  # the least recently used went
    assert kept["tokens"] <= 64 * (len(answer) + 2)
    assert kept["bytes"] == sum(p.histories.get(n).nbytes for n in p.histories.names()) <= 64 * FIRST_TOKENS * 4
    # Long answers fill a namespace to its --answers-tokens and no further.
    p = make(model_dir, store_dir, "hybrid", answers_tokens=64)
    long_answer = enc(tok, " a b c d e f g h i j k l m n o p q r s t u v w x y z" * 4)
    runner = Batch(p)
    for start in range(0, 400, 200):
        runner.serve([{"rest_answers": f"ns-{i}"} for i in range(start, start + 200)], [5, 6, 7], long_answer)
    assert len(p.histories) == 64 and all(0 < len(p.histories.get(n)) <= 64 for n in p.histories.names())
    assert p.snapshot()["answers"]["bytes"] <= 64 * 64 * 4


@pytest.mark.parametrize("value", ["y" * MB, ["a", 1, 2.5], {"a": 1}, 2.5, None, "\ud800"], ids=kind)
def test_odd_values_of_the_other_xargs_draft_as_the_server_is_set_up(model_dir, store_dir, tok, value):
    for key, default in (("rest_off", False), ("rest_context", True)):
        assert getattr(RequestOptions.parse({key: value}), key[5:]) is default
    stores = RequestOptions.parse({"rest_stores": value}).stores
    assert stores is None or "code" not in stores  # not understood: every store; other names: not "code"
    p = make(model_dir, store_dir, "hybrid")
    extra = {"rest_off": value, "rest_context": value, "rest_stores": value, "rest_answers": value}
    Batch(p).serve([extra, value], [5, 6, 7], enc(tok, " one two three"))  # the whole extra_args odd, too


def test_unknown_store_names_draft_from_no_store_and_are_counted_and_said_a_few_times(
    model_dir, store_dir, tok, capsys
):
    p = make(model_dir, store_dir, "hybrid")  # serves one store, "code"
    many = ",".join(f"s{i}" for i in range(150_000)) + ",code"
    assert p.sources.options({"rest_stores": many}).stores == frozenset({"code"})  # what the request keeps
    capsys.readouterr()
    p = make(model_dir, store_dir, "hybrid")
    answer = enc(tok, "def add(a, b):\n    return a + b\n")
    records = OneRequest(p).serve("r", enc(tok, "def add(a, b):\n"), answer, {"rest_stores": "nope"})
    bit = p.table.bit("code")
    assert not any(m & bit for r in records for m in r["sources"])  # from no store: it named none served
    Batch(p).serve([{"rest_stores": [f"bad-{i}", "\ud800\nx"]} for i in range(20)], [5, 6, 7], answer[:3])
    assert p.snapshot()["xargs"]["unknown_stores"] == 21
    said = capsys.readouterr().err
    assert "'nope'" in said and "served: code" in said and "'\\ud800\\nx'" in said  # escaped: one line each
    assert said.count("\n") == 7 < served_sources.UNKNOWN_SAID  # a line per request with new names, 8 names in all
    assert sum(f"'bad-{i}'" in said for i in range(20)) == served_sources.UNKNOWN_SAID - 2
    assert "only counted" in said.splitlines()[-1]
