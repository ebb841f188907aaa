"""Benchmark: metric arithmetic on synthetic step events, suite loaders on the real data files,
the random-selection baseline, datastore subsets, and a tiny end-to-end run of the command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rest_core.bench.ablations import document_subset, select_random_continuations, suffix_histogram
from rest_core.bench.loop import BenchResult, run_benchmark
from rest_core.bench.metrics import summarize, summarize_method
from rest_core.bench.runners import strip_eos
from rest_core.bench.runs import TimedRun, run_from_events
from rest_core.bench.suites import load_suite
from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE, MatchInfo, StepEvent, StepTimings, Totals
from rest_core.drafting.trie import Trie


def chain(tokens: list[int], source: int = SOURCE_DATASTORE) -> Trie:
    n = len(tokens)
    return Trie(
        tokens=np.array(tokens, dtype=np.int64),
        parents=np.arange(-1, n - 1, dtype=np.int64),
        depths=np.arange(1, n + 1, dtype=np.int64),
        weights=np.ones(n),
        sources=np.full(n, source, dtype=np.uint8),
    )


def event(
    step,
    tokens,
    sources,
    *,
    draft_len,
    suffix_len,
    new_total,
    steps,
    elapsed_s,
    retrieve_ms=0.5,
    draft_ms=0.25,
    finished=False,
):
    draft = chain(list(range(draft_len))) if draft_len else None
    return StepEvent(
        step=step,
        method="rest",
        matches=(MatchInfo(SOURCE_DATASTORE, suffix_len, (), 3, ()),),
        trie=draft,
        draft_idx=tuple(range(draft_len)),
        draft=draft,
        accepted=tuple(range(sum(1 for s in sources if s))),
        tokens=tuple(tokens),
        token_sources=tuple(sources),
        c=4,
        timings=StepTimings(retrieve_ms=retrieve_ms, draft_ms=draft_ms, forward_ms=10.0, total_ms=12.0),
        totals=Totals(
            prompt_tokens=5,
            new_tokens=new_total,
            steps=steps,
            draft_tokens=0,
            elapsed_s=elapsed_s,
            prefill_ms=20.0,
            retrieval_ms=0.0,
        ),
        finished=finished,
        finish_reason="length" if finished else None,
    )


def synthetic_events():
    # 3 steps: 1 model token; 2 datastore + 1 model; 1 context + 1 both + 1 model = 6 tokens.
    both = SOURCE_DATASTORE | SOURCE_CONTEXT
    return [
        event(0, [7], [0], draft_len=0, suffix_len=0, new_total=1, steps=1, elapsed_s=0.01),
        event(
            1,
            [8, 9, 10],
            [SOURCE_DATASTORE, SOURCE_DATASTORE, 0],
            draft_len=4,
            suffix_len=3,
            new_total=4,
            steps=2,
            elapsed_s=0.03,
        ),
        event(
            2,
            [11, 12, 13],
            [SOURCE_CONTEXT, both, 0],
            draft_len=4,
            suffix_len=2,
            new_total=6,
            steps=3,
            elapsed_s=0.06,
            finished=True,
        ),
    ]


def test_run_from_events_counts_tokens_sources_and_timings():
    run = run_from_events(synthetic_events(), problem_id="p", turn=0, method="hybrid", prompt_tokens=5, wall_ms=80.0)
    assert run.token_ids == [7, 8, 9, 10, 11, 12, 13]
    assert run.steps == 3 and run.draft_tokens == 4 and run.drafted_nodes == 8
    assert run.source_tokens == {"model": 3, "datastore": 2, "context": 1, "both": 1}
    assert run.suffix_lens == {"datastore": [0, 3, 2]}
    assert run.retrieval_ms == pytest.approx(3 * 0.75)
    assert run.prefill_ms == 20.0 and run.decode_ms == pytest.approx(60.0)
    assert run.finish_reason == "length"
    # Without a wall clock, the engine's own totals (prefill + decode) stand in.
    run2 = run_from_events(synthetic_events(), problem_id="p", turn=0, method="hybrid", prompt_tokens=5)
    assert run2.wall_ms == pytest.approx(80.0)


def make_run(method, n_tokens, wall_ms, prefill_ms, steps, draft=0, retrieval_ms=0.0, sources=None, prefill_tokens=0):
    return TimedRun(
        "p",
        0,
        method,
        10,
        list(range(n_tokens)),
        wall_ms,
        prefill_ms,
        steps,
        draft_tokens=draft,
        retrieval_ms=retrieval_ms,
        source_tokens=sources or {},
        prefill_tokens=prefill_tokens,
    )


def test_summary_is_pooled_and_speedup_is_a_ratio_of_the_same_run():
    # transformers-style runs: the prefill call yields the first token of each.
    ar = [make_run("ar", 10, 120.0, 20.0, 10, prefill_tokens=1), make_run("ar", 30, 320.0, 20.0, 30, prefill_tokens=1)]
    rest = [
        make_run("rest", 10, 60.0, 20.0, 5, draft=5, retrieval_ms=1.0, sources={"model": 5, "datastore": 5}),
        make_run(
            "rest",
            30,
            140.0,
            20.0,
            10,
            draft=20,
            retrieval_ms=3.0,
            sources={"model": 10, "datastore": 15, "context": 5},
        ),
    ]
    result = BenchResult(ar + rest, {"ar": [True, True], "rest": [True, False]}, [])
    s = summarize(result)
    assert s["ar"].mean_token_ms == pytest.approx(440 / 40)
    assert s["ar"].mean_token_ms_decode == pytest.approx(400 / 38)
    assert s["ar"].mean_generated_length == pytest.approx(1.0)
    assert s["rest"].mean_token_ms == pytest.approx(200 / 40)
    assert s["rest"].mean_token_ms_decode == pytest.approx(160 / 40)
    assert s["rest"].speedup_vs_ar == pytest.approx(11 / 5)
    assert s["rest"].speedup_vs_ar_decode == pytest.approx((400 / 38) / 4)
    assert s["rest"].mean_generated_length == pytest.approx(40 / 15)
    assert s["rest"].identical_to_ar == 0.5
    assert s["rest"].draft_share == pytest.approx(25 / 40)
    assert s["rest"].retrieval_ms_per_token == pytest.approx(4 / 40)
    assert s["rest"].retrieval_share_of_decode == pytest.approx(4 / 160)
    assert s["rest"].accepted_share_by_source == pytest.approx({"datastore": 20 / 25, "context": 5 / 25})
    assert s["rest"].source_share["model"] == pytest.approx(15 / 40)
    assert s["ar"].speedup_vs_ar == pytest.approx(1.0)


def test_summary_without_runs_or_steps_does_not_divide_by_zero():
    s = summarize_method("x", [make_run("x", 0, 0.0, 0.0, 0)])
    assert s.mean_generated_length is None and s.draft_share == 0.0


def test_strip_eos():
    assert strip_eos([1, 2, 0, 3], [0]) == [1, 2]
    assert strip_eos([1, 2], [0]) == [1, 2]


class EchoRunner:
    """Emits the prompt's last tokens; a broken one differs once the prompt is longer than `broken_above`."""

    def __init__(self, name, broken_above=None):
        self.name, self.broken_above, self.calls = name, broken_above, []

    def run(self, prompt_ids, max_new_tokens, seed):
        self.calls.append(list(prompt_ids))
        out = list(prompt_ids[-max_new_tokens:])
        if self.broken_above is not None and len(prompt_ids) > self.broken_above:
            out[-1] += 1
        return TimedRun("", 0, self.name, len(prompt_ids), out, 10.0, 1.0, len(out))


