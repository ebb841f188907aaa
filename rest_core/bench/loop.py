"""Benchmark methods on suites: timings, mean generated length, losslessness, draft sources.

A *runner* turns prompt token ids into one `TimedRun` (the tokens it produced and what it cost).
Runners exist for transformers' own `generate` (method `ar`, and `pld` = prompt lookup decoding)
and for our engine (`rest`, `context`, `hybrid`, and `ar-loop`, the engine's loop with an empty
draft). `run_benchmark` walks the problems one by one and, within each problem, runs every
method in turn (rotating which goes first), so machine noise hits all methods alike and the
speedups are ratios measured in the same run. `summarize` turns runs into per-method metrics;
`write_report` writes results.json, results.md and chart.html.

A `RunnerFactory` builds every runner of one benchmark from a loaded model and base settings
(plain data, no command line), and `measure` warms the runners up and times them under a
`Timing`; the CLI (`commands/bench.py`) and the ablations (`ablations.py`) are both built on
these two. End-of-sequence ids come from the engine (`Engine.stop_ids`), for every method.

Timing definitions (all pooled over runs: total time / total tokens, so long outputs count more):
- ``mean_token_ms``: wall time of the whole generate call (prefill included) per generated token.
- ``mean_token_ms_decode``: prefill excluded (what the paper reports): time after prefill per
  token produced after prefill. transformers' prefill covers the whole prompt and yields the
  first token; the engine's prefill covers all but the last prompt token and yields none (its
  first step does), so each is charged for exactly the tokens its decode time produced.
- ``mean_generated_length`` (M): generated tokens per model forward call that yields tokens, so
  plain decoding has M = 1 and M bounds the speedup.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig
from rest_core.decode.events import StepEvent
from rest_core.sources import count_origins, kind_of, origin
from rest_core.bench.suites import Problem

# Engine methods: name -> which draft sources are on. "rest" is the paper's method (datastore only).
ENGINE_METHODS: dict[str, tuple[bool, bool]] = {
    "rest": (True, False),
    "context": (False, True),
    "hybrid": (True, True),
}
HF_METHODS = ("ar", "pld")
ALL_METHODS = ("ar", "pld", "rest", "ar-loop", "context", "hybrid")


# --------------------------------------------------------------------------------------------
# One generation and its measurements


@dataclass
class TimedRun:
    """One method on one prompt (a problem, or one turn of a chat problem)."""

    problem_id: str
    turn: int
    method: str
    prompt_tokens: int
    token_ids: list[int]
    wall_ms: float  # the whole generate call, prefill included
    prefill_ms: float
    steps: int  # model forward calls that yielded tokens (so plain decoding has M = 1)
    draft_tokens: int = 0  # generated tokens that came from accepted drafts
    drafted_nodes: int = 0  # draft tokens verified, summed over steps
    # The auto budget's predictions against outcomes: per source key ("datastore", "context",
    # "both"), per probability bin (RELIABILITY_BINS), [nodes, sum of predicted, accepted]
    reliability: dict[str, list[list[float]]] = field(default_factory=dict)
    retrieval_ms: float = 0.0  # retrieval + tree building
    forward_ms: float = 0.0
    source_tokens: dict[str, int] = field(default_factory=dict)  # origin (rest_core.sources) -> tokens
    suffix_lens: dict[str, list[int]] = field(default_factory=dict)  # source -> matched suffix length per step
    finish_reason: str | None = None
    prefill_tokens: int = 0  # tokens the prefill call itself yielded (transformers: 1, engine: 0)

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def decode_ms(self) -> float:
        return max(self.wall_ms - self.prefill_ms, 0.0)

    @property
    def decode_tokens(self) -> int:
        """Tokens produced after prefill (the ones `decode_ms` paid for)."""
        return max(self.new_tokens - self.prefill_tokens, 0)


def run_from_events(
    events: Iterable[StepEvent],
    *,
    problem_id: str,
    turn: int,
    method: str,
    prompt_tokens: int,
    wall_ms: float | None = None,
) -> TimedRun:
    """Fold an engine's step events into one `TimedRun`.

    `wall_ms` is the caller's own clock around the generate call; without it the engine's totals
    (prefill + decode time) stand in.
    """
    tokens: list[int] = []
    masks: list[int] = []
    suffix_lens: dict[str, list[int]] = {}
    drafted = 0
    retrieval_ms = forward_ms = 0.0
    reliability: dict[str, list[list[float]]] = {}
    last: StepEvent | None = None
    for ev in events:
        if ev.predicted and ev.draft is not None:
            add_reliability(reliability, ev.predicted, ev.draft.sources, ev.accepted)
        tokens.extend(ev.tokens)
        masks.extend(ev.token_sources)
        for match in ev.matches:
            suffix_lens.setdefault(match.source, []).append(int(match.suffix_len))
        drafted += len(ev.draft) if ev.draft is not None else 0
        retrieval_ms += ev.timings.retrieve_ms + ev.timings.draft_ms
        forward_ms += ev.timings.forward_ms
        last = ev
    if last is None:
        return TimedRun(problem_id, turn, method, prompt_tokens, [], wall_ms or 0.0, 0.0, 0)
    sources = {key: n for key, n in count_origins(masks).items() if n}
    totals = last.totals
    if wall_ms is None:
        wall_ms = totals.prefill_ms + 1000.0 * totals.elapsed_s
    return TimedRun(
        problem_id=problem_id,
        turn=turn,
        method=method,
        prompt_tokens=prompt_tokens,
        token_ids=tokens,
        wall_ms=wall_ms,
        prefill_ms=totals.prefill_ms,
        steps=totals.steps,
        draft_tokens=sum(n for name, n in sources.items() if name != "model"),
        drafted_nodes=drafted,
        reliability=reliability,
        retrieval_ms=retrieval_ms,
        forward_ms=forward_ms,
        source_tokens=dict(sources),
        suffix_lens=suffix_lens,
        finish_reason=last.finish_reason,
    )


RELIABILITY_BINS = 10  # predicted-probability bins of the reliability chart: [0, 0.1), ..., [0.9, 1]


def add_reliability(
    table: dict[str, list[list[float]]], predicted: Sequence[float], masks: Sequence[int], accepted: Iterable[int]
) -> None:
    """Count one step's drafted nodes into `table` (see `TimedRun.reliability`): each node's
    predicted path probability, its source, and whether the model's path ran through it."""
    hit = set(int(a) for a in accepted)
    for i, (p, mask) in enumerate(zip(predicted, masks)):
        row = table.setdefault(kind_of(int(mask)), [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)])
        cell = row[min(int(p * RELIABILITY_BINS), RELIABILITY_BINS - 1)]
        cell[0] += 1
        cell[1] += float(p)
        cell[2] += int(i in hit)


