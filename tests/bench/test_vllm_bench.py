"""The vLLM bench's arithmetic and the serve command's arguments, without vLLM: summaries from
hand-made worker results, method settings, the flags handed to `vllm serve`."""

from __future__ import annotations

import argparse

import pytest

from rest_core.bench import vllm_bench
from rest_core.cli import build_parser, main
from rest_core.commands import serve


def request(prompt: int, tokens: list[int], latency: float) -> dict:
    return {"prompt": prompt, "token_ids": tokens, "latency_s": latency, "finish_reason": "length"}


def spec(drafts: int = 0, drafted: int = 0, accepted: int = 0) -> dict:
    return {
        "num_drafts": drafts,
        "num_draft_tokens": drafted,
        "num_accepted_tokens": accepted,
        "accepted_per_position": [accepted],
    }


RESULTS = {
    "ar": {
        "batches": [
            {
                "batch": 1,
                "wall_s": 2.0,
                "requests": [request(0, [1, 2, 3, 4], 1.0), request(1, [5, 6, 7, 8], 1.0)],
                "spec": spec(),
            },
            {
                "batch": 2,
                "wall_s": 1.0,
                "requests": [request(0, [1, 2, 3, 4], 1.0), request(1, [5, 6, 7, 9], 1.0)],
                "spec": spec(),
            },
        ]
    },
    "hybrid": {
        "batches": [
            # 8 tokens in 2 s -> 4 tok/s; 4 accepted drafts: 4 steps for 8 tokens, M = 2
            {
                "batch": 1,
                "wall_s": 1.0,
                "requests": [request(0, [1, 2, 3, 4], 0.5), request(1, [5, 6, 7, 8], 0.5)],
                "spec": spec(drafts=4, drafted=8, accepted=4),
            },
            {
                "batch": 2,
                "wall_s": 0.8,
                "requests": [request(0, [1, 2, 3, 4], 0.8), request(1, [5, 6, 7, 0], 0.8)],
                "spec": spec(drafts=2, drafted=2, accepted=1),
            },
        ]
    },
}


def test_summaries_per_batch_size_and_identity_with_ar():
    table, differences = vllm_bench.summarize(RESULTS)
    assert list(table) == [1, 2]
    ar, hy = table[1]["ar"], table[1]["hybrid"]
    assert ar.tokens_per_s == pytest.approx(4.0) and hy.tokens_per_s == pytest.approx(8.0)
    assert hy.speedup_vs_ar == pytest.approx(2.0) and hy.speedup_vs_ar_request == pytest.approx(2.0)
    assert hy.mean_generated_length == pytest.approx(2.0) and ar.mean_generated_length == pytest.approx(1.0)
    assert hy.draft_tokens_per_step == pytest.approx(2.0) and hy.mean_draft_length == pytest.approx(2.0)
    assert hy.acceptance == pytest.approx(0.5) and ar.acceptance is None
    assert hy.mean_token_ms == pytest.approx(1000 * 1.0 / 8)
    assert hy.identical_to_ar == 1.0 and ar.identical_to_ar == 1.0
    # at batch 2 the second request differs from ar's at its last token
    assert table[2]["hybrid"].identical_to_ar == 0.5
    assert differences == [{"method": "hybrid", "batch": 2, "round": 0, "request": 1, "prompt": 1, "first_diff": 3}]
    # ar itself at batch 2 differs from its batch-1 output on prompt 1 (batched numerics)
    assert table[2]["ar"].identical_to_ar_batch1 == 0.5