def test_chat_identity_compares_like_with_like():
    from rest_core.bench.suites import Problem

    def encode(prompt, chat):
        text = "".join(m["content"] for m in prompt) if chat else prompt
        return [ord(ch) for ch in text]

    decode = lambda ids: "".join(chr(i) for i in ids)  # noqa: E731
    problems = [Problem("chat/1", "chat", ("abcdef", "ghijkl"))]
    ar, good, bad, early = EchoRunner("ar"), EchoRunner("rest"), EchoRunner("pld", 10), EchoRunner("hybrid", 0)
    result = run_benchmark(
        problems, [ar, good, bad, early], encode=encode, decode=decode, max_new_tokens=3, progress=False
    )
    assert result.identical == {
        "ar": [True, True],
        "rest": [True, True],
        "pld": [True, False],
        "hybrid": [False, False],
    }
    assert [(d.method, d.turn) for d in result.differences] == [("hybrid", 0), ("pld", 1), ("hybrid", 1)]
    # Turn 2 carries each method's own turn-1 answer: "abcdef" + "def" + "ghijkl".
    assert good.calls[1] == encode([{"content": "abcdefdefghijkl"}], True)
    assert [r.method for r in result.runs] == ["ar", "rest", "pld", "hybrid"] * 2
    # hybrid's turn-1 answer differed, so its turn-2 prompt is its own: ar reran (untimed) on it.
    assert result.references_rerun == 1 and ar.calls[-1] == early.calls[-1]


