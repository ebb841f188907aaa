"""Compare's table and what it reads (`Comparison`): its rows (`comparison_rows`), the ones a newcomer needs above the fold
(`MAIN_ROWS`), what its time rows measure (`measures_note`) and the HTML (`table`). A step's time
is split into its parts (`measures.run_split`), the parts printed so that they add up to the step,
so Compare's REST step can be set against Why this c?'s forward and other work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rest_core.decode.events import Totals
from rest_core.ui.measures import COMPARE_RATE, COMPARED, PER_TOKEN, ForwardTime, StepSplit, ratio, shown
from rest_core.ui.style import esc


def step_ms(totals: Totals) -> float:
    """A run's mean step, wall clock (forward, retrieval, acceptance; prefill excluded)."""
    return 1000 * totals.elapsed_s / totals.steps if totals.steps else 0.0


@dataclass(frozen=True)
class Comparison:
    rest: Totals
    ar: Totals
    identical: bool | None  # None when sampling (outputs may differ by design)
    lengths: tuple[int, int] = (0, 0)  # tokens REST and plain decoding wrote
    # the mean forward of each run (REST's over the root and its drafts, plain's over 1 token)
    forwards: tuple[ForwardTime | None, ForwardTime | None] = (None, None)
    # each run's mean step by part (REST's, plain's), printed so that they add up to the step row
    splits: tuple[StepSplit | None, StepSplit | None] = (None, None)
    # the auto budget's mean drafts a REST step (None: a fixed c drafted)
    auto_drafts: float | None = None
    # plain decoding's steps, wall clock: (median, mean) ms; None: not known
    plain_steps: tuple[float, float] | None = None

    @property
    def compared(self) -> int:
        """How many tokens "identical" speaks for: both texts whole, or, when one run was cut
        short, the part both wrote."""
        return min(self.lengths)

    @property
    def speedup(self) -> float:
        """REST's tokens/s over plain decoding's, as the table prints them (0 without plain tokens)."""
        return ratio(self.rest.tokens_per_s, self.ar.tokens_per_s) if shown(self.ar.tokens_per_s) > 0 else 0.0

    def load_note(self) -> str:
        """Why the headline's speedup cannot be believed, or "" (`load_changed`, `uneven_note`)."""
        return load_changed(self.rest, self.ar) or uneven_note(self.plain_steps)


# Plain steps all do the same work: a mean this far above their median means some ran slowed.
UNEVEN = 1.25


def uneven_note(plain_steps: tuple[float, float] | None) -> str:
    """ "" when plain decoding's steps took alike; else that some ran slowed (its mean step over
    UNEVEN times its median), so the speedup rests on a slowed baseline. Each plain step writes one
    token with the same one-token forward, so on a steady machine they take alike: seen, a plain
    run whose first steps took 270 ms and the rest 40 made a 1.98x speedup of a 1.6x one."""
    if plain_steps is None:
        return ""
    median, mean = plain_steps
    if median <= 0 or mean <= UNEVEN * median:
        return ""
    return (
        f"measured, but plain decoding's steps ran unevenly (median {median:.1f} ms, mean {mean:.1f} ms): "
        "the machine's load changed during the runs; rerun Compare"
    )


def load_changed(rest: Totals, ar: Totals) -> str:
    """ "" when the two runs' figures can be true together; else what gave the load away ("measured,
    but above M = 1.90: …", to follow the speedup). A REST
    step does a plain step's work and more, so its speedup is M over a ratio of at least 1: a
    measured speedup above M, or a REST step shorter than a plain one, means the machine's load
    changed between the two back-to-back runs."""
    if not (rest.steps and ar.steps and rest.elapsed_s > 0 and ar.elapsed_s > 0 and ar.tokens_per_s > 0):
        return ""
    speedup, m = rest.tokens_per_s / ar.tokens_per_s, rest.mean_generated_length
    if speedup > m:
        seen = f"above M = {m:.2f}"
    elif step_ms(rest) < step_ms(ar):
        seen = f"a REST step ({step_ms(rest):.1f} ms) measured shorter than a plain one ({step_ms(ar):.1f} ms)"
    else:
        return ""
    return f"measured, but {seen}: the machine's load changed between the two runs; rerun Compare"


STEP_ROW = f"time per step ({COMPARED})"
# the step row's parts, each a mean over the run's steps; printed, they add up to the step row
FORWARD_ROW = "· forward (REST: last token + drafts)"
TREE_ROW = "· retrieval + tree"
ACCEPT_ROW = "· acceptance + between steps"
SAME_ROW = "same output (greedy)"
# The rows a newcomer needs, under the headline; the table's others fold with the arithmetic.
MAIN_ROWS = (COMPARE_RATE, "tokens / steps (M)", STEP_ROW, FORWARD_ROW, TREE_ROW, ACCEPT_ROW, SAME_ROW)

