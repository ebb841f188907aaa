"""What the REST proposer inside vLLM is told: one JSON object under vLLM's `additional_config`
(key "rest"), written by `rest_config` (the `serve` command and the vLLM bench) and read back in
the worker process by `ServeSettings.parse`. No vLLM import.

vLLM 0.32 refuses unknown keys in `speculative_config`, and `custom_class` constructs the
proposer with nothing but the `VllmConfig`, whose `additional_config` dict is the one place a
launcher can put settings of its own (`LLM(additional_config=...)` or `--additional-config`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from rest_core.budget.cost_curve import CostCurve
from rest_core.config import ConfigError, RetrievalConfig

CONFIG_KEY = "rest"  # additional_config[CONFIG_KEY]
PROPOSER_CLASS = "rest_core.serve.proposer.RestProposer"  # speculative_config["model"] of custom_class
# Which draft sources each method turns on: (datastores, context, the server's earlier answers).
# "rest" is the paper's method.
METHODS: dict[str, tuple[bool, bool, bool]] = {
    "rest": (True, False, False),
    "hybrid": (True, True, True),
    "context": (False, True, False),
}
# Tokens of finished answers kept per namespace for drafting (rest_core.drafting.answers_source;
# 4 bytes a token), and how many namespaces are kept at once (the least recently used goes).
DEFAULT_ANSWERS = 65536
MAX_ANSWER_NAMESPACES = 64
ANSWERS_NAME = "answers"  # the source's name in the draft log and the totals
DEFAULT_K = 16  # num_speculative_tokens: the longest chain a request may draft in a step
# Matches sampled per store and step. A chain needs the likeliest continuation, which a fair sample
# of 500 estimates about as well as the engine's 5000 do for a whole tree; the trie of 5000 x K
# continuations cost 0.49 ms per request and step here, of 500 x K 0.33 ms (32 requests, hybrid).
DEFAULT_MATCHES = 500

# Prior cost of one batched verify step over T tokens (ms), corrected online from the time
# between consecutive propose() calls (`rest_core.serve.proposer`).
# "cpu": vLLM 0.32 CPU on this project's 2-core machine, SmolLM2-135M float32, two OMP threads:
# the step time of plain decoding with B requests in flight is C(B) (T = B; `bench --engine vllm`
# measures it again as `cost_curve` in every run's results and hands it to rest/hybrid).
# "gpu": an assumption, not a measurement (no GPU was at hand): a step costs about the same up to
# a few hundred tokens, then grows with the tokens. Whichever prior, the online correction takes
# over within a few dozen steps of each batch size.
PRIOR_CURVES: dict[str, CostCurve] = {
    "cpu": CostCurve((1, 2, 4, 8, 16, 32, 64, 128), (33.0, 36.0, 41.0, 50.0, 66.0, 95.0, 160.0, 290.0)),
    "gpu": CostCurve((1, 64, 256, 1024, 4096), (8.0, 8.5, 10.0, 16.0, 40.0)),
}


@dataclass(frozen=True)
class ServedStore:
    """One datastore that drafts: its folder, the name it drafts under, its weight in the trie."""

    path: str
    name: str
    weight: float = 1.0


@dataclass(frozen=True)
class ServeSettings:
    """The proposer's settings, validated once (ConfigError naming the problem)."""

    method: str = "hybrid"
    stores: tuple[ServedStore, ...] = ()
    retrieval: RetrievalConfig = field(
        default_factory=lambda: RetrievalConfig(m=DEFAULT_K, max_matches=DEFAULT_MATCHES)
    )
    context_weight: float = 1.0
    answers_tokens: int = DEFAULT_ANSWERS  # finished answers kept per namespace (0: not a source)
    cost_curve: CostCurve | str = "auto"  # a curve, a PRIOR_CURVES name, or "auto" (by device)
    check_tokenizer: bool = True
    records: int = 4096  # drafted-chain records kept in memory (the latest ones)
    log: str | None = None  # JSON Lines file: one line per resolved record (what was drafted, accepted)
    stats: str | None = None  # JSON file rewritten with the running totals

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if METHODS[self.method][0] and not self.stores:
            raise ConfigError(f"method {self.method!r} drafts from datastores: give at least one ('datastores')")
        if self.records < 0:
            raise ConfigError(f"records must be >= 0, got {self.records}")
        if isinstance(self.answers_tokens, bool) or not isinstance(self.answers_tokens, int):
            raise ConfigError(f"answers_tokens must be a whole number, got {self.answers_tokens!r}")
        if self.answers_tokens != 0 and not 2 <= self.answers_tokens <= 2**26:
            raise ConfigError(f"answers_tokens must be 0 (off) or 2..{2**26}, got {self.answers_tokens}")

    @property
    def use_stores(self) -> bool:
        return METHODS[self.method][0]

    @property
    def use_context(self) -> bool:
        return METHODS[self.method][1]

    @property
    def use_answers(self) -> bool:
        return METHODS[self.method][2] and self.answers_tokens > 0

    def prior_curve(self, device_type: str) -> CostCurve:
        """The cost curve to start from: the given one, or the named / device's prior."""
        if isinstance(self.cost_curve, CostCurve):
            return self.cost_curve
        name = self.cost_curve if self.cost_curve != "auto" else ("cpu" if device_type == "cpu" else "gpu")
        return PRIOR_CURVES[name]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> ServeSettings:
        """From additional_config["rest"] (see `rest_config` for the keys)."""
        raw = dict(raw or {})
        known = {
            "method",
            "datastores",
            "n_min",
            "n_max",
            "m",
            "max_matches",
            "context_weight",
            "answers_tokens",
            "cost_curve",
            "check_tokenizer",
            "records",
            "log",
            "stats",
        }
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"unknown REST proposer setting(s) {unknown}; known: {', '.join(sorted(known))}")
        retrieval = RetrievalConfig(
            n_min=raw.get("n_min", 1),
            n_max=raw.get("n_max", 16),
            m=raw.get("m", DEFAULT_K),
            max_matches=raw.get("max_matches", DEFAULT_MATCHES),
        )
        return cls(
            method=str(raw.get("method", "hybrid")),
            stores=tuple(_store(s) for s in raw.get("datastores", ())),
            retrieval=retrieval,
            context_weight=float(raw.get("context_weight", 1.0)),
            answers_tokens=raw.get("answers_tokens", DEFAULT_ANSWERS),
            cost_curve=_curve(raw.get("cost_curve", "auto")),
            check_tokenizer=bool(raw.get("check_tokenizer", True)),
            records=int(raw.get("records", 4096)),
            log=raw.get("log"),
            stats=raw.get("stats"),
        )