def reliability_rows(table: dict[str, list[list[float]]]) -> dict[str, list[dict[str, float]]]:
    """Per source (and "all"): the non-empty bins as {lo, hi, n, predicted, observed}."""
    merged = {"all": [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)]}
    for key in sorted(table):
        merged[key] = table[key]
        for b, cell in enumerate(table[key]):
            merged["all"][b] = [x + y for x, y in zip(merged["all"][b], cell)]
    out: dict[str, list[dict[str, float]]] = {}
    for key, cells in merged.items():
        rows = [
            {"lo": b / RELIABILITY_BINS, "hi": (b + 1) / RELIABILITY_BINS, "n": int(n),
             "predicted": total / n, "observed": hits / n}
            for b, (n, total, hits) in enumerate(cells) if n
        ]
        if rows:
            out[key] = rows
    return out


# --------------------------------------------------------------------------------------------
# Runners


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
            kwargs.update(temperature=self.sampling.temperature, top_p=self.sampling.top_p, top_k=self.sampling.top_k or None)
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
# Prompts


class PromptEncoder(Protocol):
    def __call__(self, prompt: str | list[dict], chat: bool) -> list[int]: ...


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
        return HFRunner(self.model, self.tokenizer, stop_ids=self.stop_ids, name=name, sampling=self.sampling,
                        prompt_lookup_num_tokens=k, max_matching_ngram_size=self.pld_ngram)

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
        config = engine_config(method, retrieval=retrieval or self.retrieval, draft=draft or self.draft,
                               sampling=self.sampling)
        return EngineRunner(self.engine(store, selector), config, name=name or method)

    def settings(self) -> dict[str, Any]:
        """The base settings, for reports. Each engine method sets its own draft sources, so the
        draft's source switches are reported per method, not as the base's defaults."""
        draft = {k: v for k, v in asdict(self.draft).items() if k not in ("use_datastore", "use_context")}
        sources = {m: [name for name, on in zip(("datastore", "context"), flags) if on]
                   for m, flags in ENGINE_METHODS.items()}
        return {"retrieval": asdict(self.retrieval), "draft": draft, "sources_by_method": sources,
                "sampling": asdict(self.sampling)}


