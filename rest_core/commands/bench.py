"""`python -m rest_core bench`: time methods on HumanEval / MT-Bench, or run one ablation.

    python -m rest_core bench --suite humaneval --methods ar,pld,rest --limit 20 --max-new-tokens 128
    python -m rest_core bench ablation --kind c-sweep --suite humaneval --limit 8
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rest_core.config import GenerationConfig
from rest_core.knobs import flag_values, make_config

DEFAULT_DATASTORES = {"humaneval": "datastores/code", "mtbench": "datastores/chat"}
NOT_FLAGS = ("use_datastore", "use_context")  # each method sets its sources (bench.ENGINE_METHODS)
FLAG_DEFAULTS = {"max_new_tokens": 128, "seed": 0}  # paper: 512 tokens HumanEval, 1024 MT-Bench
PLD_CANDIDATES = (2, 3, 5, 8, 10)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rest_core.ablations import KINDS
    from rest_core.bench import ALL_METHODS
    from rest_core.knobs import add_flags

    p.add_argument("action", nargs="?", choices=("run", "ablation"), default="run", help="run (default) or ablation")
    p.add_argument("--suite", choices=("humaneval", "mtbench"), default="humaneval")
    p.add_argument("--methods", default="ar,pld,rest", help=f"comma-separated, from {','.join(ALL_METHODS)}")
    p.add_argument("--limit", type=int, default=10, help="number of problems (0 = the whole suite)")
    p.add_argument("--offset", type=int, default=0, help="skip this many problems first")
    p.add_argument("--out", default=None, help="output folder (default bench_results/<suite>-<action>-<time>)")
    g = p.add_argument_group("model")
    g.add_argument("--model", default="embedded", help="embedded, a local folder, a .gguf file or a hub id")
    g.add_argument("--device", default="auto")
    g.add_argument("--dtype", default="auto")
    g.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    p.add_argument("--datastore", default=None, help="datastore folder (default: datastores/code or datastores/chat)")
    g = p.add_argument_group("settings (temperature 0 = greedy; the methods choose the draft sources)")
    add_flags(g, exclude=NOT_FLAGS, base=GenerationConfig(), defaults=FLAG_DEFAULTS)
    g = p.add_argument_group("timing")
    g.add_argument("--warmup", type=int, default=1, help="untimed warm-up generations per method")
    g.add_argument("--repeats", type=int, default=1, help="rounds per problem; each method's fastest run counts")
    g.add_argument("--pld-k", default="auto", help="prompt_lookup_num_tokens, or auto: the fastest of "
                   f"{','.join(map(str, PLD_CANDIDATES))} on --pld-tune-limit problems")
    g.add_argument("--pld-ngram", type=int, default=0, help="max_matching_ngram_size (0 = transformers' default)")
    g.add_argument("--pld-tune-limit", type=int, default=2)
    g.add_argument("--pld-tune-tokens", type=int, default=64)
    g.add_argument("--no-progress", action="store_true")
    g = p.add_argument_group("ablation")
    g.add_argument("--kind", choices=KINDS, default="c-sweep")
    g.add_argument("--values", default=None, help="comma-separated values of the swept parameter")
    g.add_argument("--method", default="rest", help="engine method the ablation varies (rest, hybrid, context)")


def run(args: argparse.Namespace) -> int:
    from rest_core.suites import load_suite

    problems = load_suite(args.suite, args.limit or None, args.offset)
    if not problems:
        raise ValueError("no problems selected (check --limit / --offset)")
    out = Path(args.out or f"bench_results/{args.suite}-{args.action}-{time.strftime('%Y%m%d-%H%M%S')}")
    session = Session.open(args)
    if args.action == "ablation":
        return run_ablation(args, session, problems, out)
    return run_methods(args, session, problems, out)


class Session:
    """Model, tokenizer, engine and (lazily) the datastore, shared by the runners."""

    def __init__(self, args: argparse.Namespace, loaded: Any) -> None:
        self.args = args
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self._datastore: Any = None
        self._engines: dict[int, Any] = {}
        from rest_core.bench import git_commit

        self.git_commit = git_commit()  # the code that runs, read before it runs

    @classmethod
    def open(cls, args: argparse.Namespace) -> "Session":
        import torch

        from rest_core.models import load_model

        if args.threads:
            torch.set_num_threads(args.threads)
        return cls(args, load_model(args.model, args.device, args.dtype))

    @property
    def datastore(self) -> Any:
        if self._datastore is None:
            from rest_core.datastore import Datastore

            path = self.args.datastore or DEFAULT_DATASTORES[self.args.suite]
            if not Path(path).is_dir():
                raise FileNotFoundError(
                    f"datastore {path} not found: build it with `make datastores` or pass --datastore"
                )
            self._datastore = Datastore.open(path, self.tokenizer)
        return self._datastore

    def engine(self, datastore: Any = None) -> Any:
        from rest_core.engine import Engine

        key = id(datastore)
        if key not in self._engines:
            # No KV reuse across calls: every method prefills its whole prompt, as transformers does.
            self._engines[key] = Engine(self.model, self.tokenizer, datastore, reuse_cache=False)
        return self._engines[key]

    def encode(self, prompt: Any, chat: bool) -> list[int]:
        return list(self.engine(None).encode(prompt, chat))

    def decode(self, ids: Any) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    @property
    def eos_ids(self) -> list[int]:
        from rest_core.bench import eos_token_ids

        return eos_token_ids(self.model, self.tokenizer)

    # -- settings ---------------------------------------------------------------------------

    def config(self) -> GenerationConfig:
        """The flags' settings (n_min capped at n_max, so that --n-max 1 alone is valid)."""
        values = flag_values(self.args, exclude=NOT_FLAGS)
        return make_config(values | {"n_min": min(values["n_min"], values["n_max"])})

    def retrieval(self, **changes: Any):
        return replace(self.config().retrieval, **changes)

    def draft(self, **changes: Any):
        return replace(self.config().draft, **changes)

    def sampling(self):
        return self.config().sampling

    def settings(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"retrieval": asdict(self.retrieval()), "draft": asdict(self.draft()), "sampling": asdict(self.sampling())}

    # -- runners ----------------------------------------------------------------------------

    def hf_runner(self, name: str = "ar", k: int | None = None):
        from rest_core.bench import HFRunner

        return HFRunner(
            self.model,
            self.tokenizer,
            name=name,
            sampling=self.sampling(),
            prompt_lookup_num_tokens=k,
            max_matching_ngram_size=self.args.pld_ngram or None,
        )

    def engine_runner(self, method: str, *, name: str | None = None, datastore: Any = None,
                      retrieval: Any = None, draft: Any = None):
        from rest_core.bench import ENGINE_METHODS, EngineRunner, engine_config

        needs_store = method in ENGINE_METHODS and ENGINE_METHODS[method][0]
        store = datastore if datastore is not None else (self.datastore if needs_store else None)
        config = engine_config(
            method, retrieval=retrieval or self.retrieval(), draft=draft or self.draft(), sampling=self.sampling()
        )
        return EngineRunner(self.engine(store), config, name=name or method)

    def meta(self, problems: list, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        from rest_core.bench import now_utc

        a = self.args
        store = None
        if self._datastore is not None:
            store = {"path": str(self._datastore.path), "n_tokens": self._datastore.n_tokens,
                     "n_documents": self._datastore.n_documents}
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
            "settings": self.settings(),
            "datastore": store,
            "command": "python -m rest_core bench " + " ".join(shlex.quote(x) for x in sys.argv[2:])
            if len(sys.argv) > 1 and sys.argv[1] == "bench" else " ".join(shlex.quote(x) for x in sys.argv),
            **(extra or {}),
        }


