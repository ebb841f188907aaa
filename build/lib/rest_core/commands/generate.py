"""`python -m rest_core generate`: generate text with REST or plain decoding, streamed to the
terminal, or summarised as one JSON object (--json)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from rest_core.knobs import add_flags, flag_values, make_config
from rest_core.sources import DEFAULT_SOURCES, SourceTable, count_origins

DEFAULT_DATASTORE = "datastores/chat"
NOT_FLAGS = ("use_datastore",)  # --datastore DIR|none says it


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the prompt text")
    p.add_argument("--chat", action="store_true", help="apply the chat template (the prompt is one user turn)")
    p.add_argument("--method", choices=("rest", "ar"), default="rest", help="rest (default) or plain decoding")
    p.add_argument("--model", default="embedded", help="'embedded' (SmolLM2-135M-Instruct), a hub id or a folder")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")
    p.add_argument(
        "--dtype", default="auto", help="auto (float32 on CPU, bf16/fp16 on CUDA), float32, bfloat16, float16"
    )
    p.add_argument(
        "--datastore",
        action="append",
        default=None,
        metavar="STORE",
        help="a datastore: a name under --datastores, a folder, or NAME=FOLDER; ':WEIGHT' after it sets its share "
        "(e.g. code:2). Repeat for several stores drafting together (at most 6); 'none' for no datastore "
        f"(default: {DEFAULT_DATASTORE} if built)",
    )
    p.add_argument(
        "--datastores",
        default=None,
        metavar="DIR",
        help="the folder of named datastores (default: ./datastores, else the repository's)",
    )
    g = p.add_argument_group("settings (default: the device's preset, rest_core.config.PRESETS)")
    add_flags(g, exclude=NOT_FLAGS)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice; 1 is much faster on a busy shared CPU)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")


def _default_datastore() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = base / DEFAULT_DATASTORE
        if (candidate / "meta.json").is_file():
            return candidate
    return None


@dataclass(frozen=True)
class StoreSpec:
    """One --datastore value, resolved: the store's name, folder and share of the weight."""

    name: str
    path: Path
    weight: float = 1.0


def _store_folders(folder: str | None) -> list[Path]:
    if folder is not None:
        return [Path(folder)]
    bases = dict.fromkeys((Path.cwd().resolve(), Path(__file__).resolve().parents[2]))  # once when they are one
    return [base / Path(DEFAULT_DATASTORE).parent for base in bases]


def parse_store(value: str, folders: list[Path]) -> StoreSpec:
    """NAME | FOLDER | NAME=FOLDER, each optionally followed by :WEIGHT. A bare word that is
    not a folder is looked up under `folders`; a store is named after its folder unless NAME= says."""
    name, where = value.split("=", 1) if "=" in value else ("", value)
    weight = 1.0
    head, colon, tail = where.rpartition(":")
    if colon and head:
        try:
            weight = float(tail)
        except ValueError:
            pass  # a ':' that is part of the path
        else:
            where = head
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"--datastore {value}: the weight must be a finite number >= 0")
    if not where:
        raise ValueError(f"--datastore {value!r}: no datastore given")
    path = Path(where)
    if not path.exists() and len(path.parts) == 1:
        path = next((f / where for f in folders if (f / where).exists()), path)
    if not path.exists():
        looked = ", ".join(str(f) for f in folders)
        raise FileNotFoundError(f"datastore not found: {where} (not a folder, nor a store under {looked})")
    return StoreSpec(name or path.name, path, weight)


def store_specs(values: list[str] | None, folder: str | None) -> list[StoreSpec] | None:
    """The stores the --datastore values ask for; None when none was given (the default store
    applies), [] for 'none'."""
    if values is None:
        return None
    if any(v.strip().lower() == "none" for v in values):
        if len(values) > 1:
            raise ValueError("--datastore none cannot be combined with other datastores")
        return []
    folders = _store_folders(folder)
    specs = [parse_store(v, folders) for v in values]
    names = [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"two datastores are named {dup!r}: name them with NAME=FOLDER")
    return specs