# --------------------------------------------------------------------------------------------
# The benchmark loop


@dataclass
class Difference:
    """A greedy output that differs from the `ar` reference on the same prompt."""

    problem_id: str
    turn: int
    method: str
    first_diff: int
    reference: list[int]
    output: list[int]
    reference_text: str = ""
    output_text: str = ""


@dataclass
class BenchResult:
    runs: list[TimedRun]
    identical: dict[str, list[bool]]  # method -> one verdict per run (greedy only)
    differences: list[Difference]
    references_rerun: int = 0  # chat turns where a method's own history needed a fresh ar reference


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def run_benchmark(
    problems: Sequence[Problem],
    runners: Sequence[Runner],
    *,
    encode: PromptEncoder,
    decode: Callable[[Sequence[int]], str],
    max_new_tokens: int,
    eos_ids: Sequence[int] = (),
    greedy: bool = True,
    seed: int | None = 0,
    reference: Runner | None = None,
    progress: bool = True,
    on_run: Callable[[TimedRun], None] | None = None,
    repeats: int = 1,
) -> BenchResult:
    """Run every runner on every problem (every turn), interleaved per problem.

    With repeats > 1 each turn runs `repeats` rounds of all methods and keeps each method's
    fastest run (best of R: on a shared machine, noise only ever adds time).

    Greedy identity: each output is compared with the output of `reference` (default: the runner
    named "ar") on the *same* prompt token ids. In a chat, turn k's prompt contains the method's
    own earlier answers; when those differ from ar's, the reference is rerun (untimed) on the
    method's own prompt, so the comparison is always like for like.
    """
    from tqdm.auto import tqdm

    if reference is None:
        reference = next((r for r in runners if r.name == "ar"), None)
    result = BenchResult([], {r.name: [] for r in runners}, [])
    total = sum(len(p.turns) for p in problems) * len(runners) * repeats
    bar = tqdm(total=total, desc="bench", unit="gen", disable=not progress, dynamic_ncols=True)
    for pi, problem in enumerate(problems):
        history: dict[str, list[dict]] = {r.name: [] for r in runners}
        for turn, text in enumerate(problem.turns):
            prompts = {
                r.name: encode(history[r.name] + [{"role": "user", "content": text}], True)
                if problem.kind == "chat" else encode(text, False)
                for r in runners
            }
            run_seed = None if seed is None else seed + 1000 * pi + turn
            best = _time_turn(runners, prompts, max_new_tokens, run_seed, rotate=pi, repeats=repeats,
                              on_done=lambda run: _advance(bar, problem.id, run))
            for runner in runners:
                run = best[runner.name]
                run.problem_id, run.turn = problem.id, turn
                result.runs.append(run)
                if problem.kind == "chat":
                    answer = decode(strip_eos(run.token_ids, eos_ids))
                    history[runner.name] = history[runner.name] + [
                        {"role": "user", "content": text},
                        {"role": "assistant", "content": answer},
                    ]
                if on_run is not None:
                    on_run(run)
            if greedy and reference is not None:
                outputs = {r.name: (prompts[r.name], best[r.name].token_ids) for r in runners}
                _compare_turn(result, outputs, reference, problem.id, turn, max_new_tokens, eos_ids, decode)
    bar.close()
    return result


