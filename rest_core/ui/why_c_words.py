"""Why this c?'s caption, in words: a two-line takeaway (what was predicted for this answer and
the best c now; what was measured on it), then every teaching sentence in folds: how the
prediction is made, the prediction beside what was measured, the curve's shape, the arithmetic.
The figures come from rest_core.ui.why_c_view, one function per figure; this module only words
them, so a number in the takeaway is the same call's as the fold's sentence that explains it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent
from rest_core.ui.measures import (
    COMPARED,
    LIVE,
    STEPPED,
    ForwardTime,
    Measured,
    alone,
    curve_forward,
    divided,
    mean_over,
    ratio,
    same_forward,
    shown,
)
from rest_core.ui.style import esc, plural
from rest_core.ui.why_c_view import (
    auto_budget,
    chosen_speedup,
    expected_accepted,
    expected_speedup,
    read_between,
    step_overhead,
    verified,
    verified_counts,
)
from rest_core.ui.words import CHECK_LABEL

NO_ANSWER = "Generate (or step through) an answer first: the expected speedup needs the answer's acceptance figures."
# the summaries of the caption's folds, in the order they follow the takeaway
MEASURED_FOLD = "What was measured: the forward's cost and this answer's steps"
PREDICTED_FOLD = "How the prediction is made"
BESIDE_FOLD = "The prediction beside Compare's measurement"
SHAPE_FOLD = "The predicted curve's shape"
SUMS_FOLD = "The arithmetic"
NEAR_ONE = 2  # where no c above this pays, the takeaway says only c near 1 pays


def why_c_caption(*args: Any, notes: Sequence[str] = (), **kwargs: Any) -> str:
    """What the figure says, as HTML: the two-line takeaway first (`why_c_points`, given the
    arguments it takes), then each group of bullets folded under its summary, the arithmetic
    last with `notes` (plain text) at its end. Only the takeaway shows until a fold is opened."""
    lead, sections, sums = why_c_points(*args, **kwargs)
    head = "".join(f'<p class="why-lead">{line}</p>' for line in lead)
    folds = "".join(fold(summary, points) for summary, points in sections)
    return f'<div class="why-c">{head}</div>{folds}{fold(SUMS_FOLD, [*sums, *notes], "why-sums")}'


def fold(summary: str, points: Sequence[str], cls: str = "why-fold") -> str:
    """One fold: `summary` shown, `points` (plain text) as bullets under it; "" without points."""
    if not points:
        return ""
    items = "".join(f"<li>{esc(x)}</li>" for x in points)
    return f'<details class="{cls}"><summary>{esc(summary)}</summary><ul>{items}</ul></details>'


def why_c_points(
    curve: CostCurve,
    events: Sequence[StepEvent],
    chosen_c: int,
    answer: str = "This answer",
    max_c: int = 64,
    compared: ForwardTime | None = None,
    measured: Measured | None = None,
    ran: str = STEPPED,
    elsewhere: Measured | None = None,
) -> tuple[list[str], list[tuple[str, list[str]]], list[str]]:
    """(the takeaway's two lines as HTML, the folds as (summary, bullets), the arithmetic), plain
    text but the takeaway: the cost of 1 and 1 + c tokens (`curve_forward`), `answer`'s M and its
    accepted drafts (`answer`: whose steps `events` are), the plotted best c beside what the steps
    verified, why no c pays when none does, Compare's plain forward (`compared`), and Compare's
    speedup and step beside the prediction for this prompt (`measured`) or named as another
    prompt's (`elsewhere`); `ran`: how the steps ran."""
    rest = [e for e in events if e.method == "rest"]
    if not rest:
        return [esc(NO_ANSWER)], [], []
    c = min(chosen_c, max_c)
    _, speedup = expected_speedup(curve, events, np.arange(0, max_c + 1))
    best = int(np.argmax(speedup))
    lead = takeaway(curve, rest, c, speedup, answer, measured, elsewhere, ran)
    seen, sums = _measured_points(curve, rest, c, best, answer, ran)
    predicted, beside, more = _predicted_points(curve, events, rest, c, speedup, answer, ran, measured, elsewhere)
    sums.extend(more)
    shape = left_end(curve, events, speedup)
    if float(speedup[1:].max()) < 1.0:
        point, why = _none_pays(curve, max_c)
        shape.append(point)
        sums.append(why)
    same = same_forward(curve_forward(curve), compared)
    if same:
        sums.append(same)
    sums.append("Each answer has its own M; the stats under the chat show the last chat answer's.")
    sections = [(MEASURED_FOLD, seen), (PREDICTED_FOLD, predicted), (BESIDE_FOLD, beside), (SHAPE_FOLD, shape)]
    return lead, sections, sums


# Where to press to measure the prediction on the answer's own prompt, by whose answer it is
CHECK_HINT = {
    STEPPED: f"press “{CHECK_LABEL}” to measure it",
    LIVE: "press Compare under the chat to measure it",
}


def takeaway(
    curve: CostCurve,
    rest: Sequence[StepEvent],
    c: int,
    speedup: np.ndarray,
    answer: str,
    measured: Measured | None = None,
    elsewhere: Measured | None = None,
    ran: str = STEPPED,
) -> list[str]:
    """The caption's two lines, as HTML: what was PREDICTED (the speedup at the answer's c,
    `chosen_speedup`, and the best c on the plotted curve `speedup`, saying plainly when no c or
    only c near 1 pays) and what was MEASURED (the answer's M, and Compare's speedup when it ran on
    this prompt, else where to press to measure it: `ran` says whose answer it is). Every figure
    is one the folds explain, from the same call."""
    value, _ = chosen_speedup(curve, rest, c)
    best = int(np.argmax(speedup))
    whose = answer.replace("The ", "the ", 1).replace("This ", "this ", 1)
    if auto_budget(rest):
        used = f"{whose} let the auto budget verify up to c = {c} drafts a step; c = {c} on every step is"
    else:
        used = f"{whose} used c = {c},"
    paying = [k for k in range(1, len(speedup)) if shown(float(speedup[k]), 2) > 1.0]
    top = f"c = {best}, predicted {float(speedup[best]):.2f}×"
    if not paying:
        now = f"no c pays on this device now: the best, {top}, is no faster than plain decoding"
    elif max(paying) <= NEAR_ONE:
        now = f"only c near 1 pays on this device now: the best is {top}"
    elif best == c:
        now = "that is the best c on this device now"
    else:
        now = f"the best c on this device now is {top}"
    totals = rest[-1].totals  # of these steps' answer, as the M bullet's
    wrote = (
        f"{whose} wrote M = {totals.mean_generated_length:.2f} tokens per step "
        f"({plural(totals.new_tokens, 'token')} in {plural(totals.steps, 'step')})"
    )
    if measured is not None:
        compare = f"Compare measured {measured.speedup:.2f}× plain decoding on this prompt, on the wall clock"
    elif elsewhere is not None:
        compare = f"Compare's measured {elsewhere.speedup:.2f}× is another prompt's, not this one's: {CHECK_HINT.get(ran, CHECK_HINT[LIVE])}"
    else:
        compare = f"Compare has not run on this prompt: {CHECK_HINT.get(ran, CHECK_HINT[LIVE])}"
    return [
        f"<b>Predicted:</b> {esc(used)} predicted at {value:.2f}× plain decoding; {esc(now)}.",
        f"<b>Measured:</b> {esc(wrote)}; {esc(compare)}.",
    ]


def _measured_points(
    curve: CostCurve, rest: Sequence[StepEvent], c: int, best: int, answer: str, ran: str
) -> tuple[list[str], list[str]]:
    """The measured fold's bullets (the forward's cost, the answer's M, what its steps verified,
    how loaded its forwards ran) and their arithmetic."""
    one, verify = float(curve(1)), float(curve(1 + c))
    point, cost_sum = _verify_cost(curve, c, one, verify)
    points = [point, _m_words(rest, answer), _picked(rest, c, best), *forward_load(curve, rest, ran)]
    return points, [cost_sum]


def _predicted_points(
    curve: CostCurve,
    events: Sequence[StepEvent],
    rest: Sequence[StepEvent],
    c: int,
    speedup: np.ndarray,
    answer: str,
    ran: str,
    measured: Measured | None,
    elsewhere: Measured | None,
) -> tuple[list[str], list[str], list[str]]:
    """How the prediction is made (the bullets), the prediction beside Compare (`_beside`), and
    their arithmetic (`rest`: the REST steps of `events`)."""
    best = int(np.argmax(speedup))
    _, sum_ = chosen_speedup(curve, events, c)
    acc_c = float(expected_accepted(events, [c])[0])
    points = [
        "So a bigger c, the most draft tokens verified per step, pays only while the extra accepted drafts outgrow "
        "the extra forward cost.",
        f"If every step verified its c heaviest drafts, the expected speedup would be highest at c = {best}, "
        f"{float(speedup[best]):.2f}× plain decoding.",
        *two_speedups(curve, rest, c),
    ]
    what, beside, step_sum = _beside(curve, rest, c, answer, ran, measured, elsewhere)
    one, verify = float(curve(1)), float(curve(1 + c))
    sums = [
        TWO_DIFFER,
        *step_sum,
        f"At c = {c}: {sum_}. {acc_c:.2f}: the accepted drafts per step this answer's tries predict at c = {c}; "
        f"{shown(step_overhead(events)):.1f} ms: a step's mean work beside its forward, from its timings; "
        f"{shown(one):.1f} and {shown(verify):.1f} ms: the forwards of 1 and 1 + {c} tokens.",
    ]
    return points + what, beside, sums


def left_end(curve: CostCurve, events: Sequence[StepEvent], speedup: np.ndarray) -> list[str]:
    """The curve's left end in words, from the data: why no drafts reads below 1×, and why c = 1
    dips under it where it does (a forward of 2 tokens costs more than one, and one draft adds few)."""
    zero, points = float(speedup[0]), []
    if shown(zero, 2) != 1.0:
        points.append(
            f"The curve's left end, no drafts, reads {zero:.2f}×, not 1×: a step without drafts still pays the retrieval and its "
            f"other work ({shown(step_overhead(events)):.1f} ms) beside the forward."
        )
    if len(speedup) > 1 and shown(float(speedup[1]), 2) < shown(zero, 2):
        acc1 = float(expected_accepted(events, [1])[0])
        two = ratio(float(curve(2)), float(curve(1)), 2)
        points.append(
            f"It dips at c = 1 to {chosen_speedup(curve, events, 1)[0]:.2f}×: a forward of 1 + 1 tokens costs {two:.2f}× one token's, "
            f"and one draft adds only {acc1:.2f} accepted tokens per step."
        )
    return points


def what_it_is(
    curve: CostCurve, rest: Sequence[StepEvent], c: int, answer: str = "This answer", ran: str = STEPPED
) -> list[str]:
    """What the predicted speedup is and is not, beside Compare's measured one: for `answer` only,
    from its acceptance, the forward cost and its steps' measured other work; and, when it reads
    above 1×, the costs it leaves out and why Compare can still read below 1×. `ran`: how the
    answer's steps ran (`measures.STEPPED`, `measures.LIVE`), said beside their mean."""
    value, _ = chosen_speedup(curve, rest, c)
    whose = answer.replace("The ", "the ", 1).replace("This ", "this ", 1)
    out = [
        f"The prediction is for {whose} only: its acceptance, the forward cost ({alone(curve.reps)}) and its "
        f"steps' other work, {shown(step_overhead(rest)):.1f} ms a step for retrieval, building the tree and "
        f"acceptance ({mean_over(len(rest), ran)}). Compare instead times whole runs on the wall clock ({COMPARED})."
    ]
    if shown(value, 2) > 1.0:
        out.append(
            f"It reads above 1× because {whose} accepts many drafts. It leaves out the prefill and the page's drawing; "
            "Compare leaves them out too, so where Compare reads below 1× the prompt accepts fewer drafts."
        )
    return out


def _verify_cost(curve: CostCurve, c: int, one: float, verify: float) -> tuple[str, str]:
    """The bullet on what verifying 1 and 1 + c tokens costs (`one`, `verify` ms), and its arithmetic."""
    # one answer to "was 1 + c measured?" for the bullet, the marker and this fold (`read_between`)
    measured = read_between(curve, 1 + c, "read off the line between the measured").strip(" ()") or "measured"
    point = (
        f"Verifying 1 token costs {one:.1f} ms on this device ({alone(curve.reps)}); verifying 1 + {c} = {1 + c} "
        f"tokens costs {verify:.1f} ms{read_between(curve, 1 + c)}, {ratio(verify, one):.2f}× as long."
    )
    return point, f"{divided(verify, one)}. {one:.1f} ms: {curve_forward(curve).what()}; {verify:.1f} ms: {measured}."


def _none_pays(curve: CostCurve, max_c: int) -> tuple[str, str]:
    """The bullet for a curve where every c is slower than plain decoding, and its fold's note."""
    growth = cost_growth(curve, max_c)
    point = "Here every c is slower than plain decoding: the curve stays under the dotted 1× line. " + growth
    return point, (
        "The curve is a prediction from the cost curve and this answer's acceptance; Compare's speedup times two "
        "whole runs on the wall clock."
    )


def two_speedups(curve: CostCurve, rest: Sequence[StepEvent], c: int) -> list[str]:
    """The two speedups the section names, each with its formula in printed figures: predicted
    (the accepted drafts the tries predict, and the step's work beside its forward) and from the
    answer's own M over the forward's cost ratio."""
    value, _ = chosen_speedup(curve, rest, c)
    one, verify = float(curve(1)), float(curve(1 + c))
    m = shown(rest[-1].totals.mean_generated_length, 2)
    x = ratio(verify, one, 1)
    from_m = m / shown(x, 2) if shown(x, 2) else float("inf")
    acc = float(expected_accepted(rest, [c])[0])
    return [
        f"Predicted at c = {c}: 1 + the accepted drafts the tries predict, {acc:.2f}, times the forward of 1 token, "
        f"over the step's other work plus the forward of 1 + {c} = {value:.2f}×.",
        f"From this answer's M: M / the cost ratio of 1 + {c} tokens to 1 = {m:.2f} / {shown(x, 2):.2f} = {from_m:.2f}×.",
    ]


def _beside(
    curve: CostCurve,
    rest: Sequence[StepEvent],
    c: int,
    answer: str,
    ran: str,
    measured: Measured | None,
    elsewhere: Measured | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """What the prediction is (`what_it_is`) and, when Compare ran on this answer's prompt, what it
    measured beside it (`beside_compare`), else on which other prompt (`other_prompt`):
    (the prediction's bullets, the bullets beside Compare, the fold's lines)."""
    if measured is None:
        return what_it_is(curve, rest, c, answer, ran), other_prompt(elsewhere), []
    beside, step_sum = beside_compare(curve, rest, c, measured, ran)
    # beside Compare's figures for this prompt, what Compare reads on other prompts does not apply
    return what_it_is(curve, rest, c, answer, ran)[:1], beside, [step_sum]


# a step's forward this many times the cost measured alone, or more, is said to have run under load
LOADED = 1.25


def forward_load(curve: CostCurve, rest: Sequence[StepEvent], ran: str) -> list[str]:
    """When the answer's own forwards ran well above the cost measured alone (the median of each
    step's forward over the curve's cost of its size), one bullet saying so, both conditions
    named: the prediction uses the cost measured alone. [] otherwise."""
    ratios = [e.timings.forward_ms / float(curve(1 + verified(e))) for e in rest if e.timings.forward_ms > 0]
    if not ratios or float(np.median(ratios)) < LOADED:
        return []
    return [
        f"Its own forwards ran {float(np.median(ratios)):.1f}× slower than measured alone (median of "
        f"{plural(len(ratios), 'step')}, {ran}); the prediction uses the cost measured alone."
    ]


def other_prompt(elsewhere: Measured | None) -> list[str]:
    """Compare's speedup, when it ran on another prompt than the answer's, named as another
    prompt's in one bullet; [] without one."""
    if elsewhere is None:
        return []
    on = f"another prompt, {elsewhere.prompt}" if elsewhere.prompt else "another prompt"
    return [f"Compare's {elsewhere.speedup:.2f}× was measured on {on}: another answer."]


def beside_compare(
    curve: CostCurve, rest: Sequence[StepEvent], c: int, measured: Measured, ran: str = STEPPED
) -> tuple[list[str], str]:
    """The prediction beside what Compare measured on the same prompt, and in one short sentence why
    they differ, from the data: Compare's forward slower than the one measured alone (the load of
    the moment), or its run accepting other drafts (another M). Then, for the fold, the predicted
    step beside Compare's step by part, each with how it was measured."""
    value, _ = chosen_speedup(curve, rest, c)
    m = shown(rest[-1].totals.mean_generated_length, 2)
    points = [
        f"Compare measured {measured.speedup:.2f}× on this prompt, M = {measured.m:.2f}; "
        f"the prediction here is {value:.2f}× at c = {c}, M = {m:.2f}."
    ]
    one, verify, overhead = shown(float(curve(1))), shown(float(curve(1 + c))), shown(step_overhead(rest))
    if measured.rest is not None and measured.plain is not None:
        # a speedup is tokens per step over a step's cost ratio: both pairs, so the reader sees which differs
        acc = shown(float(expected_accepted(rest, [c])[0]), 2)
        points.append(
            "Each is tokens per step over a step's cost: Compare's REST step took "
            f"{ratio(measured.rest.total, measured.plain.total):.2f}× its plain step and wrote M = {measured.m:.2f}; "
            f"the predicted step costs {ratio(overhead + verify, one):.2f}× one token's forward and writes "
            f"1 + {acc:.2f} tokens."
        )
    step = (
        f"Predicted step: {overhead:.1f} + {verify:.1f} = {overhead + verify:.1f} ms (other work, {mean_over(len(rest), ran)}; "
        f"forward of 1 + {c} tokens, {alone(curve.reps)})."
    )
    if measured.rest is not None:
        step += f" Compare's REST step: {measured.rest.line()} ({COMPARED})."
    return points, step


TWO_DIFFER = (
    "The predicted and the M-based speedups differ by the step's other work (retrieval, building the tree), which "
    "only the prediction counts, by any step that wrote no token of its own (M counts it, the prediction does not), "
    "and where the tries' predicted acceptance differs from what the answer accepted."
)


def _m_words(rest: Sequence[StepEvent], answer: str) -> str:
    """M and what it is made of: accepted drafts per step and the model's own tokens, and why M is
    not 1 + the drafts per step when a step ended the text before the model's own token."""
    totals = rest[-1].totals  # of these steps' answer: every answer has its own M
    drafts = sum(e.accepted_len for e in rest)
    own = sum(1 for e in rest for s in e.token_sources if not s)
    steps = len(rest)
    acc = drafts / steps
    text = (
        f"{answer} wrote M = {plural(totals.new_tokens, 'token')} / {plural(totals.steps, 'step')} = "
        f"{totals.mean_generated_length:.2f} tokens per step: {plural(drafts, 'accepted draft token')}, {acc:.2f} a "
        f"step, and {plural(own, 'token')} of the model's own."
    )
    if own == steps:
        return text + f" M = 1 + {acc:.2f}: every step here added one token of the model's own."
    if own < steps:
        ended = "the last step" if steps - own == 1 else f"{steps - own} steps"
        return text + f" M is below 1 + {acc:.2f} because {ended} ended the text before the model's own token."
    return text


def _picked(rest: Sequence[StepEvent], c: int, best: int) -> str:
    """What the steps verified, in one sentence beside the curve's best c: the auto budget's picks
    where it chose (it drafts only where it expects to gain), else a fixed c's."""
    counts = verified_counts(rest)
    if auto_budget(rest):
        return (
            f"The auto budget verified {counts}. It picks per step and drafts only where its own cost estimate "
            "expects a gain, while "
            f"the curve's best c = {best} is one c for every step."
        )
    return f"With c = {c}, the most verified per step, the steps verified {counts}; fewer where the trie held fewer."


FLAT = 0.15  # a measured curve whose slowest point is within 15% of its fastest reads as flat


def cost_growth(curve: CostCurve, max_c: int) -> str:
    """Why no c pays, from the measured curve: about flat (so the drafts, not the forward, fall
    short) or growing with the tokens verified, by how much from 1 to 1 + `max_c`."""
    ms = np.asarray(curve.ms, np.float64)
    spread = float(ms.max() / ms.min() - 1) if ms.min() > 0 else float("inf")
    largest = int(curve.sizes[-1])
    if spread <= FLAT:
        return (
            f"the forward's measured cost is about flat on this device now ({float(ms.min()):.0f}–{float(ms.max()):.0f} ms "
            f"from 1 to {largest} tokens, within {100 * spread:.0f}%), so verifying more tokens costs little here, but "
            "this answer's accepted drafts do not make up for the step's work beside the forward."
        )
    grows = float(curve(1 + max_c) / curve(1))
    return (
        f"on this device the forward's cost grows with the tokens it verifies (1 + {max_c} tokens cost {grows:.1f}× one "
        f"token), and this answer's accepted drafts do not make up for it. A GPU verifies dozens of tokens in about the "
        "time of one, so there the same acceptance pays."
    )