def build_config(args: argparse.Namespace, device_type: str):
    """The GenerationConfig for these arguments: the device's preset with the flags given."""
    from rest_core.config import preset_for_device

    return make_config(flag_values(args, exclude=NOT_FLAGS), preset_for_device(device_type), method=args.method)


def run(args: argparse.Namespace) -> int:
    from rest_core.decode.models import resolve_device

    device = resolve_device(args.device)  # bad device: error before loading anything
    config = build_config(args, device.type)  # bad settings: error before loading anything
    if not args.prompt:
        raise ValueError("the prompt is empty")

    specs = store_specs(args.datastore, args.datastores)  # bad or missing stores: error before loading anything
    if specs is None:
        specs = _default_specs(args, config)
    if specs:
        config = replace(config, draft=replace(config.draft, stores=tuple((s.name, s.weight) for s in specs)))

    lm, engine = _load_engine(args, specs)
    prompt_ids = engine.encode(args.prompt, chat=args.chat)
    events = engine.generate(prompt_ids, config)

    if args.json:
        from rest_core.decode.engine import collect

        result = collect(events, lm.tokenizer)
        print(json.dumps(summary(result, lm, config, specs, engine.source_table), ensure_ascii=False))
        return 0
    _stream(events, lm.tokenizer, config.method)
    return 0


def _default_specs(args: argparse.Namespace, config) -> list[StoreSpec]:
    """No --datastore: the default store when it is built and the method is rest (a warning
    when it is not), else none."""
    default = _default_datastore() if args.method == "rest" else None
    if default is None and args.method == "rest":
        print(
            f"warning: no datastore ({DEFAULT_DATASTORE} is not built: `make datastores`); "
            "drafting from the context only"
            if config.draft.use_context
            else f"warning: no datastore ({DEFAULT_DATASTORE} is not built: `make datastores`); "
            "every step is a plain decoding step",
            file=sys.stderr,
        )
    return [StoreSpec("datastore", default)] if default is not None else []


def _load_engine(args: argparse.Namespace, specs: list[StoreSpec]):
    """(the loaded model, an engine over it and the stores), after --threads is applied."""
    import torch

    from rest_core.decode.engine import Engine
    from rest_core.decode.models import load_model

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)

    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    from rest_core.store.datastore import Datastore

    # Each store is opened against the model's tokenizer: a store built with another one is refused.
    engine = Engine(lm.model, lm.tokenizer, datastores={s.name: Datastore.open(s.path, lm.tokenizer) for s in specs})
    return lm, engine


def _stream(events, tokenizer, method: str) -> None:
    """The text to stdout token by token, never splitting a multi-byte character across
    writes; then one line of totals to stderr."""
    from rest_core.ui.answer_view import IncrementalDecoder

    out = sys.stdout
    decoder = IncrementalDecoder(tokenizer)
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
            f"[{method}] {t.new_tokens} tokens in {t.steps} steps (M = {t.mean_generated_length:.2f}), "
            f"{t.tokens_per_s:.1f} tokens/s, retrieval {t.retrieval_ms_per_token:.2f} ms/token, "
            f"prefill {t.prefill_ms:.0f} ms, finish: {last.finish_reason}",
            file=sys.stderr,
        )


def summary(result, lm, config, stores: list[StoreSpec] | None = None, table: SourceTable | None = None) -> dict:
    """The --json object. accepted_by_source counts accepted draft tokens by kind ("datastore":
    by one or more stores alone, "context", "both"), each once; accepted_by_store per named
    source (a token that several sources proposed counts for each)."""
    t = result.totals
    stores = stores or []
    table = table or (SourceTable.for_stores([s.name for s in stores]) if stores else DEFAULT_SOURCES)
    masks = [s for ev in result.events for s in ev.token_sources]
    per_source = count_origins(masks)
    del per_source["model"]  # accepted drafts only: "datastore", "context", "both"
    budgets = [ev.c for ev in result.events]
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
        "accepted_by_store": table.count_sources(masks),
        "datastore": str(stores[0].path) if stores else None,
        "datastores": [
            {
                "name": s.name,
                "path": str(s.path),
                "weight": config.draft.datastore_weight * s.weight,
                "bit": table.bit(s.name),
            }
            for s in stores
        ],
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