def _time_turn(
    runners: Sequence[Runner],
    prompts: dict[str, list[int]],
    max_new_tokens: int,
    seed: int | None,
    *,
    rotate: int,
    repeats: int,
    on_done: Callable[[TimedRun], None],
) -> dict[str, TimedRun]:
    """Each runner's fastest of `repeats` runs on its prompt. Which method goes first rotates
    with the problem and the round, so warm caches and machine noise favour none."""
    best: dict[str, TimedRun] = {}
    for rep in range(repeats):
        for j in range(len(runners)):
            runner = runners[(rotate + rep + j) % len(runners)]
            run = runner.run(prompts[runner.name], max_new_tokens, seed)
            if runner.name not in best or run.wall_ms < best[runner.name].wall_ms:
                best[runner.name] = run
            on_done(run)
    return best


def _advance(bar: Any, problem_id: str, run: TimedRun) -> None:
    bar.update(1)
    bar.set_postfix_str(f"{problem_id} {run.method} {run.new_tokens}t {run.wall_ms / 1000:.1f}s")


def _compare_turn(
    result: BenchResult,
    outputs: dict[str, tuple[list[int], list[int]]],
    reference: Runner,
    problem_id: str,
    turn: int,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    decode: Callable[[Sequence[int]], str],
) -> None:
    """Greedy identity of one turn: every output against the reference's on the same prompt ids
    (`outputs`: runner name -> (prompt ids, output ids)); verdicts and differences go to `result`."""
    ref_prompt = outputs[reference.name][0] if reference.name in outputs else None
    for name, (prompt_ids, out) in outputs.items():
        if name == reference.name:
            result.identical[name].append(True)
            continue
        if prompt_ids != ref_prompt:
            ref_out = reference.run(prompt_ids, max_new_tokens, None).token_ids
            result.references_rerun += 1
        else:
            ref_out = outputs[reference.name][1]
        same = strip_eos(out, eos_ids) == strip_eos(ref_out, eos_ids)
        result.identical[name].append(same)
        if not same:
            result.differences.append(Difference(
                problem_id, turn, name, _first_diff(out, ref_out), list(ref_out), list(out), decode(ref_out), decode(out)
            ))


@dataclass(frozen=True)
class Timing:
    """How the runners are timed: tokens per generation, untimed warm-ups per runner, rounds per
    problem (each runner's fastest counts), the sampling seed and the progress bar."""

    max_new_tokens: int = 128
    warmup: int = 1
    repeats: int = 1
    seed: int | None = 0
    progress: bool = True


def first_turn_ids(problem: Problem, encode: PromptEncoder) -> list[int]:
    """The prompt ids of a problem's first turn (chat problems through the chat template)."""
    if problem.kind == "chat":
        return encode([{"role": "user", "content": problem.turns[0]}], True)
    return encode(problem.turns[0], False)


def warm_up(runner: Runner, problem: Problem, encode: PromptEncoder, tokens: int) -> None:
    """One untimed generation on the problem's first turn, so that the first timed run is not
    charged for loading kernels and filling allocator caches."""
    runner.run(first_turn_ids(problem, encode), tokens, 0)


def measure(
    problems: Sequence[Problem],
    runners: Sequence[Runner],
    factory: RunnerFactory,
    timing: Timing,
    *,
    check_identity: bool = True,
) -> BenchResult:
    """Warm every runner up, then time them all interleaved per problem (`run_benchmark`).
    Greedy outputs are checked against `ar` when the sampling is greedy and `check_identity`."""
    for runner in runners:
        for _ in range(timing.warmup):
            warm_up(runner, problems[0], factory.encode, min(16, timing.max_new_tokens))
    return run_benchmark(
        problems, runners, encode=factory.encode, decode=factory.decode, max_new_tokens=timing.max_new_tokens,
        eos_ids=factory.stop_ids, greedy=factory.sampling.greedy and check_identity, seed=timing.seed,
        progress=timing.progress, repeats=timing.repeats,
    )


# --------------------------------------------------------------------------------------------
# Metrics


