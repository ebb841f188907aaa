"""What the page's time figures measure, one definition each, so two figures of the same quantity
come from one place and say how they differ: a forward's time (`ForwardTime`: Why this c?'s
measured one-token forward, Compare's plain decoding forwards) and a decode's time per token
(`PER_TOKEN`: Compare's table). Pure functions over events and the cost curve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent
from rest_core.ui.style import plural


def shown(value: float, places: int = 1) -> float:
    """`value` as the page prints it with `places` decimals. Ratios and differences the page
    claims are taken of these, so a reader's own arithmetic on the printed figures gets the
    printed result."""
    return float(f"{value:.{places}f}")


def ratio(a: float, b: float, places: int = 1) -> float:
    """a / b of the two figures as printed with `places` decimals (inf when b prints as 0)."""
    b = shown(b, places)
    return shown(a, places) / b if b else float("inf")


def divided(a: float, b: float, places: int = 1, to: int = 2) -> str:
    """ "55.2 / 41.3 = 1.34": a division of printed figures and its result, `to` decimals."""
    return f"{shown(a, places):.{places}f} / {shown(b, places):.{places}f} = {ratio(a, b, places):.{to}f}"


def minus(a: float, b: float, places: int = 1) -> str:
    """ "55.2 − 54.1 = 1.1": a difference of printed figures."""
    a, b = shown(a, places), shown(b, places)
    return f"{a:.{places}f} − {b:.{places}f} = {a - b:.{places}f}"


# The conditions a time figure was measured under, one wording each, said beside every figure
# they qualify: the same forward reads longer while the page draws on the same cores, and a
# fastest of several runs reads shorter than a mean.
LIVE = "live, while the page draws"  # the chat's steps: the page streams and draws meanwhile
STEPPED = "one step per click"  # the step-through's steps: each its own model call
NOTHING_DRAWN = "nothing drawn"  # Compare's runs: back to back, nothing drawn until all are done
COMPARED = f"mean over the run, {NOTHING_DRAWN}"
# Beside a live step's timing in the chat's inspector: why it reads slower than the same step's
# cost in Compare and Why this c? (screens14: "forward 343.1 ms" for 13 drafts against Compare's
# 141.2 ms a step, explained only by "(live, while the page draws)").
LIVE_SLOWER = f"{LIVE}: slower than Compare's steps, which are timed with {NOTHING_DRAWN}"

# The two tokens/s the page shows, each naming what it measures in its own label, from one place:
# the live stats under the chat and Compare's runs.
LIVE_RATE = f"tokens/s ({LIVE})"
LIVE_RATE_SO_FAR = f"tokens/s so far ({LIVE})"
COMPARE_RATE = f"tokens/s, decode speed ({NOTHING_DRAWN})"

# Compare's "per token": the decode's wall clock over its new tokens.
PER_TOKEN = "Per token, wall clock: whole decode steps (forward, retrieval, acceptance), prefill excluded"


def alone(reps: int) -> str:
    """Why this c?'s cost curve: "measured alone, fastest of 5 runs" (reps 0: not recorded)."""
    return f"measured alone, fastest of {reps} runs" if reps else "measured alone"


def mean_over(steps: int, condition: str) -> str:
    """ "mean of 21 steps, one step per click": an answer's mean step figure and how its steps ran."""
    return f"mean of {steps} steps, {condition}" if steps != 1 else f"one step, {condition}"


@dataclass(frozen=True)
class StepSplit:
    """A step's milliseconds by part (one step's, or a run's means): the forward, retrieval (the
    sources' lookups), the tree (merging their tries, choosing and laying out the draft),
    acceptance (the walk and keeping the accepted rows) and, for a run's wall clock, the time
    between steps. Printed, the parts add up to the step: each is rounded to 0.1 ms and the step
    is their printed sum (`line`), so a reader's own addition gets the printed total."""

    forward: float
    retrieval: float
    tree: float
    acceptance: float
    between: float = 0.0  # a run's wall clock per step beyond its steps' own timings

    def parts(self) -> list[tuple[str, float]]:
        """(name, ms as printed), the parts a plain step lacks (0 ms) left out."""
        named = [
            ("forward", self.forward),
            ("retrieval", self.retrieval),
            ("tree", self.tree),
            ("acceptance", self.acceptance),
            ("between steps", self.between),
        ]
        return [(k, shown(v)) for k, v in named if k == "forward" or shown(v) > 0]

    @property
    def total(self) -> float:
        """The step as printed: the sum of its printed parts."""
        return shown(sum(v for _, v in self.parts()))

    def line(self) -> str:
        """ "step 115.7 ms = forward 113.5 + retrieval 0.5 + tree 0.7 + acceptance 1.0"."""
        return f"step {self.total:.1f} ms = " + " + ".join(f"{k} {v:.1f}" for k, v in self.parts())


def step_split(event: StepEvent) -> StepSplit:
    """One step's timings as parts (the engine's total is exactly their sum)."""
    t = event.timings
    return StepSplit(t.forward_ms, t.retrieve_ms, t.draft_ms, t.accept_ms)


def run_split(events: Sequence[StepEvent], method: str) -> StepSplit | None:
    """A run's mean step by part, over its `method` steps ("rest" or "ar"), and the wall clock
    per step its steps' own timings do not cover (`between`): the parts add up to Compare's
    step row (the run's decode time over its steps). None without such steps."""
    steps = [e for e in events if e.method == method]
    if not steps:
        return None
    mean = lambda f: float(np.mean([f(e.timings) for e in steps]))  # noqa: E731
    parts = StepSplit(
        mean(lambda t: t.forward_ms),
        mean(lambda t: t.retrieve_ms),
        mean(lambda t: t.draft_ms),
        mean(lambda t: t.accept_ms),
    )
    wall = 1000 * steps[-1].totals.elapsed_s / steps[-1].totals.steps if steps[-1].totals.steps else 0.0
    # rounded parts first: the between part is what the printed step (`step_ms`) leaves over them
    between = shown(wall) - sum(v for _, v in parts.parts())
    return StepSplit(parts.forward, parts.retrieval, parts.tree, parts.acceptance, max(between, 0.0))


