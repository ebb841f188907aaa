"""Command line: `python -m rest_core COMMAND ...`.

Each command lives in `rest_core/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`. Command modules keep heavy imports (torch, transformers) inside `run`,
so `--help` stays instant. A command module with `PASSTHROUGH = True` takes flags it does not
know as `args.passthrough` (`serve` hands them to vLLM); any other command refuses them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "datastore": ("rest_core.commands.datastore", "build or inspect a datastore"),
    "bench-retrieval": ("rest_core.commands.bench_retrieval", "time retrieval + trie + tree per step"),
    "generate": ("rest_core.commands.generate", "generate text with REST or plain decoding"),
    "bench": ("rest_core.commands.bench", "benchmark suites and ablations (HumanEval, MT-Bench)"),
    "serve": (
        "rest_core.commands.serve",
        "vLLM's OpenAI-compatible server with REST drafting (vLLM flags pass through)",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rest_core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _passthrough=bool(getattr(module, "PASSTHROUGH", False)))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not args._passthrough:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.passthrough = extra
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as exc:
        # Clear one-line errors for bad input and for the file system saying no (missing or
        # unreadable paths, a full disk, no permission); tracebacks are for bugs.
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return 2