@dataclass
class MethodSummary:
    method: str
    runs: int
    new_tokens: int
    mean_token_ms: float  # prefill included
    mean_token_ms_decode: float  # prefill excluded
    mean_generated_length: float | None  # M: tokens per forward call, prefill included
    tokens_per_s: float
    speedup_vs_ar: float | None = None  # prefill included
    speedup_vs_ar_decode: float | None = None
    identical_to_ar: float | None = None  # fraction of runs, greedy only
    retrieval_ms_per_token: float = 0.0
    retrieval_share_of_decode: float = 0.0
    draft_share: float = 0.0  # share of generated tokens that came from accepted drafts
    mean_draft_nodes: float = 0.0  # draft tokens verified per step
    forward_ms_per_step: float | None = None  # engine methods: mean verify forward (root + draft)
    source_share: dict[str, float] = field(default_factory=dict)  # of generated tokens
    accepted_share_by_source: dict[str, float] = field(default_factory=dict)  # of accepted draft tokens
    prefill_ms_mean: float = 0.0
    # auto budget only: predicted vs observed acceptance per probability bin, per source
    reliability: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def summarize_method(method: str, runs: Sequence[TimedRun], identical: Sequence[bool] | None = None) -> MethodSummary:
    """Pooled metrics of one method's runs (total time / total tokens)."""
    tokens = sum(r.new_tokens for r in runs)
    wall = sum(r.wall_ms for r in runs)
    decode = sum(r.decode_ms for r in runs)
    decode_tokens = sum(r.decode_tokens for r in runs)
    steps = sum(r.steps for r in runs)
    retrieval = sum(r.retrieval_ms for r in runs)
    sources: Counter[str] = Counter()
    for r in runs:
        sources.update(r.source_tokens)
    drafted = sum(r.draft_tokens for r in runs)
    pooled: dict[str, list[list[float]]] = {}
    for r in runs:
        for key, cells in r.reliability.items():
            into = pooled.setdefault(key, [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)])
            for b, cell in enumerate(cells):
                into[b] = [x + y for x, y in zip(into[b], cell)]
    accepted_by = {k: v / drafted for k, v in sources.items() if k != "model"} if drafted else {}
    source_total = sum(sources.values())
    return MethodSummary(
        method=method,
        runs=len(runs),
        new_tokens=tokens,
        mean_token_ms=wall / tokens if tokens else math.nan,
        mean_token_ms_decode=decode / decode_tokens if decode_tokens else math.nan,
        mean_generated_length=(tokens / steps) if steps else None,
        tokens_per_s=1000.0 * tokens / wall if wall else 0.0,
        identical_to_ar=(sum(identical) / len(identical)) if identical else None,
        retrieval_ms_per_token=retrieval / tokens if tokens else 0.0,
        retrieval_share_of_decode=retrieval / decode if decode else 0.0,
        draft_share=drafted / tokens if tokens else 0.0,
        mean_draft_nodes=sum(r.drafted_nodes for r in runs) / steps if steps else 0.0,
        forward_ms_per_step=(sum(r.forward_ms for r in runs) / steps) if steps and any(r.forward_ms for r in runs) else None,
        source_share={k: v / source_total for k, v in sorted(sources.items())} if source_total else {},
        accepted_share_by_source=dict(sorted(accepted_by.items())),
        prefill_ms_mean=sum(r.prefill_ms for r in runs) / len(runs) if runs else 0.0,
        reliability=reliability_rows(pooled),
    )


def summarize(result: BenchResult, *, baseline: str = "ar") -> dict[str, MethodSummary]:
    by_method: dict[str, list[TimedRun]] = {}
    for r in result.runs:
        by_method.setdefault(r.method, []).append(r)
    out = {m: summarize_method(m, runs, result.identical.get(m)) for m, runs in by_method.items()}
    base = out.get(baseline)
    if base is not None:
        for s in out.values():
            s.speedup_vs_ar = base.mean_token_ms / s.mean_token_ms if s.mean_token_ms else None
            s.speedup_vs_ar_decode = (
                base.mean_token_ms_decode / s.mean_token_ms_decode if s.mean_token_ms_decode else None
            )
    return out


# --------------------------------------------------------------------------------------------
# Reports


