"""`python -m rest_core bench`: time methods on HumanEval / MT-Bench, run one ablation, or sweep
prompt lookup's k on the training split.

    python -m rest_core bench --suite humaneval --methods ar,pld,rest --limit 20 --max-new-tokens 128
    python -m rest_core bench ablation --kind c-sweep --suite humaneval --limit 8
    python -m rest_core bench pld-sweep --suite humaneval --limit 10 --out bench_results/pld-humaneval
    python -m rest_core bench --suite humaneval --pld-k bench_results/pld-humaneval/results.json
    python -m rest_core bench profile --suite humaneval --method hybrid --limit 3 --max-new-tokens 64
    python -m rest_core bench --engine vllm --batch 1,8,32 --split eval --offset 10 --limit 0 --rounds 3
    python -m rest_core bench ngram-sweep --engine vllm --suite humaneval --limit 10 --out bench_results/ngram-humaneval

`--engine vllm` serves the same prompts with vLLM (its own environment, `make serve-env`) at
each --batch size: `rest_core.bench.vllm_bench`. Knob flags left out (--c, --budget, --n-max, ...) take the device's preset (`config.PRESETS`:
"cpu" or "gpu"), the same defaults as the app and `generate`.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rest_core.bench.suites import SPLITS, SUITES
from rest_core.knobs import flag_values, make_config
from rest_core.serve.settings import DEFAULT_ANSWERS

DEFAULT_DATASTORES = {"humaneval": "datastores/code", "mtbench": "datastores/chat", "sharegpt": "datastores/chat"}
NOT_FLAGS = ("use_datastore", "use_context")  # each method sets its sources (runners.ENGINE_METHODS)
FLAG_DEFAULTS = {"max_new_tokens": 128, "seed": 0}  # paper: 512 tokens HumanEval, 1024 MT-Bench
PLD_CANDIDATES = (2, 3, 5, 8, 10)
ACTIONS = ("run", "ablation", "pld-sweep", "profile", "ngram-sweep")
HF_DEFAULT_METHODS = "ar,pld,rest"
VLLM_DEFAULT_METHODS = "ar,ngram,suffix,suffix-nocache,rest,hybrid"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rest_core.bench.runners import ALL_METHODS

    p.add_argument(
        "action",
        nargs="?",
        choices=ACTIONS,
        default="run",
        help="run (default), ablation, pld-sweep (prompt lookup's k on the training split), "
        "profile (where a step's time goes, lazy against full logits), or ngram-sweep (--engine vllm: "
        "vLLM's ngram drafter's best settings on the training split)",
    )
    p.add_argument("--suite", choices=SUITES, default="humaneval")
    p.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated, from {','.join(ALL_METHODS)} (default ar,pld,rest); "
        f"with --engine vllm from {VLLM_DEFAULT_METHODS} (default: all)",
    )
    p.add_argument(
        "--engine",
        choices=("hf", "vllm"),
        default="hf",
        help="hf (default): transformers and this project's engine; vllm: vLLM with its drafters and REST as its proposer",
    )
    p.add_argument("--limit", type=int, default=10, help="number of problems (0 = the whole suite)")
    p.add_argument("--offset", type=int, default=0, help="skip this many problems first (within --split)")
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="all (default), eval (HumanEval 0-99, MT-Bench 81-100) or train (the rest; pld-sweep's only split)",
    )
    p.add_argument("--out", default=None, help="output folder (default bench_results/<suite>-<action>-<time>)")
    _add_model_and_settings(p)
    _add_timing(p)
    _add_ablation_and_vllm(p)


def _add_model_and_settings(p: argparse.ArgumentParser) -> None:
    from rest_core.knobs import add_flags

    g = p.add_argument_group("model")
    g.add_argument("--model", default="embedded", help="embedded, a local folder, a .gguf file or a hub id")
    g.add_argument("--device", default="auto")
    g.add_argument("--dtype", default="auto")
    g.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    p.add_argument("--datastore", default=None, help="datastore folder (default: datastores/code or datastores/chat)")
    g = p.add_argument_group("settings (temperature 0 = greedy; the methods choose the draft sources)")
    # Knob flags left out stay None and take the device's preset once the device is known
    # (`settings_from_args`); max_new_tokens and seed have the bench's own defaults.
    add_flags(g, exclude=NOT_FLAGS, defaults=FLAG_DEFAULTS)


def _add_timing(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("timing")
    g.add_argument("--warmup", type=int, default=1, help="untimed warm-up generations per method")
    g.add_argument("--repeats", type=int, default=1, help="rounds per problem; each method's fastest run counts")
    g.add_argument(
        "--pld-k",
        default="auto",
        help="prompt_lookup_num_tokens: a number; the results.json (or folder) "
        "of a `bench pld-sweep`, whose winner is used; or auto: the fastest of "
        f"{','.join(map(str, PLD_CANDIDATES))} on --pld-tune-limit training problems",
    )
    g.add_argument("--pld-ngram", type=int, default=0, help="max_matching_ngram_size (0 = transformers' default)")
    g.add_argument("--pld-tune-limit", type=int, default=2)
    g.add_argument("--pld-tune-tokens", type=int, default=64)
    g.add_argument("--no-progress", action="store_true")


def _add_ablation_and_vllm(p: argparse.ArgumentParser) -> None:
    from rest_core.bench.ablations import KINDS

    g = p.add_argument_group("ablation")
    g.add_argument("--kind", choices=KINDS, default="c-sweep")
    g.add_argument(
        "--values",
        default=None,
        help="comma-separated values of the swept parameter (pld-sweep: k values, default 2..10)",
    )
    g.add_argument(
        "--method", default="rest", help="engine method the ablation (or profile) runs (rest, hybrid, context)"
    )
    g.add_argument("--max-q", type=int, default=64, help="profile: the forward-cost curve's largest size")
    g = p.add_argument_group("vLLM (--engine vllm)")
    g.add_argument(
        "--batch", default="1", help="comma-separated batch sizes: requests in flight together (e.g. 1,8,32)"
    )
    g.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds: every method once per round, each on a fresh engine; medians over rounds",
    )
    g.add_argument(
        "--requests-per-batch",
        type=int,
        default=2,
        metavar="N",
        help="batch size B asks max(N x B, --min-requests) distinct prompts; no engine sees a prompt twice",
    )
    g.add_argument("--min-requests", type=int, default=10, help="the fewest prompts a batch size asks (batch 1)")
    g.add_argument(
        "--spec-k",
        type=int,
        default=16,
        help="num_speculative_tokens of rest, hybrid and suffix: their longest draft per step",
    )
    g.add_argument(
        "--answers-tokens",
        type=int,
        default=DEFAULT_ANSWERS,
        metavar="N",
        help=f"hybrid's earlier answers kept per namespace (0: not a source; default {DEFAULT_ANSWERS}); each pass "
        "and round of the prompts drafts only from its own",
    )
    g.add_argument(
        "--ngram",
        default=None,
        metavar="K:N|RESULTS",
        help="vLLM ngram's num_speculative_tokens:prompt_lookup_max, or an ngram-sweep's results.json (its winner)",
    )


def run(args: argparse.Namespace) -> int:
    from rest_core.bench.report import git_commit
    from rest_core.decode.models import resolve_device

    commit = git_commit()  # the code that runs, read before it runs
    if args.engine == "vllm":
        return run_vllm(args, commit)
    if args.action == "ngram-sweep":
        raise ValueError(
            "ngram-sweep sweeps vLLM's ngram drafter: add --engine vllm (pld-sweep is transformers' prompt lookup)"
        )
    args.methods = args.methods or HF_DEFAULT_METHODS
    problems = select_problems(args)
    device = resolve_device(args.device)  # bad device or settings: an error before loading the model
    settings = settings_from_args(args, device.type)
    out = Path(args.out or f"bench_results/{args.suite}-{args.action}-{time.strftime('%Y%m%d-%H%M%S')}")
    setup = BenchSetup.open(args, settings, commit)
    actions = {"run": run_methods, "ablation": run_ablation, "pld-sweep": run_pld_sweep, "profile": run_profile}
    return actions[args.action](setup, problems, out)


def select_problems(args: argparse.Namespace) -> list:
    """The problems of this call. pld-sweep and ngram-sweep tune, so they run on the training split only."""
    from rest_core.bench.suites import load_suite

    tuning = args.action in ("pld-sweep", "ngram-sweep")
    split = args.split or ("train" if tuning else "all")
    if tuning and split != "train":
        raise ValueError(f"{args.action} tunes a drafter, so it runs on the training split only (--split train)")
    problems = load_suite(args.suite, args.limit or None, args.offset, split)
    if not problems:
        raise ValueError("no problems selected (check --limit / --offset / --split)")
    return problems


def settings_from_args(args: argparse.Namespace, device_type: str) -> tuple[Any, Any, Any]:
    """(retrieval, draft, sampling): the device's preset, with the knob flags given replacing its values."""
    from rest_core.config import preset_for_device

    preset = preset_for_device(device_type)
    given = flag_values(args, exclude=NOT_FLAGS)
    if "n_max" in given and "n_min" not in given:  # a short n_max alone lowers the preset's n_min with it
        given["n_min"] = min(preset.retrieval.n_min, given["n_max"])
    config = make_config(given, preset)
    return config.retrieval, config.draft, config.sampling


