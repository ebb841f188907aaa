"""Runners: each turns prompt token ids into one `TimedRun` (the tokens it produced and what it cost).

Runners exist for transformers' own `generate` (method `ar`, and `pld` = prompt lookup decoding)
and for our engine (`rest`, `context`, `hybrid`, and `ar-loop`, the engine's loop with an empty
draft). A `RunnerFactory` builds every runner of one benchmark from a loaded model and base
settings (plain data, no command line). End-of-sequence ids come from the engine
(`Engine.stop_ids`), for every method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from rest_core.bench.runs import TimedRun, run_from_events
from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig

# Engine methods: name -> which draft sources are on. "rest" is the paper's method (datastore only).
ENGINE_METHODS: dict[str, tuple[bool, bool]] = {
    "rest": (True, False),
    "context": (False, True),
    "hybrid": (True, True),
}
HF_METHODS = ("ar", "pld")
ALL_METHODS = ("ar", "pld", "rest", "ar-loop", "context", "hybrid")


class Runner(Protocol):
    name: str

    def run(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None) -> TimedRun: ...


def strip_eos(ids: Sequence[int], eos_ids: Iterable[int]) -> list[int]:
    """Tokens up to (not including) the first end-of-sequence token."""
    eos = set(eos_ids)
    out: list[int] = []
    for t in ids:
        if t in eos:
            break
        out.append(int(t))
    return out


class HFRunner:
    """transformers `generate`: plain decoding (`ar`) or prompt lookup decoding (`pld`, k > 0).

    `stop_ids` are the engine's end-of-sequence ids (`Engine.stop_ids`), so both sides of a
    comparison stop on the same tokens. A stopping criterion that never stops serves as a clock: transformers calls it once per
    decoding iteration, so its first call marks the end of prefill (the first token exists)
    and the number of calls is the number of model forward steps.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        stop_ids: Sequence[int],
        name: str = "ar",
        sampling: SamplingConfig = SamplingConfig(),
        prompt_lookup_num_tokens: int | None = None,
        max_matching_ngram_size: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.sampling = sampling
        self.prompt_lookup_num_tokens = prompt_lookup_num_tokens
        self.max_matching_ngram_size = max_matching_ngram_size
        self.eos_ids = [int(t) for t in stop_ids]

    def _generation_config(self, max_new_tokens: int):
        from transformers import GenerationConfig as HFGenerationConfig

        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None:
            pad = self.eos_ids[0] if self.eos_ids else 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            min_new_tokens=0,
            eos_token_id=self.eos_ids or None,
            pad_token_id=pad,
            do_sample=not self.sampling.greedy,
        )
        if not self.sampling.greedy:
            # top_k 0 = unset: generate then takes the model's default, as the engine does (processors.resolve_sampling).
            kwargs.update(
                temperature=self.sampling.temperature, top_p=self.sampling.top_p, top_k=self.sampling.top_k or None
            )
        if self.prompt_lookup_num_tokens:
            kwargs["prompt_lookup_num_tokens"] = self.prompt_lookup_num_tokens
            if self.max_matching_ngram_size:
                kwargs["max_matching_ngram_size"] = self.max_matching_ngram_size
        return HFGenerationConfig(**kwargs)

    def run(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> TimedRun:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        stamps: list[float] = []

        class Clock(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
                stamps.append(time.perf_counter())
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        if seed is not None:
            torch.manual_seed(seed)
        config = self._generation_config(max_new_tokens)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                generation_config=config,
                stopping_criteria=StoppingCriteriaList([Clock()]),
            )
        if device.type == "cuda":
            torch.cuda.synchronize()
        end = time.perf_counter()
        new = [int(t) for t in out[0, len(prompt_ids) :].tolist()]
        # Trailing padding appears only for finished sequences in a batch; batch 1 has none,
        # but drop anything after the first EOS to be safe.
        cut = strip_eos(new, self.eos_ids)
        finish = "length"
        if len(cut) < len(new):
            new = cut + [new[len(cut)]]
            finish = "eos"
        # transformers' prefill forward covers the whole prompt and yields the first token.
        prefill_ms = 1000.0 * (stamps[0] - start) if stamps else 0.0
        steps = len(stamps)  # one call per forward, the prefill included
        return TimedRun(
            problem_id="",
            turn=0,
            method=self.name,
            prompt_tokens=len(prompt_ids),
            token_ids=new,
            wall_ms=1000.0 * (end - start),
            prefill_ms=prefill_ms,
            steps=steps,
            # Prompt lookup: every step yields one model token plus the accepted draft tokens.
            draft_tokens=max(len(new) - steps, 0) if self.prompt_lookup_num_tokens else 0,
            finish_reason=finish,
            prefill_tokens=1 if new else 0,
        )


class EngineRunner:
    """Our engine (`rest_core.decode.engine.Engine`) with one GenerationConfig."""

    def __init__(self, engine: Any, config: GenerationConfig, *, name: str) -> None:
        self.engine = engine
        self.config = config
        self.name = name

    def run(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> TimedRun:
        config = replace(self.config, max_new_tokens=max_new_tokens)
        if seed is not None and not config.sampling.greedy:
            config = replace(config, sampling=replace(config.sampling, seed=seed))
        start = time.perf_counter()
        events = list(self.engine.generate(list(prompt_ids), config))
        _synchronize(self.engine)
        wall_ms = 1000.0 * (time.perf_counter() - start)
        return run_from_events(
            events, problem_id="", turn=0, method=self.name, prompt_tokens=len(prompt_ids), wall_ms=wall_ms
        )


def _synchronize(engine: Any) -> None:
    model = getattr(engine, "model", None)
    try:
        import torch

        if model is not None and next(model.parameters()).device.type == "cuda":
            torch.cuda.synchronize()
    except (ImportError, StopIteration):
        pass


def engine_config(
    method: str,
    *,
    retrieval: RetrievalConfig = RetrievalConfig(),
    draft: DraftConfig = DraftConfig(),
    sampling: SamplingConfig = SamplingConfig(),
) -> GenerationConfig:
    """The GenerationConfig of an engine method name (`rest`, `context`, `hybrid`, `ar-loop`)."""
    if method == "ar-loop":
        return GenerationConfig(method="ar", retrieval=retrieval, draft=draft, sampling=sampling)
    if method not in ENGINE_METHODS:
        raise ValueError(f"{method!r} is not an engine method ({', '.join(ENGINE_METHODS)}, ar-loop)")
    use_datastore, use_context = ENGINE_METHODS[method]
    draft = replace(draft, use_datastore=use_datastore, use_context=use_context)
    return GenerationConfig(method="rest", retrieval=retrieval, draft=draft, sampling=sampling)


# --------------------------------------------------------------------------------------------
# Building the runners of one benchmark


@dataclass
class RunnerFactory:
    """Every runner of one benchmark, on one loaded model with one set of base settings.

    Plain data, no argparse: the CLI builds one from its flags, an ablation or a test from what it
    holds. Engines are cached per datastore, without KV reuse across calls, so every method
    prefills its whole prompt as transformers does. `open_datastore` is called on first use
    only, so a run without datastore methods never opens one.
    """

    model: Any
    tokenizer: Any
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    open_datastore: Callable[[], Any] | None = None
    pld_ngram: int | None = None  # prompt lookup's max_matching_ngram_size (None: transformers' default)
    _datastore: Any = field(default=None, init=False, repr=False)
    _engines: dict[int, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def datastore(self) -> Any:
        if self._datastore is None:
            if self.open_datastore is None:
                raise ValueError("this benchmark has no datastore")
            self._datastore = self.open_datastore()
        return self._datastore

    @property
    def opened_datastore(self) -> Any | None:
        """The datastore if a runner has opened it, else None (for reports)."""
        return self._datastore

    def engine(self, datastore: Any = None, selector: Callable[[Any, int], Any] | None = None) -> Any:
        """An engine over `datastore` (None: no datastore); a custom `selector` gets its own engine."""
        from rest_core.decode.engine import Engine

        if selector is not None:
            return Engine(self.model, self.tokenizer, datastore, reuse_cache=False, selector=selector)
        key = id(datastore)
        if key not in self._engines:
            self._engines[key] = Engine(self.model, self.tokenizer, datastore, reuse_cache=False)
        return self._engines[key]

    @property
    def stop_ids(self) -> list[int]:
        """The engine's end-of-sequence ids: one rule for every method and for the identity check."""
        return list(self.engine(None).stop_ids)

    def encode(self, prompt: str | list[dict], chat: bool) -> list[int]:
        return list(self.engine(None).encode(prompt, chat))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def hf_runner(self, name: str = "ar", k: int | None = None) -> HFRunner:
        """transformers `generate`: plain (`k` None) or prompt lookup with k draft tokens."""
        return HFRunner(
            self.model,
            self.tokenizer,
            stop_ids=self.stop_ids,
            name=name,
            sampling=self.sampling,
            prompt_lookup_num_tokens=k,
            max_matching_ngram_size=self.pld_ngram,
        )

    def engine_runner(
        self,
        method: str,
        *,
        name: str | None = None,
        datastore: Any = None,
        retrieval: RetrievalConfig | None = None,
        draft: DraftConfig | None = None,
        selector: Callable[[Any, int], Any] | None = None,
    ) -> EngineRunner:
        """An engine method (`rest`, `context`, `hybrid`, `ar-loop`) with the base settings, any
        of them replaced; methods that use the datastore get the factory's unless one is given."""
        needs_store = method in ENGINE_METHODS and ENGINE_METHODS[method][0]
        store = datastore if datastore is not None else (self.datastore if needs_store else None)
        config = engine_config(
            method, retrieval=retrieval or self.retrieval, draft=draft or self.draft, sampling=self.sampling
        )
        return EngineRunner(self.engine(store, selector), config, name=name or method)

    def settings(self) -> dict[str, Any]:
        """The base settings, for reports. Each engine method sets its own draft sources, so the
        draft's source switches are reported per method, not as the base's defaults."""
        draft = {k: v for k, v in asdict(self.draft).items() if k not in ("use_datastore", "use_context")}
        sources = {
            m: [name for name, on in zip(("datastore", "context"), flags) if on] for m, flags in ENGINE_METHODS.items()
        }
        return {
            "retrieval": asdict(self.retrieval),
            "draft": draft,
            "sources_by_method": sources,
            "sampling": asdict(self.sampling),
        }