def test_repeats_keep_each_methods_fastest_run():
    from rest_core.bench.suites import Problem

    class Noisy(EchoRunner):
        def __init__(self, name, times):
            super().__init__(name)
            self.times = list(times)

        def run(self, prompt_ids, max_new_tokens, seed):
            r = super().run(prompt_ids, max_new_tokens, seed)
            r.wall_ms = self.times.pop(0)
            return r

    a, b = Noisy("ar", [50.0, 20.0, 30.0]), Noisy("rest", [5.0, 9.0, 7.0])
    result = run_benchmark(
        [Problem("p", "completion", ("xyz",))],
        [a, b],
        encode=lambda t, chat: [ord(c) for c in t],
        decode=str,
        max_new_tokens=2,
        progress=False,
        repeats=3,
    )
    assert [(r.method, r.wall_ms) for r in result.runs] == [("ar", 20.0), ("rest", 5.0)]


def test_select_random_continuations_is_a_connected_exact_budget():
    # Root children a(3), b(1); a has children c(2), d(1); c has child e(2).
    trie = Trie(
        tokens=np.array([10, 11, 12, 13, 14]),
        parents=np.array([-1, -1, 0, 0, 2]),
        depths=np.array([1, 1, 2, 2, 3]),
        weights=np.array([3.0, 1.0, 2.0, 1.0, 2.0]),
        sources=np.ones(5, dtype=np.uint8),
    )
    rng = np.random.default_rng(0)
    for c in range(0, 7):
        for _ in range(20):
            idx = select_random_continuations(trie, c, rng)
            assert len(idx) == min(c, 5)
            assert list(idx) == sorted(set(idx.tolist()))
            chosen = set(idx.tolist())
            assert all(trie.parents[i] < 0 or trie.parents[i] in chosen for i in chosen)
    # Random: different draws pick different single continuations at c=1.
    picks = {tuple(select_random_continuations(trie, 3, np.random.default_rng(s))) for s in range(30)}
    assert len(picks) > 1


def test_document_subset_is_exact_and_nested():
    from rest_core.store.datastore import Datastore

    rng = np.random.default_rng(1)
    docs = [rng.integers(0, 20, size=rng.integers(3, 12)).tolist() for _ in range(64)]
    store = Datastore.from_token_ids(docs, vocab_size=20)
    half = document_subset(store, 0.5, seed=3)
    quarter = document_subset(store, 0.25, seed=3)
    assert half.n_documents == 32 and quarter.n_documents == 16
    for sub in (half, quarter):
        for shard in sub.shards:
            tokens = np.asarray(shard.tokens)
            suffixes = [tuple(tokens[p:].tolist()) for p in shard.sa]
            assert suffixes == sorted(suffixes)  # still a sorted suffix array
    assert set(quarter.shards[0].sa.tolist()) <= set(half.shards[0].sa.tolist())
    assert document_subset(store, 1.0) is store


def test_suffix_histogram_counts_steps_per_length():
    runs = [run_from_events(synthetic_events(), problem_id="p", turn=0, method="rest", prompt_tokens=5)]
    assert suffix_histogram(BenchResult(runs, {}, []), "rest") == {"datastore": {0: 1, 2: 1, 3: 1}}