def run_vllm(args: argparse.Namespace, commit: str | None) -> int:
    """`--engine vllm`: run (every method at every --batch) or ngram-sweep; vLLM in its own environment."""
    from rest_core.bench import vllm_bench
    from rest_core.bench.report import now_utc

    if args.action not in ("run", "ngram-sweep"):
        raise ValueError(f"--engine vllm runs the benchmark or ngram-sweep, not {args.action}")
    args.methods = args.methods or VLLM_DEFAULT_METHODS
    args.datastore = args.datastore or DEFAULT_DATASTORES[args.suite]
    problems = select_problems(args)
    out = Path(args.out or f"bench_results/vllm-{args.suite}-{args.action}-{time.strftime('%Y%m%d-%H%M%S')}")
    meta = {
        "date": now_utc(),
        "git_commit": commit,
        "suite": args.suite,
        "problems_run": f"{len(problems)} ({problems[0].id} .. {problems[-1].id})",
        "problem_ids": [p.id for p in problems],
        "model": args.model,
        "device": args.device,
        "max_new_tokens": args.max_new_tokens,
        "command": _command_line(),
    }
    if args.action == "ngram-sweep":
        return vllm_bench.sweep_ngram(args, problems, out, meta)
    return vllm_bench.run(args, problems, out, meta)