# --------------------------------------------------------------------------------------------


def tune_pld(session: Session, problems: list, *, limit: int, max_new_tokens: int, progress: bool) -> tuple[int, dict]:
    """Fastest prompt_lookup_num_tokens on the first `limit` problems (first turns), same run."""
    from rest_core.bench import run_benchmark, summarize

    runners = [session.hf_runner(f"pld-k{k}", k) for k in PLD_CANDIDATES]
    single = [type(p)(p.id, p.kind, p.turns[:1], p.category) for p in problems[:limit]]
    for r in runners:  # warm-up
        warm_up(session, r, single[0], 8)
    result = run_benchmark(
        single, runners, encode=session.encode, decode=session.decode, max_new_tokens=max_new_tokens,
        eos_ids=session.eos_ids, greedy=False, progress=progress,
    )
    summaries = summarize(result)
    table = {name: {"mean_token_ms": s.mean_token_ms, "M": s.mean_generated_length} for name, s in summaries.items()}
    best = min(summaries.values(), key=lambda s: s.mean_token_ms)
    return int(best.method.removeprefix("pld-k")), {
        "tuned_on": [p.id for p in single], "tune_max_new_tokens": max_new_tokens, "candidates": table,
    }


def warm_up(session: Session, runner: Any, problem: Any, tokens: int) -> None:
    if problem.kind == "chat":
        ids = session.encode([{"role": "user", "content": problem.turns[0]}], True)
    else:
        ids = session.encode(problem.turns[0], False)
    runner.run(ids, tokens, 0)