def test_suite_loaders_read_the_real_files():
    humaneval = load_suite("humaneval")
    mtbench = load_suite("mtbench")
    assert len(humaneval) == 164 and len(mtbench) == 80
    assert humaneval[0].id == "HumanEval/0" and humaneval[0].kind == "completion"
    assert humaneval[0].turns[0].startswith("from typing import List")
    assert all(p.kind == "chat" and len(p.turns) == 2 for p in mtbench)
    assert [p.id for p in load_suite("mtbench", limit=2, offset=1)] == [mtbench[1].id, mtbench[2].id]
    with pytest.raises(ValueError):
        load_suite("nope")


# --- end to end on the tiny model -----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm():
    from tests.tiny_models import tiny_loaded

    return tiny_loaded("llama", max_positions=2048)


@pytest.fixture(scope="module")
def tiny_store(tiny_lm):
    from rest_core.store.datastore import Datastore

    # A store of byte strings the tiny model's greedy output is likely to revisit, plus code.
    texts = ["def f(x):\n    return x + 1\n", "    return result\n", "Hello, how are you today?\n"] * 3
    return Datastore.from_token_ids([list(t.encode()) for t in texts], vocab_size=len(tiny_lm.tokenizer))


@pytest.fixture(scope="module")
def tiny_setup(tiny_lm, tiny_store):
    from rest_core.cli import build_parser
    from rest_core.commands.bench import BenchSetup

    def make(argv):
        args = build_parser().parse_args(["bench", *argv])
        return args, BenchSetup.build(args, tiny_lm, open_datastore=lambda: tiny_store)

    return make


@pytest.mark.parametrize("suite", ["humaneval", "mtbench"])
def test_bench_command_end_to_end_on_the_tiny_model(tiny_setup, tmp_path, suite):
    from rest_core.bench.suites import load_suite
    from rest_core.commands.bench import run_methods

    args, setup = tiny_setup(
        [
            "--suite",
            suite,
            "--methods",
            "ar,pld,rest,ar-loop,context,hybrid",
            "--limit",
            "1",
            "--max-new-tokens",
            "10",
            "--pld-k",
            "auto",
            "--pld-tune-limit",
            "1",
            "--pld-tune-tokens",
            "4",
            "--c",
            "8",
            "--no-progress",
        ]
    )
    problems = load_suite(suite, 1)
    assert run_methods(setup, problems, tmp_path) == 0  # greedy outputs all identical to ar
    data = json.loads((tmp_path / "results.json").read_text())
    methods = data["methods"]
    assert set(methods) == {"ar", "pld", "rest", "ar-loop", "context", "hybrid"}
    turns = 2 if suite == "mtbench" else 1
    for m in methods.values():
        assert m["identical_to_ar"] == 1.0 and m["runs"] == turns
        assert m["new_tokens"] > 0 and m["mean_token_ms"] > 0
    assert methods["ar"]["mean_generated_length"] == pytest.approx(1.0)
    assert methods["ar-loop"]["mean_generated_length"] == pytest.approx(1.0)
    assert data["pld"]["prompt_lookup_num_tokens"] in (2, 3, 5, 8, 10)
    assert "| rest |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "chart.html").stat().st_size > 1000


@pytest.mark.parametrize("kind", ["c-sweep", "selection", "datastore-size", "suffix-hist"])
def test_ablation_commands_end_to_end_on_the_tiny_model(tiny_setup, tmp_path, kind):
    from rest_core.bench.suites import load_suite
    from rest_core.commands.bench import run_ablation

    values = {"c-sweep": "1,4", "selection": "4", "datastore-size": "1/2,1", "suffix-hist": ""}[kind]
    argv = [
        "ablation",
        "--kind",
        kind,
        "--suite",
        "humaneval",
        "--limit",
        "1",
        "--max-new-tokens",
        "8",
        "--method",
        "hybrid",
        "--warmup",
        "0",
        "--no-progress",
    ]
    args, setup = tiny_setup(argv + (["--values", values] if values else []))
    assert run_ablation(setup, load_suite("humaneval", 1), tmp_path) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    if kind == "suffix-hist":
        assert sum(data["histogram"]["datastore"].values()) > 0
    else:
        assert len(data["rows"]) == {"c-sweep": 2, "selection": 2, "datastore-size": 2}[kind]
        assert all(r["summary"]["identical_to_ar"] == 1.0 for r in data["rows"])
    assert (tmp_path / "results.md").exists() and (tmp_path / "chart.html").exists()