@dataclass
class BenchSetup:
    """What every action of one call shares: the flags, the loaded model, its runner factory."""

    args: argparse.Namespace
    loaded: Any
    factory: Any  # runners.RunnerFactory
    git_commit: str | None = None

    @classmethod
    def open(cls, args: argparse.Namespace, settings: tuple[Any, Any, Any], commit: str | None) -> BenchSetup:
        import torch

        from rest_core.decode.models import load_model

        if args.threads:
            torch.set_num_threads(args.threads)
        return cls.build(args, load_model(args.model, args.device, args.dtype), settings, commit=commit)

    @classmethod
    def build(
        cls,
        args: argparse.Namespace,
        loaded: Any,
        settings: tuple[Any, Any, Any] | None = None,
        *,
        open_datastore: Any = None,
        commit: str | None = None,
    ) -> BenchSetup:
        """From a loaded model; `settings` default to the flags over the model's device preset."""
        from rest_core.bench.runners import RunnerFactory

        retrieval, draft, sampling = settings or settings_from_args(args, loaded.device.type)
        factory = RunnerFactory(
            loaded.model,
            loaded.tokenizer,
            retrieval,
            draft,
            sampling,
            open_datastore=open_datastore or (lambda: open_datastore_for(args, loaded.tokenizer)),
            pld_ngram=args.pld_ngram or None,
        )
        return cls(args, loaded, factory, commit)

    @property
    def timing(self) -> Any:
        from rest_core.bench.loop import Timing

        a = self.args
        return Timing(
            max_new_tokens=a.max_new_tokens, warmup=a.warmup, repeats=a.repeats, seed=a.seed, progress=not a.no_progress
        )

    def meta(self, problems: list, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        from rest_core.bench.report import now_utc

        a, store = self.args, self.factory.opened_datastore
        if store is not None:
            store = {"path": str(store.path), "n_tokens": store.n_tokens, "n_documents": store.n_documents}
        device_type = self.loaded.device.type
        given = [k for k in flag_values(a, exclude=NOT_FLAGS) if k not in FLAG_DEFAULTS]
        return {
            "date": now_utc(),
            "git_commit": self.git_commit,
            "suite": a.suite,
            "problems_run": f"{len(problems)} ({problems[0].id} .. {problems[-1].id})",
            "problem_ids": [p.id for p in problems],
            "model": self.loaded.name,
            "device": str(self.loaded.device),
            "dtype": str(self.loaded.dtype).replace("torch.", ""),
            "max_new_tokens": a.max_new_tokens,
            "repeats": a.repeats,
            "torch_threads": _torch_threads(),
            "preset": _preset_name(device_type) + (f" with {', '.join(given)} from flags" if given else ""),
            "settings": self.factory.settings(),
            "datastore": store,
            "command": _command_line(),
            **(extra or {}),
        }


def open_datastore_for(args: argparse.Namespace, tokenizer: Any) -> Any:
    from rest_core.store.datastore import Datastore
    from rest_core.store.held_out import check_store_for_suite

    path = args.datastore or DEFAULT_DATASTORES[args.suite]
    if not Path(path).is_dir():
        raise FileNotFoundError(f"datastore {path} not found: build it with `make datastores` or pass --datastore")
    check_store_for_suite(args.suite, str(path))
    return Datastore.open(path, tokenizer)


# --------------------------------------------------------------------------------------------
# Actions


def run_methods(setup: BenchSetup, problems: list, out: Path) -> int:
    from rest_core.bench.loop import measure
    from rest_core.bench.metrics import summarize
    from rest_core.bench.report import markdown_table, print_differences, write_report
    from rest_core.bench.runners import ALL_METHODS

    args, factory = setup.args, setup.factory
    methods = [m.strip() for m in (args.methods or HF_DEFAULT_METHODS).split(",") if m.strip()]
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(ALL_METHODS)}")
    pld_meta: dict[str, Any] = {}
    runners = []
    for m in methods:
        if m == "pld":
            k, pld_meta = choose_pld_k(setup)
            print(f"pld: prompt_lookup_num_tokens={k} ({pld_meta['chosen']})", file=sys.stderr)
            runners.append(factory.hf_runner("pld", k))
        else:
            runners.append(factory.hf_runner("ar") if m == "ar" else factory.engine_runner(m))
    result = measure(problems, runners, factory, setup.timing)
    summaries = summarize(result)
    greedy = factory.sampling.greedy
    mode = "greedy" if greedy else f"T={args.temperature} top-p={args.top_p}"
    title = f"{args.suite}: {', '.join(methods)} ({setup.loaded.name}, {mode}, {len(problems)} problems)"
    written = write_report(
        out,
        title=title,
        summaries=summaries,
        result=result,
        meta=setup.meta(problems, {"methods_order": methods, "pld": pld_meta}),
    )
    print(markdown_table(summaries))
    print_differences(result)
    print("wrote " + ", ".join(written))
    return 1 if greedy and result.differences else 0