def test_the_report_keeps_the_usual_fields_per_method(tmp_path):
    table, differences = vllm_bench.summarize(RESULTS)
    written = vllm_bench.write_report(
        tmp_path,
        title="t",
        table=table,
        differences=differences,
        results=RESULTS,
        meta={"suite": "humaneval", "command": "python -m rest_core bench --engine vllm"},
    )
    import json

    data = json.loads((tmp_path / "results.json").read_text())
    assert written == [str(tmp_path / "results.json"), str(tmp_path / "results.md")]
    hybrid = data["methods"]["hybrid"]
    for key in ("mean_token_ms", "identical_to_ar", "mean_generated_length", "tokens_per_s"):
        assert key in hybrid
    assert hybrid["batch"] == 1 and set(hybrid["by_batch"]) == {"1", "2"}
    md = (tmp_path / "results.md").read_text()
    assert "**batch 2**" in md and "1 greedy output(s) differ" in md


def test_methods_as_vllm_is_told_them(tmp_path):
    from rest_core.serve.settings import ServedStore

    assert vllm_bench.method_config("ar").speculative_config is None
    ngram = vllm_bench.method_config("ngram", ngram=(3, 2)).speculative_config
    assert ngram == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2, "prompt_lookup_min": 1}
    suffix = vllm_bench.method_config("suffix", k=8).speculative_config
    assert suffix == {"method": "suffix", "num_speculative_tokens": 8}  # as a server runs it: global tree on
    local = vllm_bench.method_config("suffix-nocache", k=8).speculative_config
    assert local["method"] == "suffix" and local["suffix_decoding_max_cached_requests"] == 0
    (tmp_path / "meta.json").write_text("{}")
    hybrid = vllm_bench.method_config(
        "hybrid", stores=[ServedStore(str(tmp_path), "code")], k=8, cost_curve={"sizes": [1, 8], "ms": [30.0, 40.0]}
    )
    assert hybrid.speculative_config["model"] == "rest_core.serve.proposer.RestProposer"
    rest = hybrid.additional_config["rest"]
    assert rest["method"] == "hybrid" and rest["cost_curve"] == {"sizes": [1, 8], "ms": [30.0, 40.0]}
    assert rest["answers_tokens"] == 65536  # the server's default
    off = vllm_bench.method_config("hybrid", stores=[ServedStore(str(tmp_path), "code")], answers_tokens=0)
    assert off.additional_config["rest"]["answers_tokens"] == 0
    with pytest.raises(ValueError, match="unknown vLLM method"):
        vllm_bench.method_config("pld")


def test_ngram_settings_from_a_flag_or_a_sweep(tmp_path):
    assert vllm_bench.ngram_from(None)[0] == vllm_bench.DEFAULT_NGRAM
    assert vllm_bench.ngram_from("3:5") == ((3, 5), "fixed")
    sweep = tmp_path / "results.json"
    sweep.write_text(
        '{"kind": "ngram-sweep", "suite": "mtbench", "ngram_winner": {"num_speculative_tokens": 8, "prompt_lookup_max": 4}}'
    )
    assert vllm_bench.ngram_from(str(tmp_path))[0] == (8, 4)
    sweep.write_text('{"kind": "pld-sweep"}')
    with pytest.raises(ValueError, match="not the results of"):
        vllm_bench.ngram_from(str(sweep))


def plan_of(prompts: list[list[int]], batches: list[int], **kw) -> vllm_bench.VllmPlan:
    return vllm_bench.VllmPlan(model="m", prompts=prompts, batches=batches, max_tokens=8, warmup=[], **kw)


def test_each_batch_size_asks_its_own_prompts_and_too_few_are_refused():
    slices = vllm_bench.schedule(90, [1, 8, 32], per_batch=2, min_requests=10)
    assert {b: len(idx) for b, idx in slices.items()} == {1: 10, 8: 16, 32: 64}
    asked = [i for idx in slices.values() for i in idx]
    assert sorted(asked) == list(range(90))  # every prompt once, none twice
    with pytest.raises(ValueError, match=r"need 10 \(batch 1\) \+ 16 \(batch 8\) \+ 64 \(batch 32\) = 90 .* only 89"):
        vllm_bench.schedule(89, [1, 8, 32], per_batch=2, min_requests=10)