def _store(entry: Any) -> ServedStore:
    """A datastores entry: a folder, or {"path", "name", "weight"}."""
    if isinstance(entry, str):
        return ServedStore(entry, Path(entry).name or entry)
    if isinstance(entry, Mapping) and "path" in entry:
        path = str(entry["path"])
        return ServedStore(path, str(entry.get("name") or Path(path).name), float(entry.get("weight", 1.0)))
    raise ConfigError(
        f"a datastores entry must be a folder or {{'path': ..., 'name': ..., 'weight': ...}}, got {entry!r}"
    )


def _curve(value: Any) -> CostCurve | str:
    """A cost curve setting: "auto", a PRIOR_CURVES name, {"sizes": [...], "ms": [...]}, or the
    path of a JSON file holding such an object (e.g. the `cost_curve` of a bench's results)."""
    if isinstance(value, str) and value in ("auto", *PRIOR_CURVES):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(Path(value).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"cost_curve: {value!r} is neither a prior name ({', '.join(PRIOR_CURVES)}) nor a readable JSON file: {exc}"
            ) from None
        value = value.get("cost_curve", value) if isinstance(value, dict) else value
    if isinstance(value, Mapping) and "sizes" in value and "ms" in value:
        sizes, ms = [int(s) for s in value["sizes"]], [float(x) for x in value["ms"]]
        if not sizes or len(sizes) != len(ms) or sizes != sorted(set(sizes)) or sizes[0] < 1 or min(ms) <= 0:
            raise ConfigError(f"cost_curve: sizes must increase from >= 1 with one positive ms each, got {value!r}")
        return CostCurve(tuple(sizes), tuple(ms))
    raise ConfigError(
        f"cost_curve must be 'auto', a prior name, {{'sizes': [...], 'ms': [...]}} or a JSON file, got {value!r}"
    )


