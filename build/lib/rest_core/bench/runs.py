"""One method's generation on one prompt, as the benchmark measures it.

`TimedRun` holds the tokens a runner produced and what they cost; `run_from_events` folds an
engine's step events into one, counting the auto budget's predictions against outcomes per
source and probability bin (`add_reliability`, `RELIABILITY_BINS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rest_core.decode.events import StepEvent
from rest_core.sources import count_origins, kind_of


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