def test_no_bench_pass_hands_an_engine_the_same_prompt_twice(tmp_path):
    """A drafter that keeps earlier answers (SuffixDecoding's global tree, the hybrid's answers)
    would draft a repeated prompt from its own answer: every job the bench makes asks each prompt
    once on its engine, and the worker refuses one that would not."""
    from rest_core.serve.bench_worker import _requests, check_distinct

    prompts = [[7, i, i + 1] for i in range(90)]
    plan = plan_of(prompts, [1, 8, 32], requests_per_batch=2, min_requests=10, rounds=3)
    for name in vllm_bench.VLLM_METHODS:
        for r in range(plan.rounds):
            job = vllm_bench.make_job(plan, vllm_bench.VllmMethod(name), tmp_path, round_index=r, calibrate=r == 0)
            check_distinct(job)
            asked = [tuple(prompts[i]) for b in job["batches"] for i in _requests(job, b)]
            assert len(asked) == len(set(asked)) == 90
            assert job["out"].endswith(f"{name}-{r}.json")  # each round its own engine and result
    # the same text under two problem numbers, a warm-up prompt measured, repeated passes: refused
    twice = plan_of([[1, 2]] + prompts[1:], [1, 8, 32], requests_per_batch=2, min_requests=10)
    twice.prompts[40] = [1, 2]
    job = vllm_bench.make_job(twice, vllm_bench.VllmMethod("suffix"), tmp_path, round_index=0, calibrate=False)
    with pytest.raises(ValueError, match="prompt 40 at batch 32 was already asked on this engine"):
        check_distinct(job)
    warm = plan_of(prompts, [1], min_requests=10)
    warm.warmup = [[prompts[3]]]
    with pytest.raises(ValueError, match="prompt 3 at batch 1 .*the warm-up"):
        check_distinct(
            vllm_bench.make_job(warm, vllm_bench.VllmMethod("hybrid"), tmp_path, round_index=0, calibrate=False)
        )
    with pytest.raises(ValueError, match="runs each batch size once"):
        check_distinct({**job, "repeats": 2, "prompts": prompts})


def test_rounds_interleave_the_methods_on_fresh_engines(monkeypatch, tmp_path):
    calls = []

    def fake_run_method(plan, method, work, *, log, round_index, calibrate):
        calls.append((round_index, method.name, calibrate))
        rate = {"ar": 1.0, "ngram": 2.0}[method.name] * (1 + round_index)
        reqs = [request(i, [1, 2, 3, 4], 4 / rate) for i in range(2)]
        return {"batches": [{"batch": 1, "wall_s": 8 / rate, "loadavg": [0.5, 0.7], "requests": reqs, "spec": spec()}]}

    monkeypatch.setattr(vllm_bench, "load_tokenizer_and_folder", lambda model: (None, "folder"))
    monkeypatch.setattr(
        vllm_bench, "prepare", lambda args, problems, **kw: plan_of([[1], [2]], [1], min_requests=2, rounds=3)
    )
    monkeypatch.setattr(vllm_bench, "run_method", fake_run_method)
    args = argparse.Namespace(
        methods="ngram,ar",
        model="embedded",
        ngram="4:4",
        spec_k=16,
        n_min=None,
        n_max=None,
        m=None,
        max_matches=None,
        suite="humaneval",
        max_new_tokens=4,
    )
    problems = [argparse.Namespace(id="HumanEval/10"), argparse.Namespace(id="HumanEval/11")]
    assert vllm_bench.run(args, problems, tmp_path, {}) == 0
    assert calls == [
        (0, "ar", True),
        (0, "ngram", False),
        (1, "ar", False),
        (1, "ngram", False),
        (2, "ar", False),
        (2, "ngram", False),
    ]
    import json

    row = json.loads((tmp_path / "results.json").read_text())["batches"]["1"]["ngram"]
    assert row["tokens_per_s_passes"] == pytest.approx([2.0, 4.0, 6.0])  # one per round
    assert row["tokens_per_s"] == pytest.approx(4.0)  # the median
    assert row["speedup_passes"] == pytest.approx([2.0, 2.0, 2.0]) and row["speedup_vs_ar"] == pytest.approx(2.0)
    assert row["loadavg_passes"] == [[0.5, 0.7]] * 3
    assert "(2.0-6.0)" in (tmp_path / "results.md").read_text()