def rest_config(
    method: str,
    stores: Sequence[ServedStore],
    *,
    retrieval: RetrievalConfig | None = None,
    context_weight: float = 1.0,
    answers_tokens: int = DEFAULT_ANSWERS,
    cost_curve: CostCurve | str | Mapping[str, Any] = "auto",
    log: str | None = None,
    stats: str | None = None,
) -> dict[str, Any]:
    """The additional_config["rest"] object for these settings (checked by parsing it back)."""
    r = retrieval or RetrievalConfig(m=DEFAULT_K, max_matches=DEFAULT_MATCHES)
    curve = cost_curve if isinstance(cost_curve, CostCurve) else _curve(cost_curve)
    out: dict[str, Any] = {
        "method": method,
        "datastores": [{"path": str(Path(s.path).resolve()), "name": s.name, "weight": s.weight} for s in stores],
        "n_min": r.n_min,
        "n_max": r.n_max,
        "m": r.m,
        "max_matches": r.max_matches,
        "context_weight": context_weight,
        "answers_tokens": answers_tokens,
        "cost_curve": curve if isinstance(curve, str) else {"sizes": list(curve.sizes), "ms": list(curve.ms)},
    }
    if log:
        out["log"] = log
    if stats:
        out["stats"] = stats
    ServeSettings.parse(out)
    return out


def speculative_config(k: int = DEFAULT_K) -> dict[str, Any]:
    """vLLM's speculative_config for the REST proposer, drafting chains of up to k tokens."""
    if k < 1:
        raise ConfigError(f"num_speculative_tokens must be >= 1, got {k}")
    return {"method": "custom_class", "model": PROPOSER_CLASS, "num_speculative_tokens": int(k)}


# Per-request options, in a completion request's `vllm_xargs` (vLLM hands them to the request's
# SamplingParams.extra_args, which the proposer reads beside the request's row).
XARG_OFF = "rest_off"  # 1: draft nothing for this request (plain decoding on the same engine: Compare)
XARG_STORES = "rest_stores"  # the served stores this request drafts from: a list of names, or "a,b"; [] or "": none
XARG_CONTEXT = "rest_context"  # 0: not from the request's own context (where the server's method uses it)
# The answer namespace a request drafts from and adds its answer to, where the server's method
# drafts from earlier answers: absent, the server's shared one (""); a name, its own (the
# bench gives each pass its own, so no answer is drafted from an earlier answer to the same
# prompt); 0 / "off", or a value that is neither text nor a whole number: neither reads nor adds.
XARG_ANSWERS = "rest_answers"
_ANSWERS_OFF = (0, False, "0", "false", "off")
# A namespace name longer than this is kept as its first characters and a digest of the whole: a
# request's options stay small however long its name, and two long names stay two namespaces.
_NAMESPACE_CHARS = 128
_INT_BITS = 256  # a larger integer (only the offline API can send one) is not understood as a name
UNKNOWN_SHOWN = 4  # unknown store names a request's options keep, to report


def namespace_key(name: str) -> str:
    """The key a namespace name is kept under: the name itself, or for a name longer than
    _NAMESPACE_CHARS its head and the SHA-256 of the whole (any text, lone surrogates included)."""
    if len(name) <= _NAMESPACE_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[: _NAMESPACE_CHARS - len(digest) - 1]}#{digest}"