def run_methods(args: argparse.Namespace, session: Session, problems: list, out: Path) -> int:
    from rest_core.bench import (
        ALL_METHODS, ENGINE_METHODS, markdown_table, print_differences, run_benchmark, summarize, write_report,
    )

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(ALL_METHODS)}")
    progress = not args.no_progress
    pld_meta: dict[str, Any] = {}
    runners = []
    for m in methods:
        if m == "ar":
            runners.append(session.hf_runner("ar"))
        elif m == "pld":
            if args.pld_k == "auto":
                k, info = tune_pld(session, problems, limit=args.pld_tune_limit,
                                   max_new_tokens=min(args.pld_tune_tokens, args.max_new_tokens), progress=progress)
                pld_meta = {"prompt_lookup_num_tokens": k, "chosen": "auto", **info}
            else:
                k = int(args.pld_k)
                pld_meta = {"prompt_lookup_num_tokens": k, "chosen": "fixed"}
            pld_meta["max_matching_ngram_size"] = args.pld_ngram or "transformers default"
            print(f"pld: prompt_lookup_num_tokens={k} ({pld_meta['chosen']})", file=sys.stderr)
            runners.append(session.hf_runner("pld", k))
        elif m in ENGINE_METHODS or m == "ar-loop":
            runners.append(session.engine_runner(m))
    for r in runners:
        for _ in range(args.warmup):
            warm_up(session, r, problems[0], min(16, args.max_new_tokens))
    greedy = args.temperature == 0
    result = run_benchmark(
        problems, runners, encode=session.encode, decode=session.decode, max_new_tokens=args.max_new_tokens,
        eos_ids=session.eos_ids, greedy=greedy, seed=args.seed, progress=progress, repeats=args.repeats,
    )
    summaries = summarize(result)
    mode = "greedy" if greedy else f"T={args.temperature} top-p={args.top_p}"
    title = f"{args.suite}: {', '.join(methods)} ({session.loaded.name}, {mode}, {len(problems)} problems)"
    written = write_report(out, title=title, summaries=summaries, result=result,
                           meta=session.meta(problems, {"methods_order": methods, "pld": pld_meta}))
    print(markdown_table(summaries))
    print_differences(result)
    print("wrote " + ", ".join(written))
    return 1 if greedy and result.differences else 0


def run_ablation(args: argparse.Namespace, session: Session, problems: list, out: Path) -> int:
    from rest_core import ablations

    return ablations.run_kind(args, session, problems, out)


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()