def git_commit() -> str | None:
    """The repository's HEAD commit (and '+dirty' with uncommitted changes), if in a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import torch
        import transformers

        info.update(torch=torch.__version__, transformers=transformers.__version__, torch_threads=torch.get_num_threads())
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:{spec}}{suffix}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown_table(summaries: dict[str, MethodSummary]) -> str:
    head = (
        "| method | ms/token (with prefill) | ms/token (decode) | speedup vs ar | speedup (decode) | M "
        "| draft tokens | draft nodes/step | forward ms/step | retrieval ms/token | retrieval / decode "
        "| identical to ar | accepted per source |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    rows = []
    for s in summaries.values():
        per_source = ", ".join(f"{k} {100 * v:.0f}%" for k, v in s.accepted_share_by_source.items()) or "-"
        rows.append(
            f"| {s.method} | {_fmt(s.mean_token_ms)} | {_fmt(s.mean_token_ms_decode)} "
            f"| {_fmt(s.speedup_vs_ar, '.2f', 'x')} | {_fmt(s.speedup_vs_ar_decode, '.2f', 'x')} "
            f"| {_fmt(s.mean_generated_length)} | {_pct(s.draft_share)} | {_fmt(s.mean_draft_nodes, '.1f')} "
            f"| {_fmt(s.forward_ms_per_step, '.1f')} | {_fmt(s.retrieval_ms_per_token, '.3f')} "
            f"| {_pct(s.retrieval_share_of_decode)} | {_pct(s.identical_to_ar)} | {per_source} |"
        )
    return head + "\n".join(rows) + "\n"


def reliability_table(summaries: dict[str, MethodSummary]) -> str:
    """The auto budget's calibration per method and source ('' when no method predicted)."""
    rows = []
    for s in summaries.values():
        for key, bins in s.reliability.items():
            for b in bins:
                rows.append(
                    f"| {s.method} | {key} | {b['lo']:.1f}-{b['hi']:.1f} | {b['n']} "
                    f"| {b['predicted']:.3f} | {b['observed']:.3f} |"
                )
    if not rows:
        return ""
    head = (
        "Calibration of the auto budget: each drafted node's predicted chance that the model's path "
        "runs through it, against how often it did, per probability bin and source.\n\n"
        "| method | source | predicted bin | nodes | mean predicted | observed |\n"
        "|---|---|---|---:|---:|---:|\n"
    )
    return head + "\n".join(rows) + "\n"