# Prefill is timed apart and left out of every other row; its row says so, and why it can read 0.
PREFILL_ROW = "prefill (apart: in no row above; the prompt's part not already in the KV cache)"


def split_cells(split: StepSplit | None) -> tuple[str, str, str]:
    """The step's parts as the table prints them: forward, retrieval + tree ("-" for a plain
    step), acceptance + between steps; from the printed parts, so they add up to the step row."""
    if split is None:
        return "-", "-", "-"
    parts = dict(split.parts())
    tree = shown(parts.get("retrieval", 0.0) + parts.get("tree", 0.0))
    rest = shown(parts.get("acceptance", 0.0) + parts.get("between steps", 0.0))
    return f"{parts['forward']:.1f} ms", f"{tree:.1f} ms" if tree else "-", f"{rest:.1f} ms"


def comparison_rows(cmp: Comparison) -> list[tuple[str, str, str]]:
    r, a = cmp.rest, cmp.ar
    (r_fwd, r_tree, r_acc), (a_fwd, a_tree, a_acc) = (split_cells(s) for s in cmp.splits)
    rows = [
        (COMPARE_RATE, f"{r.tokens_per_s:.1f}", f"{a.tokens_per_s:.1f}"),
        (
            "per token (wall clock, whole steps, prefill excluded)",
            f"{r.mean_token_ms:.1f} ms",
            f"{a.mean_token_ms:.1f} ms",
        ),
        (STEP_ROW, *(f"{_step(s, t):.1f} ms" for s, t in zip(cmp.splits, (r, a)))),
        (FORWARD_ROW, r_fwd, a_fwd),
        (TREE_ROW, r_tree, a_tree),
        (ACCEPT_ROW, r_acc, a_acc),
        (
            "tokens / steps (M)",
            f"{r.new_tokens} / {r.steps} = {r.mean_generated_length:.2f}",
            f"{a.new_tokens} / {a.steps} = {a.mean_generated_length:.2f}",
        ),
        ("retrieval per token", f"{r.retrieval_ms_per_token:.2f} ms", "-"),
        ("tokens from drafts", f"{100 * r.draft_share:.0f}%", "-"),
        (PREFILL_ROW, prefill_cell(r.prefill_ms), prefill_cell(a.prefill_ms)),
    ]
    if cmp.identical is not None:
        rows.append((SAME_ROW, ("yes" if cmp.identical else "NO") + f", {cmp.compared} tokens compared", ""))
    return rows


def _step(split: StepSplit | None, totals: Totals) -> float:
    """The step row's figure: its parts' printed sum where the run's steps were timed by part."""
    return split.total if split is not None else step_ms(totals)


def prefill_cell(ms: float) -> str:
    """ "120 ms", or "0 ms (the prompt was cached)": a run over a prompt whose KV the last answer
    left in the cache prefills nothing new."""
    return f"{ms:.0f} ms" + (" (the prompt was cached)" if round(ms) == 0 else "")


def measures_note(cmp: Comparison) -> list[str]:
    """What the table's time rows measure, one bullet each, and plain decoding's per token beside
    its one-token forward, from the run's own figures."""
    out = [
        f"{PER_TOKEN}.",
        "Step and its parts: means over the run's steps, nothing drawn meanwhile; the parts, each "
        "rounded to 0.1 ms, add up to the step. A plain step's acceptance is picking its one token.",
    ]
    plain = cmp.forwards[1]
    if plain is not None and cmp.ar.new_tokens:
        out.append(
            f"Plain decoding: {cmp.ar.mean_token_ms:.1f} ms per token against its forward's {plain.line()}: a plain "
            "step is one such forward, plus picking the token and the step's own bookkeeping."
        )
    return out


# The table's two columns, in its head and on each of their cells (`table`).
RUNS = ("REST", "plain")


def table(rows: Sequence[tuple[str, str, str]]) -> str:
    """The table; a row with words for both runs in REST's cell alone ("yes, 64 tokens compared")
    spans both columns and may wrap, where the figures keep to one line (assets/app.css, why2);
    a step's part ("· forward") follows its step. Each figure's cell names its run (data-label):
    on a phone, where the head is hidden and each row stacks its label over its two figures,
    every figure says whose it is (assets/app.css, phone)."""
    rest, plain = RUNS
    body = "".join(
        f'<tr><th>{esc(k)}</th><td data-label="{rest}">{esc(r)}</td><td data-label="{plain}">{esc(a)}</td></tr>'
        if a
        else f'<tr><th>{esc(k)}</th><td colspan="2" class="both">{esc(r)}</td></tr>'
        for k, r, a in rows
    )
    head = f"<thead><tr><th></th><th>{rest}</th><th>{plain}</th></tr></thead>"
    return f'<div class="scroll-x"><table class="cmp">{head}<tbody>{body}</tbody></table></div>'