def _name(value: Any) -> str | None:
    """A name given as text or a number (vLLM's OpenAI server hands on strings, ints and floats);
    None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and value.bit_length() > _INT_BITS:
        return None  # str() of it may raise (Python's limit on digits), and it names nothing
    return str(value)


@dataclass(frozen=True)
class RequestOptions:
    """What one request asks of the proposer: drafting off, or a subset of the served stores
    (None: every served store). A request cannot fail over its drafts, so a value that is not
    understood is never an error: `rest_off`, `rest_context` and `rest_stores` then draft as the
    server is set up, and `rest_answers` turns earlier answers off (the one fallback that cannot
    share a namespace with other requests); `ignored` names those xargs, for the totals."""

    off: bool = False
    stores: frozenset[str] | None = None
    context: bool = True
    answers: str | None = ""  # the answer namespace's key (`namespace_key`); None: none
    # For the totals only: some store names the request gave that the server does not serve, and
    # the xargs given but not understood.
    unknown: tuple[str, ...] = field(default=(), compare=False)
    ignored: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, extra: Mapping[str, Any] | None, served: Collection[str] | None = None) -> RequestOptions:
        """A request's options from its SamplingParams.extra_args; with `served` (the server's
        store names), `stores` keeps the served ones only and `unknown` shows a few of the rest,
        so a request that names a million stores keeps at most the served ones. Never raises."""
        if not isinstance(extra, Mapping):
            return cls()
        try:
            return cls._read(extra, served)
        except Exception:  # only the offline API can hand over such objects (e.g. a failing __eq__)
            return cls(answers=None, ignored=("vllm_xargs",))

    @classmethod
    def _read(cls, extra: Mapping[str, Any], served: Collection[str] | None) -> RequestOptions:
        ignored = []
        off = extra.get(XARG_OFF)
        stores = extra.get(XARG_STORES)
        chosen: frozenset[str] | None = None
        unknown: tuple[str, ...] = ()
        if isinstance(stores, str | list | tuple):
            given = stores.split(",") if isinstance(stores, str) else stores
            names = dict.fromkeys(n.strip() for n in map(_name, given) if n is not None and n.strip())
            if served is not None:
                unknown = tuple(
                    n[:_NAMESPACE_CHARS] for n in islice((n for n in names if n not in served), UNKNOWN_SHOWN)
                )
                names = dict.fromkeys(n for n in names if n in served)
            chosen = frozenset(names)
        elif stores is not None:
            ignored.append(XARG_STORES)
        context = extra.get(XARG_CONTEXT, 1) not in (0, False, "0", "false")
        answers = extra.get(XARG_ANSWERS, "")
        name = _name(answers)
        namespace: str | None = None
        if answers in _ANSWERS_OFF:
            pass
        elif name is None or isinstance(answers, float):
            ignored.append(XARG_ANSWERS)  # not understood: no namespace at all, rather than the shared one
        else:
            namespace = namespace_key(name)
        return cls(
            off=off in (1, True, "1", "true"),
            stores=chosen,
            context=context,
            answers=namespace,
            unknown=unknown,
            ignored=tuple(ignored),
        )


def request_xargs(
    stores: Sequence[str] | None = None, off: bool = False, context: bool = True, answers: str | None = ""
) -> dict[str, Any]:
    """The `vllm_xargs` of a completion request for these options (RequestOptions.parse reads them);
    `answers`: the answer namespace ("" the server's shared one, None none)."""
    out: dict[str, Any] = {}
    if off:
        out[XARG_OFF] = 1
    if stores is not None:
        out[XARG_STORES] = ",".join(stores)
    if not context:
        out[XARG_CONTEXT] = 0
    if answers is None:
        out[XARG_ANSWERS] = "off"
    elif answers:
        out[XARG_ANSWERS] = answers
    return out