def run_ablation(setup: BenchSetup, problems: list, out: Path) -> int:
    from rest_core.bench import ablations

    args = setup.args
    values = _values(args.values, ablations.DEFAULT_VALUES[args.kind])
    plan = ablations.plan_ablation(args.kind, values, setup.factory, args.method, seed=args.seed)
    outcome = ablations.run_ablation(plan, problems, setup.factory, setup.timing)
    title = (
        f"ablation {args.kind}: {args.method} on {args.suite}, {len(problems)} problems x {args.max_new_tokens} tokens"
    )
    meta = setup.meta(
        problems, {"kind": args.kind, "method": args.method, "values": [_int_or_float(v) for v in values]}
    )
    meta.pop("problem_ids", None)
    written = ablations.write_outcome(out, outcome, title=title, meta=meta)
    print("wrote " + ", ".join(written))
    return 1 if outcome.result.differences else 0


def run_pld_sweep(setup: BenchSetup, problems: list, out: Path) -> int:
    """prompt_lookup_num_tokens = each of --values (default 2..10) against `ar` on training
    problems; writes the sweep and its winner, which `--pld-k <out>/results.json` then uses."""
    from rest_core.bench import ablations

    args = setup.args
    ks = [int(v) for v in _values(args.values, ablations.PLD_SWEEP_KS)]
    plan = ablations.pld_sweep_plan(setup.factory, ks)
    outcome = ablations.run_ablation(plan, problems, setup.factory, setup.timing)
    winner = ablations.best_pld_k(outcome.rows)
    title = (
        f"prompt lookup sweep on {args.suite} (training split), {len(problems)} problems x {args.max_new_tokens} tokens"
    )
    meta = setup.meta(problems, {"kind": "pld-sweep", "split": "train", "values": ks, "pld_winner": winner})
    written = ablations.write_outcome(out, outcome, title=title, meta=meta)
    print(f"pld-sweep winner: prompt_lookup_num_tokens={winner}; use it with --pld-k {out / 'results.json'}")
    print("wrote " + ", ".join(written))
    return 1 if outcome.result.differences else 0