# --- defaults, prompt lookup's sweep, layering ------------------------------------------------


def parse_bench(argv):
    from rest_core.cli import build_parser

    return build_parser().parse_args(["bench", *argv])


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_bench_without_knob_flags_uses_the_device_preset(device_type):
    from rest_core.commands.bench import settings_from_args
    from rest_core.config import preset_for_device

    preset = preset_for_device(device_type)
    retrieval, draft, _ = settings_from_args(parse_bench([]), device_type)
    assert retrieval == preset.retrieval and draft == preset.draft  # cpu: c=2; cuda: c=64
    retrieval, draft, _ = settings_from_args(parse_bench(["--c", "5", "--budget", "auto", "--n-max", "1"]), device_type)
    assert (draft.c, draft.budget, draft.use_context) == (5, "auto", preset.draft.use_context)
    assert (retrieval.n_max, retrieval.n_min, retrieval.m) == (1, 1, preset.retrieval.m)


def test_bench_run_records_the_preset_it_ran(tiny_setup, tmp_path):
    from rest_core.bench.suites import load_suite
    from rest_core.commands.bench import run_methods
    from rest_core.config import PRESETS

    args, setup = tiny_setup(
        ["--methods", "ar,rest", "--limit", "1", "--max-new-tokens", "6", "--warmup", "0", "--no-progress"]
    )
    assert run_methods(setup, load_suite("humaneval", 1), tmp_path) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["preset"] == "cpu"
    assert data["settings"]["draft"]["c"] == PRESETS["cpu"].draft.c
    # The sources are each method's own, not the base's defaults (which said context on for rest).
    assert "use_context" not in data["settings"]["draft"]
    assert data["settings"]["sources_by_method"] == {
        "rest": ["datastore"],
        "context": ["context"],
        "hybrid": ["datastore", "context"],
    }


@pytest.mark.parametrize("suite,first_train", [("humaneval", 100), ("mtbench", 101)])
def test_pld_sweep_never_selects_an_evaluation_problem(suite, first_train):
    from rest_core.bench.suites import load_suite, problem_number
    from rest_core.commands.bench import select_problems

    for argv in ([], ["--limit", "0"], ["--limit", "0", "--offset", "3"], ["--split", "train"]):
        problems = select_problems(parse_bench(["pld-sweep", "--suite", suite, *argv]))
        assert problems and all(problem_number(p) >= first_train for p in problems)
    whole = select_problems(parse_bench(["pld-sweep", "--suite", suite, "--limit", "0"]))
    assert len(whole) == {"humaneval": 64, "mtbench": 60}[suite]
    for split in ("eval", "all"):
        with pytest.raises(ValueError, match="training split"):
            select_problems(parse_bench(["pld-sweep", "--suite", suite, "--split", split]))
    # The evaluation split is the complement: HumanEval 0-99, MT-Bench 81-100.
    ids = {p.id for p in load_suite(suite, split="eval")}
    assert len(ids) == {"humaneval": 100, "mtbench": 20}[suite] and not ids & {p.id for p in whole}