@dataclass(frozen=True)
class ForwardTime:
    """Milliseconds of one forward of `q` tokens over a KV cache of `cache` tokens (lo, hi), the
    `stat` ("mean" or "fastest") of `runs` forwards; `where` says whose forwards they were."""

    ms: float
    q: int
    cache: tuple[int, int] | None  # None: not recorded
    runs: int  # 0: not recorded
    stat: str
    where: str

    def what(self) -> str:
        """The definition in words: "one forward of 1 token over a cache of 256 tokens, the fastest of 2 runs"."""
        if self.cache is None or not self.runs:
            return f"one forward of {plural(self.q, 'token')}, measured in a way not recorded"
        lo, hi = self.cache
        over = f"a cache of {lo:,} tokens" if lo == hi else f"caches of {lo:,}–{hi:,} tokens"
        return f"one forward of {plural(self.q, 'token')} over {over}, the {self.stat} of {plural(self.runs, 'run')}"

    def line(self) -> str:
        """ "460.2 ms (one forward of 1 token over …, Why this c?'s measurement)"."""
        return f"{self.ms:.1f} ms ({self.what()}, {self.where})"


def plain_forward(events: Sequence[StepEvent]) -> ForwardTime | None:
    """The mean forward of a plain decoding run (one token each, over the cache the answer had
    reached); None without plain steps. The mean, as Compare's per step and per token are means:
    a step is its forward and more, so its mean can never read shorter than its forward's."""
    plain = [e for e in events if e.method == "ar"]
    if not plain:
        return None
    # before a step, the cache holds the prompt and every earlier token but the step's root
    caches = [e.totals.prompt_tokens - 1 + e.totals.new_tokens - len(e.tokens) for e in plain]
    ms = float(np.mean([e.timings.forward_ms for e in plain]))
    return ForwardTime(ms, 1, (min(caches), max(caches)), len(plain), "mean", "Compare's plain decoding")


def rest_forward(events: Sequence[StepEvent]) -> ForwardTime | None:
    """The mean forward of a REST run's steps, each over the root and its drafts (q: the median
    of those sizes); None without REST steps."""
    steps = [e for e in events if e.method == "rest"]
    if not steps:
        return None
    caches = [e.totals.prompt_tokens - 1 + e.totals.new_tokens - len(e.tokens) for e in steps]
    q = int(np.median([1 + (len(e.draft) if e.draft is not None else 0) for e in steps]))
    ms = float(np.mean([e.timings.forward_ms for e in steps]))
    return ForwardTime(ms, q, (min(caches), max(caches)), len(steps), "mean", "Compare's REST")


def curve_forward(curve: CostCurve) -> ForwardTime:
    """The cost curve's one-token forward, as it was measured (`measure_cost_curve`: the fastest
    of its runs over a cache of random tokens)."""
    cache = (curve.cache_len, curve.cache_len) if curve.cache_len else None
    return ForwardTime(float(curve(1)), 1, cache, curve.reps, "fastest", "Why this c?'s measurement")


def same_forward(measured: ForwardTime, compared: ForwardTime | None) -> str:
    """Why this c?'s one-token forward beside Compare's, both figures and both definitions ("" without
    a comparison): they time the same forward, on other caches, at other moments, by another statistic."""
    if compared is None:
        return ""
    return (
        f"One forward of 1 token: {measured.line()}; {compared.line()}; the first is "
        f"{divided(measured.ms, compared.ms)}× the second. Both time the same "
        "forward; they differ by the cache's size, the statistic and what else the machine was doing meanwhile."
    )


def lookup_rate(decode_tokens: int, total: int, end_ms: float) -> tuple[float, str]:
    """Prompt lookup's tokens/s and its sum in printed figures, one source for its line, its bar and
    its line over time: "64 tokens, the first with its prefill (REST's and plain's prefills write
    none), off the clock; 63 / 3.36 s = 18.7 tokens/s". Every token counts, as in REST's and plain decoding's "tokens / steps", the first
    included; transformers writes the first of its `total` tokens with the prefill, which no rate
    on the page times, so the rate counts the `decode_tokens` that came in `end_ms`."""
    seconds = shown(end_ms / 1000, 2)
    rate = decode_tokens / seconds if seconds else 0.0
    if total > decode_tokens:
        first = (
            "the first with its prefill"
            if total - decode_tokens == 1
            else f"the first {total - decode_tokens} with its prefill, which verifies drafts too"
        )
        first += " (REST's and plain's prefills write none), off the clock"
        return rate, f"{total} tokens, {first}; {decode_tokens} / {seconds:.2f} s = {rate:.1f} tokens/s"
    return rate, f"{decode_tokens} tokens / {seconds:.2f} s = {rate:.1f} tokens/s"


@dataclass(frozen=True)
class Measured:
    """What Compare measured on one prompt, kept for Why this c? to set its prediction beside when
    it describes an answer to the same prompt: the headline's speedup, REST's M and its mean step
    by part."""

    prompt_ids: tuple[int, ...]
    speedup: float
    m: float
    rest: StepSplit | None
    prompt: str = ""  # the prompt's words as Compare's status names it, quoted and shortened
    plain: StepSplit | None = None  # plain decoding's mean step by part
