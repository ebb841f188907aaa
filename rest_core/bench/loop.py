"""The benchmark loop: runners timed on a suite's problems, greedy outputs checked against `ar`.

`run_benchmark` walks the problems one by one and, within each problem, runs every method in
turn (rotating which goes first), so machine noise hits all methods alike and the speedups are
ratios measured in the same run. `measure` warms the runners up and times them under a
`Timing`; the CLI (`commands/bench.py`) and the ablations (`ablations.py`) are both built on it
and on a `runners.RunnerFactory`. `metrics.summarize` turns the runs into per-method metrics and
`report.write_report` writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rest_core.bench.runners import Runner, RunnerFactory, strip_eos
from rest_core.bench.runs import TimedRun
from rest_core.bench.suites import Problem


class PromptEncoder(Protocol):
    def __call__(self, prompt: str | list[dict], chat: bool) -> list[int]: ...


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
            prompts = _turn_prompts(runners, problem, text, history, encode)
            run_seed = None if seed is None else seed + 1000 * pi + turn
            best = _time_turn(
                runners,
                prompts,
                max_new_tokens,
                run_seed,
                rotate=pi,
                repeats=repeats,
                on_done=lambda run, pid=problem.id: _advance(bar, pid, run),
            )
            for runner in runners:
                run = best[runner.name]
                run.problem_id, run.turn = problem.id, turn
                result.runs.append(run)
                if problem.kind == "chat":
                    answer = decode(strip_eos(run.token_ids, eos_ids))
                    history[runner.name] = _with_answer(history[runner.name], text, answer)
                if on_run is not None:
                    on_run(run)
            if greedy and reference is not None:
                outputs = {r.name: (prompts[r.name], best[r.name].token_ids) for r in runners}
                _compare_turn(result, outputs, reference, problem.id, turn, max_new_tokens, eos_ids, decode)
    bar.close()
    return result


def _turn_prompts(
    runners: Sequence[Runner], problem: Problem, text: str, history: dict[str, list[dict]], encode: PromptEncoder
) -> dict[str, list[int]]:
    """Each runner's prompt ids for one turn; in a chat, after that runner's own earlier answers."""
    return {
        r.name: encode(history[r.name] + [{"role": "user", "content": text}], True)
        if problem.kind == "chat"
        else encode(text, False)
        for r in runners
    }


def _with_answer(history: list[dict], question: str, answer: str) -> list[dict]:
    """A new chat history: `history`, then this turn's question and answer."""
    return history + [
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]


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
            result.differences.append(
                Difference(
                    problem_id,
                    turn,
                    name,
                    _first_diff(out, ref_out),
                    list(ref_out),
                    list(out),
                    decode(ref_out),
                    decode(out),
                )
            )


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
        problems,
        runners,
        encode=factory.encode,
        decode=factory.decode,
        max_new_tokens=timing.max_new_tokens,
        eos_ids=factory.stop_ids,
        greedy=factory.sampling.greedy and check_identity,
        seed=timing.seed,
        progress=timing.progress,
        repeats=timing.repeats,
    )
