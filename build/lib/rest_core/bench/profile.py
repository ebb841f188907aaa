"""Where a decoding step's time goes (`python -m rest_core bench profile`).

Reads the engine's own step events: each `StepTimings` splits a step into retrieval, drafting
(trie, selection, layout), the verify forward (its mask and position inputs, the model, and the
output head when lazy logits score rows during the walk), the acceptance walk and the commit
(the accepted KV rows kept, the sources extended). Also measures the forward-cost curve with
the full head against lazy logits (the body over q rows plus the head over one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent, StepTimings

PHASES = ("retrieve", "draft", "mask", "model", "head", "walk", "commit")
PHASE_HELP = {
    "retrieve": "suffix search in each source",
    "draft": "trie merge, subtree selection, tree layout",
    "mask": "tree mask and position ids",
    "model": "the model's forward (with the full head unless logits are lazy)",
    "head": "output head over the rows the walk reached (lazy logits)",
    "walk": "acceptance walk (argmax / sampling per visited row)",
    "commit": "keep the accepted KV rows, extend the sources",
}
OWN_COMPUTE = ("model", "head")  # the model's own work; the rest is ours


def phases(t: StepTimings) -> dict[str, float]:
    """One step's milliseconds per phase (they sum to t.total_ms)."""
    return {
        "retrieve": t.retrieve_ms,
        "draft": t.draft_ms,
        "mask": t.mask_ms,
        "model": t.forward_ms - t.mask_ms - t.head_ms,
        "head": t.head_ms,
        "walk": t.accept_ms - t.commit_ms,
        "commit": t.commit_ms,
    }


@dataclass(frozen=True)
class Breakdown:
    """Mean milliseconds per step of each phase over a set of steps, with what they drafted."""

    steps: int
    tokens: int
    mean_q: float  # rows per verify forward (root + drafted nodes)
    ms: dict[str, float]

    @property
    def step_ms(self) -> float:
        return sum(self.ms.values())

    @property
    def M(self) -> float:  # noqa: N802  (the paper's name)
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def overhead_share(self) -> float:
        """The share of step time outside the model's own compute."""
        total = self.step_ms
        return 1 - sum(self.ms[p] for p in OWN_COMPUTE) / total if total else 0.0


def breakdown(events: Sequence[StepEvent]) -> Breakdown:
    n = len(events)
    sums = dict.fromkeys(PHASES, 0.0)
    for e in events:
        for k, v in phases(e.timings).items():
            sums[k] += v
    return Breakdown(
        steps=n,
        tokens=sum(len(e.tokens) for e in events),
        mean_q=sum(1 + len(e.draft_idx) for e in events) / n if n else 0.0,
        ms={k: v / n if n else 0.0 for k, v in sums.items()},
    )


def run_engines(
    engines: Mapping[str, Any], prompts: Sequence[Sequence[int]], config: Any, *, warmup: int = 1
) -> tuple[dict[str, list[StepEvent]], dict[str, list[list[int]]]]:
    """Each engine on each prompt, interleaved per prompt (so machine load falls on both alike),
    after `warmup` untimed generations each. Returns every engine's step events and outputs."""
    events: dict[str, list[StepEvent]] = {name: [] for name in engines}
    outputs: dict[str, list[list[int]]] = {name: [] for name in engines}
    for engine in engines.values():
        for _ in range(warmup):
            list(engine.generate(prompts[0], replace(config, max_new_tokens=min(16, config.max_new_tokens))))
    for prompt in prompts:
        for name, engine in engines.items():
            steps = list(engine.generate(prompt, config))
            events[name].extend(steps)
            outputs[name].append([t for e in steps for t in e.tokens])
    return events, outputs


def cost_curves(model: Any, head: Any, max_q: int = 64) -> dict[str, CostCurve]:
    """The forward-cost curve with the full head and with lazy logits (body + one head row)."""
    from rest_core.decode.cost import measure_cost_curve

    curves = {"full logits": measure_cost_curve(model, max_q)}
    if head is not None:
        curves["lazy logits"] = measure_cost_curve(model, max_q, head=head)
    return curves


def curve_table(curves: Mapping[str, CostCurve]) -> str:
    names = list(curves)
    sizes = next(iter(curves.values())).sizes
    lines = ["| q (tokens) | " + " | ".join(f"{n} ms" for n in names) + " |", "|---:|" + "---:|" * len(names)]
    for i, q in enumerate(sizes):
        lines.append(f"| {q} | " + " | ".join(f"{curves[n].ms[i]:.1f}" for n in names) + " |")
    return "\n".join(lines)


def breakdown_table(parts: Mapping[str, Breakdown]) -> str:
    names = list(parts)
    lines = [
        "| phase | " + " | ".join(f"{n} ms/step (share)" for n in names) + " | what |",
        "|---|" + "---:|" * len(names) + "---|",
    ]
    for p in PHASES:
        cells = [f"{b.ms[p]:.2f} ({100 * b.ms[p] / b.step_ms:.1f}%)" if b.step_ms else "-" for b in parts.values()]
        lines.append(f"| {p} | " + " | ".join(cells) + f" | {PHASE_HELP[p]} |")
    lines.append("| **step** | " + " | ".join(f"**{b.step_ms:.2f}**" for b in parts.values()) + " | |")
    lines.append(
        "| outside the model | "
        + " | ".join(f"{100 * b.overhead_share:.1f}%" for b in parts.values())
        + " | mask + retrieve + draft + walk + commit |"
    )
    lines.append(
        "| steps / M / mean q | "
        + " | ".join(f"{b.steps} / {b.M:.2f} / {b.mean_q:.2f}" for b in parts.values())
        + " | |"
    )
    lines.append(
        "| ms per token | "
        + " | ".join(f"{b.step_ms / b.M:.2f}" if b.M else "-" for b in parts.values())
        + " | decode only |"
    )
    return "\n".join(lines)


def report(
    title: str,
    curves: Mapping[str, CostCurve],
    parts: Mapping[str, Breakdown],
    identical: bool,
    meta: Mapping[str, Any],
) -> tuple[str, dict[str, Any]]:
    """(results.md text, results.json data)."""
    md = (
        "\n\n".join(
            [
                f"# {title}",
                f"Command: `{meta.get('command', '')}`",
                "## Forward cost (one forward over q tokens after 256 cached; fastest of 2)",
                curve_table(curves),
                "## One step, phase by phase (mean over all steps)",
                breakdown_table(parts),
                f"Outputs identical between the engines: {'yes' if identical else '**NO**'}.",
            ]
        )
        + "\n"
    )
    data = {
        **meta,  # (the bench's run metadata, its date included)
        "cost_curves": {n: asdict(c) for n, c in curves.items()},
        "breakdown": {
            n: {**asdict(b), "M": b.M, "step_ms": b.step_ms, "overhead_share": b.overhead_share}
            for n, b in parts.items()
        },
        "identical": identical,
    }
    return md, data