def reliability_chart(summaries: dict[str, MethodSummary], title: str) -> Any | None:
    """Predicted vs observed acceptance, one panel per method that predicted (None if none did)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [n for n, s in summaries.items() if s.reliability]
    if not names:
        return None
    colors = {kind_of(mask): origin(mask).color for mask in (1, 2, 3)}
    colors["all"] = "#6b7280"
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[f"{n}: observed vs predicted" for n in names])
    for col, name in enumerate(names, 1):
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="#9ca3af"),
                                 name="perfect", showlegend=col == 1), 1, col)
        for key, bins in summaries[name].reliability.items():
            fig.add_trace(go.Scatter(
                x=[b["predicted"] for b in bins], y=[b["observed"] for b in bins], mode="lines+markers",
                marker=dict(size=[6 + 2 * math.log2(1 + b["n"]) for b in bins], color=colors.get(key, "#111827")),
                line=dict(color=colors.get(key, "#111827")), name=key, legendgroup=key, showlegend=col == 1,
                text=[f"{b['n']} nodes" for b in bins], hovertemplate="predicted %{x:.2f}, observed %{y:.2f}, %{text}",
            ), 1, col)
        fig.update_xaxes(range=[0, 1], title_text="predicted", row=1, col=col)
        fig.update_yaxes(range=[0, 1], title_text="observed", row=1, col=col)
    fig.update_layout(title=f"{title}: calibration of the auto budget", height=450, template="plotly_white")
    return fig


def _plotly_html(fig: Any, path: Path, extra: Sequence[Any] = ()) -> list[str]:
    """Write the figure (and any `extra` figures below it) as self-contained HTML (works
    offline); PNG of the first figure only if kaleido is present."""
    if extra:
        parts = [fig.to_html(include_plotlyjs=True, full_html=False)]
        parts += [f.to_html(include_plotlyjs=False, full_html=False) for f in extra]
        path.write_text("<html><head><meta charset='utf-8'></head><body>" + "".join(parts) + "</body></html>")
    else:
        fig.write_html(str(path), include_plotlyjs=True, full_html=True)
    written = [str(path)]
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return written
    try:
        png = path.with_suffix(".png")
        fig.write_image(str(png), width=1200, height=450, scale=1)
        written.append(str(png))
    except Exception as exc:  # a broken kaleido/Chrome setup must not lose the results
        print(f"PNG export skipped: {exc}", file=sys.stderr)
    return written


def methods_chart(summaries: dict[str, MethodSummary], title: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(summaries)
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("ms per token (lower is better)", "speedup vs ar", "tokens per step (M)")
    )
    fig.add_trace(
        go.Bar(name="with prefill", x=names, y=[summaries[n].mean_token_ms for n in names], marker_color="#4c78a8"),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(name="decode only", x=names, y=[summaries[n].mean_token_ms_decode for n in names], marker_color="#9ecae9"),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(
            name="speedup",
            x=names,
            y=[summaries[n].speedup_vs_ar or 0 for n in names],
            marker_color="#54a24b",
            text=[_fmt(summaries[n].speedup_vs_ar, ".2f", "x") for n in names],
            textposition="outside",
            showlegend=False,
        ),
        1,
        2,
    )
    fig.add_trace(
        go.Bar(
            name="M",
            x=names,
            y=[summaries[n].mean_generated_length or 0 for n in names],
            marker_color="#f58518",
            showlegend=False,
        ),
        1,
        3,
    )
    fig.update_layout(title=title, barmode="group", height=450, template="plotly_white")
    return fig


def write_report(
    out_dir: Path,
    *,
    title: str,
    summaries: dict[str, MethodSummary],
    result: BenchResult,
    meta: dict[str, Any],
) -> list[str]:
    """results.json, results.md and chart.html (+ chart.png when kaleido is installed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        **meta,
        "machine": machine_info(),
        "timing": "pooled: total ms / total generated tokens; 'decode' excludes prefill; "
        "methods interleaved per problem in one process",
        "methods": {m: asdict(s) for m, s in summaries.items()},
        "identical_runs": {m: v for m, v in result.identical.items()},
        "ar_references_rerun": result.references_rerun,
        "differences": [asdict(d) for d in result.differences],
        "runs": [asdict(r) for r in result.runs],
    }
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(payload, indent=1, default=_json_default))
    md = [f"# {title}", "", _meta_lines(meta), "", markdown_table(summaries)]
    calibration = reliability_table(summaries)
    if calibration:
        md += ["", calibration]
    if result.differences:
        md += ["", f"**{len(result.differences)} greedy output(s) differ from ar** (see results.json)."]
    md_path = out_dir / "results.md"
    md_path.write_text("\n".join(md))
    written = [str(json_path), str(md_path)]
    reliability = reliability_chart(summaries, title)
    written += _plotly_html(methods_chart(summaries, title), out_dir / "chart.html",
                            [reliability] if reliability is not None else [])
    return written


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _meta_lines(meta: dict[str, Any]) -> str:
    keys = ("date", "git_commit", "suite", "problems_run", "model", "device", "dtype", "max_new_tokens", "repeats", "torch_threads", "preset", "settings", "pld", "command")
    lines = []
    for k in keys:
        if k in meta:
            v = meta[k]
            if isinstance(v, (dict, list)):
                v = json.dumps(v)
            lines.append(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}")
    return "\n".join(lines)


def print_differences(result: BenchResult, file: Any = sys.stdout) -> None:
    """Every greedy output that differs from ar, in full."""
    for d in result.differences:
        print(
            f"\nDIFFERENCE {d.method} vs ar on {d.problem_id} turn {d.turn}, first differing token {d.first_diff}:",
            file=file,
        )
        print(f"  ar   ids: {d.reference}\n  {d.method} ids: {d.output}", file=file)
        print(f"  ar   text: {d.reference_text!r}\n  {d.method} text: {d.output_text!r}", file=file)


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