def test_pld_sweep_reports_a_winner_that_the_bench_then_uses(tiny_setup, tmp_path):
    from rest_core.bench.suites import load_suite
    from rest_core.commands.bench import run_methods, run_pld_sweep, select_problems

    args, setup = tiny_setup(
        ["pld-sweep", "--limit", "1", "--max-new-tokens", "8", "--values", "2,3", "--warmup", "0", "--no-progress"]
    )
    sweep = tmp_path / "sweep"
    assert run_pld_sweep(setup, select_problems(args), sweep) == 0
    data = json.loads((sweep / "results.json").read_text())
    assert data["kind"] == "pld-sweep" and data["split"] == "train" and data["suite"] == "humaneval"
    assert [r["value"] for r in data["rows"]] == [2, 3] and data["pld_winner"] in (2, 3)
    assert all(r["summary"]["identical_to_ar"] == 1.0 for r in data["rows"])
    fastest = min(data["rows"], key=lambda r: r["summary"]["mean_token_ms"])
    assert data["pld_winner"] == fastest["value"]
    assert "| prompt_lookup_num_tokens |" in (sweep / "results.md").read_text()

    args, setup = tiny_setup(
        [
            "--methods",
            "ar,pld",
            "--limit",
            "1",
            "--max-new-tokens",
            "6",
            "--warmup",
            "0",
            "--no-progress",
            "--pld-k",
            str(sweep),
        ]
    )
    assert run_methods(setup, load_suite("humaneval", 1), tmp_path / "run") == 0
    pld = json.loads((tmp_path / "run" / "results.json").read_text())["pld"]
    assert pld["prompt_lookup_num_tokens"] == data["pld_winner"] and "pld-sweep" in pld["chosen"]
    args, setup = tiny_setup(["--suite", "mtbench", "--methods", "pld", "--pld-k", str(sweep)])
    with pytest.raises(ValueError, match="humaneval, not on mtbench"):
        run_methods(setup, load_suite("mtbench", 1), tmp_path / "wrong")


def test_pld_auto_tunes_on_training_problems(tiny_setup):
    from rest_core.commands.bench import choose_pld_k

    args, setup = tiny_setup(["--pld-k", "auto", "--pld-tune-limit", "2", "--pld-tune-tokens", "4", "--no-progress"])
    k, meta = choose_pld_k(setup)
    assert meta["tuned_on"] == ["HumanEval/100", "HumanEval/101"]
    assert k == meta["prompt_lookup_num_tokens"] and f"pld-k{k}" in meta["candidates"]


def test_ablations_run_from_a_runner_factory_without_argparse(tiny_lm, tiny_store):
    from rest_core.bench.ablations import plan_ablation, run_ablation
    from rest_core.bench.loop import Timing
    from rest_core.bench.runners import RunnerFactory
    from rest_core.bench.suites import load_suite
    from rest_core.config import DraftConfig

    factory = RunnerFactory(tiny_lm.model, tiny_lm.tokenizer, draft=DraftConfig(c=4), open_datastore=lambda: tiny_store)
    plan = plan_ablation("c-sweep", [1, 3], factory, "hybrid")
    outcome = run_ablation(
        plan, load_suite("humaneval", 1), factory, Timing(max_new_tokens=6, warmup=0, progress=False)
    )
    assert [(r.variant, r.value) for r in outcome.rows] == [("c=1", 1), ("c=3", 3)]
    assert all(r.summary.identical_to_ar == 1.0 for r in outcome.rows)
    assert [r.method for r in outcome.result.runs] == ["ar", "c=1", "c=3"]


def test_transformers_runs_stop_on_the_engines_eos_ids(tiny_lm):
    import copy

    from rest_core.bench.runners import RunnerFactory
    from rest_core.decode.engine import Engine

    model = copy.deepcopy(tiny_lm.model)
    model.generation_config.eos_token_id = [10, 11]  # differs from the tokenizer's EOS (256)
    factory = RunnerFactory(model, tiny_lm.tokenizer)
    expected = list(Engine(model, tiny_lm.tokenizer).stop_ids)
    assert expected == [10, 11]
    assert factory.stop_ids == expected and factory.hf_runner("ar").eos_ids == expected


