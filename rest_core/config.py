"""Frozen settings dataclasses, validated once at construction, plus named presets.

Every knob of the method lives here so that the engine, the app, the benchmark and the CLI
share one definition (and one set of error messages) of what a valid setting is.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Literal

from rest_core.sources import MAX_STORES


class ConfigError(ValueError):
    """A setting is out of range or inconsistent with another; the message says which."""


def _whole(name: str, value: object) -> None:
    """Integer settings must be integers: a float NaN or inf compares False with every bound,
    so it would slip through the range checks below."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")


def _finite(name: str, value: object) -> None:
    """Real settings must be finite numbers (a NaN temperature emits one token over and over,
    a NaN weight silently turns its source off)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True)
class RetrievalConfig:
    """How drafts are looked up (paper section 3.2)."""

    n_min: int = 1  # shortest context suffix tried (the reference code stops at 2)
    n_max: int = 16  # longest context suffix tried first
    m: int = 10  # continuation length taken after each match
    max_matches: int = 5000  # K: above this many occurrences a fair sample of K is used

    def __post_init__(self) -> None:
        for name in ("n_min", "n_max", "m", "max_matches"):
            _whole(name, getattr(self, name))
        if self.n_min < 1:
            raise ConfigError(f"n_min must be >= 1, got {self.n_min}")
        if self.n_max < self.n_min:
            raise ConfigError(f"n_max ({self.n_max}) must be >= n_min ({self.n_min})")
        if self.m < 1:
            raise ConfigError(f"m (continuation length) must be >= 1, got {self.m}")
        if self.max_matches < 1:
            raise ConfigError(f"max_matches (K) must be >= 1, got {self.max_matches}")


@dataclass(frozen=True)
class DraftConfig:
    """How the draft tree is chosen from the retrieved continuations."""

    c: int = 16  # node budget: at most c draft tokens are verified per step
    budget: Literal["fixed", "auto"] = "fixed"  # auto: pick c per step from a measured cost curve
    use_datastore: bool = True
    use_context: bool = False  # the conversation itself as a second draft source (issue 6)
    datastore_weight: float = 1.0
    context_weight: float = 1.0
    # Which of the engine's datastores draft, by name, each with its share: ("code", 2.0) drafts
    # from "code" at datastore_weight * 2. None: every store of the engine at datastore_weight.
    # A bare name means share 1; use_datastore=False turns every store off.
    stores: tuple[tuple[str, float], ...] | None = None

    def __post_init__(self) -> None:
        _whole("c", self.c)
        _finite("datastore_weight", self.datastore_weight)
        _finite("context_weight", self.context_weight)
        if self.stores is not None:
            object.__setattr__(self, "stores", _store_shares(self.stores))
        if self.c < 1:
            raise ConfigError(f"c (max draft tokens) must be >= 1, got {self.c}")
        if self.budget not in ("fixed", "auto"):
            raise ConfigError(f"budget must be 'fixed' or 'auto', got {self.budget!r}")
        if self.datastore_weight < 0 or self.context_weight < 0:
            raise ConfigError("source weights must be >= 0")


def _store_shares(stores: object) -> tuple[tuple[str, float], ...]:
    """DraftConfig.stores as ((name, share), ...): names unique and non-empty, shares finite and
    >= 0, at most MAX_STORES of them (a bare name is share 1; lists become tuples)."""
    if isinstance(stores, (str, bytes)) or not isinstance(stores, (tuple, list)):
        raise ConfigError(f"stores must be a list of store names or (name, weight) pairs, got {stores!r}")
    out: list[tuple[str, float]] = []
    for entry in stores:
        if isinstance(entry, str):
            name, share = entry, 1.0
        elif isinstance(entry, (tuple, list)) and len(entry) == 2:
            name, share = entry
        else:
            raise ConfigError(f"a stores entry must be a name or a (name, weight) pair, got {entry!r}")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a store name must be a non-empty string, got {name!r}")
        _finite(f"the weight of store {name!r}", share)
        if share < 0:
            raise ConfigError(f"the weight of store {name!r} must be >= 0, got {share}")
        if any(name == n for n, _ in out):
            raise ConfigError(f"store {name!r} is listed twice")
        out.append((name, float(share)))
    if len(out) > MAX_STORES:
        raise ConfigError(f"at most {MAX_STORES} datastores can draft at once, got {len(out)}")
    return tuple(out)


@dataclass(frozen=True)
class SamplingConfig:
    """temperature == 0 means greedy decoding."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = unset: the model's generation config decides, as in generate() (processors.resolve_sampling)
    seed: int | None = None

    def __post_init__(self) -> None:
        _finite("temperature", self.temperature)
        _finite("top_p", self.top_p)
        _whole("top_k", self.top_k)
        if self.seed is not None:
            _whole("seed", self.seed)
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationConfig:
    """One generation request: method, length and the nested settings."""

    method: Literal["rest", "ar"] = "rest"
    max_new_tokens: int = 256
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)

    def __post_init__(self) -> None:
        _whole("max_new_tokens", self.max_new_tokens)
        if self.method not in ("rest", "ar"):
            raise ConfigError(f"method must be 'rest' or 'ar', got {self.method!r}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def with_method(self, method: Literal["rest", "ar"]) -> GenerationConfig:
        return replace(self, method=method)


# Named presets. "paper" is the paper's setting; "cpu" / "gpu" are our measured defaults (the
# measurements behind them: docs/results.md, "The presets").
PRESETS: dict[str, GenerationConfig] = {
    "paper": GenerationConfig(draft=DraftConfig(c=64)),
    "cpu": GenerationConfig(draft=DraftConfig(c=16, budget="auto", use_context=True)),
    "gpu": GenerationConfig(draft=DraftConfig(c=64, use_context=True)),
}


def preset_for_device(device_type: str) -> GenerationConfig:
    """The measured defaults for a device type ("cuda", "cpu", ...): "gpu" on CUDA, else "cpu"."""
    return PRESETS["gpu" if device_type == "cuda" else "cpu"]