def test_repeated_passes_agree_on_their_tokens_not_their_times():
    from rest_core.serve.bench_worker import same_tokens

    one = {"requests": [{"prompt": 0, "token_ids": [1, 2], "latency_s": 1.0}]}
    again = {"requests": [{"prompt": 0, "token_ids": [1, 2], "latency_s": 0.9}]}
    other = {"requests": [{"prompt": 0, "token_ids": [1, 3], "latency_s": 1.0}]}
    assert same_tokens([one, again]) and not same_tokens([one, again, other])


def serve_args(*argv: str) -> tuple[argparse.Namespace, list[str]]:
    args, extra = build_parser().parse_known_args(["serve", *argv])
    return args, extra


def test_serve_hands_unknown_flags_to_vllm_and_sets_the_proposer(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    args, extra = serve_args("--model", str(model), "--method", "context", "--tensor-parallel-size", "2", "--port=8001")
    assert extra == ["--tensor-parallel-size", "2", "--port=8001"]
    argv = serve.vllm_arguments(args, extra)
    assert argv[:2] == ["serve", str(model)]
    assert argv[-3:] == extra
    import json

    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    rest = json.loads(argv[argv.index("--additional-config") + 1])["rest"]
    assert spec["model"] == "rest_core.serve.proposer.RestProposer" and spec["num_speculative_tokens"] == 16
    assert rest["method"] == "context" and rest["datastores"] == [] and rest["m"] == 16
    assert rest["answers_tokens"] == 65536
    args, extra = serve_args("--model", str(model), "--method", "context", "--answers-tokens", "0")
    argv = serve.vllm_arguments(args, extra)
    assert json.loads(argv[argv.index("--additional-config") + 1])["rest"]["answers_tokens"] == 0
    with pytest.raises(ValueError, match="is set by this command"):
        serve.vllm_arguments(args, ["--speculative-config", "{}"])
    args, _ = serve_args("--model", str(model), "--method", "hybrid")
    with pytest.raises(ValueError, match="pass --datastore"):
        serve.vllm_arguments(args, [])


def test_only_serve_takes_flags_it_does_not_know(capsys):
    with pytest.raises(SystemExit):
        main(["datastore", "info", "x", "--tensor-parallel-size", "2"])
    assert "unrecognized arguments: --tensor-parallel-size 2" in capsys.readouterr().err


def test_serve_without_a_vllm_environment_says_how_to_make_one(monkeypatch, tmp_path, capsys):
    from rest_core.serve import env

    monkeypatch.setattr(env, "has_vllm", lambda: False)
    monkeypatch.setattr(env, "VLLM_VENV", tmp_path / "missing")
    monkeypatch.delenv(env.PYTHON_ENV, raising=False)
    model = tmp_path / "model"
    model.mkdir()
    assert main(["serve", "--model", str(model), "--method", "context", "--dry-run"]) == 2
    assert "run `make serve-env`" in capsys.readouterr().err


def test_ar_times_every_step_width_the_proposer_may_verify():
    """At batch 1 a full chain is a 1 + k token step: its cost is measured, not extrapolated
    from 1..4 (a flat line there made long chains look free)."""
    assert vllm_bench.calibration_sizes([1], 16) == [1, 2, 4, 8, 16, 17]
    assert vllm_bench.calibration_sizes([1, 8, 32], 16) == [1, 2, 4, 8, 16, 17, 32, 64]
    assert max(vllm_bench.calibration_sizes([4], 2)) == 8  # 2 x the largest batch when that is wider