def test_benchmark_modules_import_no_cli_and_no_cycle():
    """ablations / bench know nothing of argparse or the commands, and no import cycle (module- or
    function-level) runs through the benchmark modules; no two classes in the package share a name."""
    import ast
    from collections import Counter
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    graph: dict[str, set[str]] = {}
    classes: Counter[str] = Counter()
    for path in (root / "rest_core").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes[node.name] += 1
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                graph[name] |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    graph = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    bench_modules = (
        "rest_core.bench.ablations",
        "rest_core.bench.loop",
        "rest_core.bench.metrics",
        "rest_core.bench.report",
        "rest_core.bench.runners",
        "rest_core.bench.runs",
    )
    for module in bench_modules:
        imported = graph[module] | _imports(root, module)
        assert "argparse" not in imported and not any(t.startswith("rest_core.commands") for t in imported)

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            for nxt in graph[stack.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                stack.append(nxt)
        return False

    for module in (*bench_modules, "rest_core.commands.bench", "rest_core.bench.suites"):
        assert not reaches(module, module), f"{module} imports itself through a cycle"
    assert [name for name, n in classes.items() if n > 1] == []


def _imports(root, module: str) -> set[str]:
    import ast

    path = root / (module.replace(".", "/") + ".py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_reliability_pools_predictions_per_source_and_bin(tmp_path):
    from dataclasses import replace

    from rest_core.bench.report import write_report

    evs = synthetic_events()
    # Step 1 drafted a 4-node datastore chain and accepted 2; step 2 predicted nothing (fixed budget).
    evs[1] = replace(evs[1], predicted=(0.95, 0.91, 0.35, 0.05))
    mixed = chain([1, 2, 3], SOURCE_CONTEXT)
    evs[2] = replace(evs[2], draft=mixed, predicted=(0.92, 0.5, 0.3), accepted=(0,))
    run = run_from_events(evs, problem_id="p", turn=0, method="hybrid", prompt_tokens=5, wall_ms=80.0)
    s = summarize_method("hybrid", [run])
    rows = {
        k: [(r["lo"], r["n"], round(r["predicted"], 3), r["observed"]) for r in v] for k, v in s.reliability.items()
    }
    assert rows["datastore"] == [(0.0, 1, 0.05, 0.0), (0.3, 1, 0.35, 0.0), (0.9, 2, 0.93, 1.0)]
    assert rows["context"] == [(0.3, 1, 0.3, 0.0), (0.5, 1, 0.5, 0.0), (0.9, 1, 0.92, 1.0)]
    assert rows["all"][-1] == (0.9, 3, round((0.95 + 0.91 + 0.92) / 3, 3), 1.0)
    result = BenchResult([run], {"hybrid": [True]}, [])
    write_report(tmp_path, title="t", summaries={"hybrid": s}, result=result, meta={})
    md = (tmp_path / "results.md").read_text()
    assert "| hybrid | context | 0.9-1.0 | 1 | 0.920 | 1.000 |" in md
    assert "calibration of the auto budget" in (tmp_path / "chart.html").read_text()


def test_profile_command_breaks_a_step_down_and_compares_lazy_with_full_logits(tiny_setup, tmp_path):
    from rest_core.bench.profile import PHASES
    from rest_core.bench.suites import load_suite
    from rest_core.commands.bench import run_profile

    args, setup = tiny_setup(
        [
            "profile",
            "--method",
            "hybrid",
            "--limit",
            "2",
            "--max-new-tokens",
            "12",
            "--c",
            "8",
            "--max-q",
            "8",
            "--warmup",
            "0",
            "--no-progress",
        ]
    )
    assert run_profile(setup, load_suite("humaneval", 2), tmp_path) == 0  # lazy and full outputs identical
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["identical"] is True
    assert set(data["cost_curves"]) == {"full logits", "lazy logits"}
    assert data["cost_curves"]["lazy logits"]["sizes"] == [1, 2, 4, 8]
    lazy, full = data["breakdown"]["lazy logits"], data["breakdown"]["full logits"]
    assert set(lazy["ms"]) == set(PHASES) and lazy["steps"] == full["steps"] > 0
    assert lazy["ms"]["head"] > 0 and full["ms"]["head"] == 0  # the head runs apart only when lazy
    assert lazy["mean_q"] > 1  # drafts were verified
    assert sum(lazy["ms"].values()) == pytest.approx(lazy["step_ms"])
    assert "| head |" in (tmp_path / "results.md").read_text()