def run_profile(setup: BenchSetup, problems: list, out: Path) -> int:
    """One method's steps phase by phase, with lazy logits and with the full head, interleaved
    per problem (first turns), and both forward-cost curves; exit 1 if the outputs differ."""
    import json

    from rest_core.bench import profile
    from rest_core.bench.loop import first_turn_ids
    from rest_core.bench.runners import ENGINE_METHODS, engine_config
    from rest_core.decode.engine import Engine

    args, f = setup.args, setup.factory
    if args.method not in ENGINE_METHODS:
        raise ValueError(f"--method must be an engine method ({', '.join(ENGINE_METHODS)}), got {args.method!r}")
    config = replace(
        engine_config(args.method, retrieval=f.retrieval, draft=f.draft, sampling=f.sampling),
        max_new_tokens=args.max_new_tokens,
    )
    store = f.datastore if ENGINE_METHODS[args.method][0] else None
    engines = {
        "lazy logits": Engine(f.model, f.tokenizer, store, reuse_cache=False),
        "full logits": Engine(f.model, f.tokenizer, store, reuse_cache=False, lazy_logits=False),
    }
    head = engines["lazy logits"].output_head()
    if head is None:
        print("this model's head cannot be split off: both engines run the full forward", file=sys.stderr)
    prompts = [first_turn_ids(p, f.encode) for p in problems]
    events, outputs = profile.run_engines(engines, prompts, config, warmup=args.warmup)
    curves = profile.cost_curves(f.model, head, args.max_q)
    parts = {name: profile.breakdown(evs) for name, evs in events.items()}
    identical = outputs["lazy logits"] == outputs["full logits"]
    title = f"profile: {args.method} on {args.suite}, {len(problems)} first turns x {args.max_new_tokens} tokens"
    md, data = profile.report(
        title, curves, parts, identical, setup.meta(problems, {"kind": "profile", "method": args.method})
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(md)
    (out / "results.json").write_text(json.dumps(data, indent=2, default=str))
    print(md)
    print(f"wrote {out / 'results.md'}, {out / 'results.json'}")
    return 0 if identical else 1


# --------------------------------------------------------------------------------------------
# Prompt lookup's k for a run


def choose_pld_k(setup: BenchSetup) -> tuple[int, dict[str, Any]]:
    """(k, how it was chosen) from --pld-k: a number, a pld-sweep's results, or auto."""
    args = setup.args
    value = str(args.pld_k)
    if value == "auto":
        k, info = tune_pld(setup)
        meta = {"prompt_lookup_num_tokens": k, "chosen": "auto", **info}
    elif value.isdigit():
        k = int(value)
        if k < 1:
            raise ValueError(f"--pld-k must be >= 1, got {k}")
        meta = {"prompt_lookup_num_tokens": k, "chosen": "fixed"}
    else:
        k, source = pld_k_from_sweep(Path(value), args.suite)
        meta = {"prompt_lookup_num_tokens": k, "chosen": f"pld-sweep winner ({source})"}
    meta["max_matching_ngram_size"] = args.pld_ngram or "transformers default"
    return k, meta


def pld_k_from_sweep(path: Path, suite: str) -> tuple[int, str]:
    """The winning k of a `bench pld-sweep` (its results.json, or the folder holding it)."""
    import json

    file = path / "results.json" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"--pld-k must be a number, auto, or a pld-sweep's results.json; {path} does not exist")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file} is not a JSON file: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "pld-sweep" or "pld_winner" not in data:
        raise ValueError(f"{file} is not the results of `bench pld-sweep`")
    if data.get("suite") != suite:
        raise ValueError(f"{file} swept prompt lookup on {data.get('suite')}, not on {suite}")
    return int(data["pld_winner"]), str(file)


