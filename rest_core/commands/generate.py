"""`python -m rest_core generate`: generate text with REST or plain decoding, streamed to the
terminal, or summarised as one JSON object (--json)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rest_core.knobs import add_flags, flag_values, make_config

DEFAULT_DATASTORE = "datastores/chat"
NOT_FLAGS = ("use_datastore",)  # --datastore DIR|none says it


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the prompt text")
    p.add_argument("--chat", action="store_true", help="apply the chat template (the prompt is one user turn)")
    p.add_argument("--method", choices=("rest", "ar"), default="rest", help="rest (default) or plain decoding")
    p.add_argument("--model", default="embedded", help="'embedded' (SmolLM2-135M-Instruct), a hub id or a folder")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="auto", help="auto (float32 on CPU, bf16/fp16 on CUDA), float32, bfloat16, float16")
    p.add_argument(
        "--datastore", default=None,
        help=f"datastore folder; 'none' for no datastore (default: {DEFAULT_DATASTORE} if built)",
    )
    g = p.add_argument_group("settings (default: the device's preset, rest_core.config.PRESETS)")
    add_flags(g, exclude=NOT_FLAGS)
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is much faster on a busy shared CPU)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")


def _default_datastore() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = base / DEFAULT_DATASTORE
        if (candidate / "meta.json").is_file():
            return candidate
    return None


def build_config(args: argparse.Namespace, device_type: str):
    """The GenerationConfig for these arguments: the device's preset with the flags given."""
    from rest_core.config import preset_for_device

    return make_config(flag_values(args, exclude=NOT_FLAGS), preset_for_device(device_type), method=args.method)


def run(args: argparse.Namespace) -> int:
    from rest_core.models import resolve_device

    device = resolve_device(args.device)  # bad device: error before loading anything
    config = build_config(args, device.type)  # bad settings: error before loading anything
    if not args.prompt:
        raise ValueError("the prompt is empty")

    datastore_path: Path | None
    if args.datastore is None:
        datastore_path = _default_datastore() if args.method == "rest" else None
        if datastore_path is None and args.method == "rest":
            print(
                f"warning: no datastore ({DEFAULT_DATASTORE} is not built: `make datastores`); "
                "drafting from the context only" if config.draft.use_context else
                f"warning: no datastore ({DEFAULT_DATASTORE} is not built: `make datastores`); "
                "every step is a plain decoding step",
                file=sys.stderr,
            )
    elif args.datastore.lower() == "none":
        datastore_path = None
    else:
        datastore_path = Path(args.datastore)
        if not datastore_path.exists():
            raise FileNotFoundError(f"datastore not found: {datastore_path}")

    import torch

    from rest_core.engine import Engine, collect
    from rest_core.models import load_model

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)

    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    datastore = None
    if datastore_path is not None:
        from rest_core.datastore import Datastore

        datastore = Datastore.open(datastore_path, lm.tokenizer)
    engine = Engine(lm.model, lm.tokenizer, datastore)
    prompt_ids = engine.encode(args.prompt, chat=args.chat)
    events = engine.generate(prompt_ids, config)

    if args.json:
        result = collect(events, lm.tokenizer)
        print(json.dumps(summary(result, lm, config, datastore_path), ensure_ascii=False))
        return 0

    from rest_core.render import IncrementalDecoder

    # Token by token, but never splitting a multi-byte character across writes.
    out = sys.stdout
    decoder = IncrementalDecoder(lm.tokenizer)
    last = None
    for ev in events:
        for token in ev.tokens:
            piece = decoder.push(token)
            if piece:
                out.write(piece)
        out.flush()
        last = ev
    out.write(decoder.flush())
    out.write("\n")
    if last is not None:
        t = last.totals
        print(
            f"[{config.method}] {t.new_tokens} tokens in {t.steps} steps (M = {t.mean_generated_length:.2f}), "
            f"{t.tokens_per_s:.1f} tokens/s, retrieval {t.retrieval_ms_per_token:.2f} ms/token, "
            f"prefill {t.prefill_ms:.0f} ms, finish: {last.finish_reason}",
            file=sys.stderr,
        )
    return 0


def summary(result, lm, config, datastore_path) -> dict:
    """The --json object."""
    from rest_core.sources import count_origins

    t = result.totals
    per_source = count_origins(s for ev in result.events for s in ev.token_sources)
    del per_source["model"]  # accepted drafts only: "datastore", "context", "both"
    budgets = [ev.budget for ev in result.events]
    return {
        "text": result.text,
        "token_ids": result.token_ids,
        "steps": t.steps,
        "new_tokens": t.new_tokens,
        "prompt_tokens": t.prompt_tokens,
        "mean_generated_length": t.mean_generated_length,
        "tokens_per_s": t.tokens_per_s,
        "mean_token_ms": t.mean_token_ms,
        "retrieval_ms_per_token": t.retrieval_ms_per_token,
        "prefill_ms": t.prefill_ms,
        "decode_s": t.elapsed_s,
        "draft_tokens": t.draft_tokens,
        "accepted_by_source": per_source,
        "mean_budget": sum(budgets) / len(budgets) if budgets else 0.0,
        "finish_reason": result.finish_reason,
        "method": config.method,
        "model": lm.name,
        "device": str(lm.device),
        "dtype": str(lm.dtype).replace("torch.", ""),
        "load_s": lm.load_s,
        "datastore": str(datastore_path) if datastore_path else None,
        "config": {
            "c": config.draft.c,
            "budget": config.draft.budget,
            "use_context": config.draft.use_context,
            "n_min": config.retrieval.n_min,
            "n_max": config.retrieval.n_max,
            "temperature": config.sampling.temperature,
            "top_p": config.sampling.top_p,
            "top_k": config.sampling.top_k,
            "seed": config.sampling.seed,
        },
    }