def tune_pld(setup: BenchSetup) -> tuple[int, dict[str, Any]]:
    """Fastest of PLD_CANDIDATES on the first --pld-tune-limit training problems (first turns
    only, --pld-tune-tokens each): a quick stand-in for a full `bench pld-sweep`."""
    from rest_core.bench import ablations
    from rest_core.bench.loop import Timing
    from rest_core.bench.suites import load_suite

    args = setup.args
    train = load_suite(args.suite, args.pld_tune_limit or None, 0, "train")
    single = [replace(p, turns=p.turns[:1]) for p in train]
    tokens = min(args.pld_tune_tokens, args.max_new_tokens)
    plan = replace(ablations.pld_sweep_plan(setup.factory, PLD_CANDIDATES), with_ar=False)  # speed only
    timing = Timing(max_new_tokens=tokens, warmup=1, seed=0, progress=not args.no_progress)
    outcome = ablations.run_ablation(plan, single, setup.factory, timing)
    table = {
        r.variant: {"mean_token_ms": r.summary.mean_token_ms, "M": r.summary.mean_generated_length}
        for r in outcome.rows
    }
    return ablations.best_pld_k(outcome.rows), {
        "tuned_on": [p.id for p in single],
        "tune_max_new_tokens": tokens,
        "candidates": table,
    }


# --------------------------------------------------------------------------------------------


def _values(text: str | None, default: Any) -> list[float]:
    if not text:
        return list(default)
    try:
        return [_number(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--values must be comma-separated numbers (or fractions like 1/8), got {text!r}") from None


def _number(text: str) -> float:
    if "/" in text:
        num, den = text.split("/")
        return float(num) / float(den)
    return float(text)


def _int_or_float(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _preset_name(device_type: str) -> str:
    from rest_core.config import PRESETS, preset_for_device

    preset = preset_for_device(device_type)
    return next(name for name, config in PRESETS.items() if config is preset)


def _command_line() -> str:
    if len(sys.argv) > 1 and sys.argv[1] == "bench":
        return "python -m rest_core bench " + " ".join(shlex.quote(x) for x in sys.argv[2:])
    return " ".join(shlex.quote(x) for x in sys.argv)


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()
