"""What Compare shows: REST against plain decoding (`compare`, `comparison_html`), the tokens
over decode time (`speed_figure`), the methods' forwards on one clock (`timeline_figure`) and why
the speedup is not M (`speedup_why`, `speedup_details`).

Pure functions over the runs' `StepEvent`s (and prompt lookup's per-forward figures); Plotly is
imported only to build a figure.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rest_core.decode.events import SOURCE_DATASTORE, StepEvent, Totals
from rest_core.sources import origin
from rest_core.ui.compare_rows import (  # noqa: F401 - the table's names, as callers import them from here
    MAIN_ROWS,
    PREFILL_ROW,
    SAME_ROW,
    STEP_ROW,
    Comparison,
    comparison_rows,
    load_changed,
    measures_note,
    prefill_cell,
    split_cells,
    step_ms,
    table,
)
from rest_core.ui.measures import (
    COMPARE_RATE,
    LIVE_RATE,
    ForwardTime,
    StepSplit,
    divided,
    minus,
    plain_forward,
    ratio,
    rest_forward,
    run_split,
    shown,
)
from rest_core.ui.style import (
    SEVERAL_NAME,
    SOURCE_COLORS,
    Tokenizer,
    decode_text,
    esc,
    plural,
    several,
    source_label,
    step_source_names,
    visible,
)
from rest_core.ui.why_c_view import auto_budget, verified

# ----------------------------------------------------------------------------------------------
# Speed comparison


def compare(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent], greedy: bool) -> Comparison:
    if not rest_events or not ar_events:
        raise ValueError("both runs need at least one step")
    identical = None
    rest_ids = [t for e in rest_events for t in e.tokens]
    ar_ids = [t for e in ar_events for t in e.tokens]
    if greedy:
        identical = rest_ids == ar_ids
    forwards = (rest_forward(rest_events), plain_forward(ar_events))
    splits = (run_split(rest_events, "rest"), run_split(ar_events, "ar"))
    lengths = (len(rest_ids), len(ar_ids))
    steps = [e for e in rest_events if e.method == "rest"]
    auto = sum(verified(e) for e in steps) / len(steps) if steps and auto_budget(steps) else None
    plain = [e.timings.total_ms for e in ar_events]
    spread = (float(np.median(plain)), float(np.mean(plain))) if len(plain) >= 4 else None
    return Comparison(rest_events[-1].totals, ar_events[-1].totals, identical, lengths, forwards, splits, auto, spread)


def live_note(cmp: Comparison, live: float | None) -> str:
    """One sentence on why the live stats under the chat showed other tokens/s for this prompt's
    answer than Compare's REST (`live`: the live figure; "" without one, or when both print alike).
    Measured on a 2-core CPU: the live panels cost the handler about 5-7 ms a 0.3 s refresh, about
    2%; the first answer of a fresh process ran at 0.7 tokens/s where later ones ran at 16-23; the
    rest is the load of the moment (other work, a browser on the same cores), either way."""
    if live is None or f"{live:.1f}" == f"{cmp.rest.tokens_per_s:.1f}":
        return ""
    said = (
        f"The chat's answer to this prompt ran at {live:.1f} {LIVE_RATE}, Compare's REST at "
        f"{cmp.rest.tokens_per_s:.1f} {COMPARE_RATE}"
    )
    if live < cmp.rest.tokens_per_s:
        return (
            f"{said}: a live answer can pay the first request's warm-up and shares the machine with the page it "
            "streams, while Compare runs each method back to back on a warm model and draws nothing until all are done."
        )
    return (
        f"{said}: on a shared machine tokens/s follow the load of the moment, so Compare runs REST and plain "
        "decoding back to back, and their ratio, the speedup, is the figure to compare."
    )


def rerun_note(cmp: Comparison, chat: Totals | None, auto: bool) -> str:
    """One sentence, shown beside Compare's result, when Compare ran on the chat's last answer's
    prompt (`chat`: that answer's totals, None otherwise) and its REST run took other steps or
    another M: both, and why (`auto`: the auto budget chose the drafts); "" when they agree."""
    m = f"{cmp.rest.mean_generated_length:.2f}"
    if chat is None or (chat.steps == cmp.rest.steps and f"{chat.mean_generated_length:.2f}" == m):
        return ""
    why = "the auto budget picks each step's drafts from timings it measures live" if auto else "a rerun can differ"
    return (
        f"The chat's answer to this prompt took {plural(chat.steps, 'step')}, M = {chat.mean_generated_length:.2f}; "
        f"this REST rerun took {cmp.rest.steps}, M = {m}: {why}, and the text is the same."
    )


def repeat_example() -> str:
    """The guided example where the conversation drafts (the answer repeats it), by its button's
    words before the colon: "Ask the same thing twice"."""
    from rest_core.ui.guided import GUIDED_EXAMPLES

    title = next(g.title for g in GUIDED_EXAMPLES if g.store == "none" and dict(g.knobs).get("use_context"))
    return title.split(":")[0]


def slower_note(cmp: Comparison) -> str:
    """When REST lost (a believable speedup below 1): where it wins on this CPU instead, one sentence; else ""."""
    if cmp.load_note() or not 0 < cmp.speedup < 1:
        return ""
    win = (
        "REST wins most on this CPU where an answer repeats earlier text (a follow-up that reuses the code, or "
        f'the guided example "{repeat_example()}"): there the conversation drafts it.'
    )
    if cmp.auto_drafts is None:
        return win
    return f"{AUTO_ESTIMATE.format(drafts=cmp.auto_drafts)} {win}"


# Why the auto budget can draft at a loss, beside a loss it drafted (the budget decides from its
# own estimate of a forward's cost, which the load of the moment can put off).
AUTO_ESTIMATE = (
    "The auto budget drafted {drafts:.1f} tokens a step: it decides from its own cost estimate, which can be off "
    "under load."
)


def identity_claim(cmp: Comparison) -> str:
    """What "same output" means in words, naming the tokens it compared ("" when sampling)."""
    if cmp.identical is None:
        return ""
    rest, ar = cmp.lengths
    if rest == ar:
        return f"identical output ✓ (all {rest} tokens)" if cmp.identical else f"outputs differ (of {rest} tokens)"
    what = f"REST wrote {rest} tokens, plain decoding {ar} before the time limit"
    if cmp.identical:
        return f"identical over the first {cmp.compared} tokens ✓ ({what})"
    return f"outputs differ within the first {cmp.compared} tokens ({what})"


@dataclass(frozen=True)
class Machine:
    """What ran the comparison: the model's name, "CPU" or "GPU", and a detail ("2 threads", the GPU's name)."""

    model: str
    device: str  # "CPU" or "GPU"
    detail: str = ""

    where: str = ""  # the header's words for the device ("this machine's CPU (2 cores)"), when known

    def words(self) -> str:
        """ "SmolLM2-135M-Instruct on this machine's CPU (2 cores)": the header's words where given."""
        if self.where:
            return f"{self.model} on {self.where}"
        return f"{self.model} on this {self.device}" + (f" ({self.detail})" if self.detail else "")


def comparison_html(
    cmp: Comparison, machine: Machine | None = None, lookup: str = "", live: float | None = None, rerun: str = ""
) -> str:
    """The headline speedup and one sentence of why (`speedup_short`, and where REST wins when it
    lost); the table's rows a newcomer needs (`MAIN_ROWS`) and the prompt lookup line (`lookup`,
    HTML); then, folded, the whole arithmetic (`speedup_why`), the table's other rows, why the
    live stats' tokens/s differ (`live`: theirs, None when Compare ran on another prompt:
    `live_note`) and how the figures follow from each other. Why the chat's answer took other steps
    (`rerun`) sits beside the result, unfolded: it sets two figures on the page side by side."""
    rows = comparison_rows(cmp)
    main = table(sorted((row for row in rows if row[0] in MAIN_ROWS), key=lambda row: MAIN_ROWS.index(row[0])))
    rest = table([row for row in rows if row[0] not in MAIN_ROWS])
    why = " ".join(x for x in (speedup_short(cmp, machine), slower_note(cmp)) if x)
    paras = [(speedup_why(cmp, machine), "speedup-sum"), (live_note(cmp, live), "live-note")]
    fold = "".join(f'<p class="live-note" id="{k}">{esc(x)}</p>' for x, k in paras if x)
    details = "".join(f"<li>{esc(x)}</li>" for x in speedup_details(cmp))
    return (
        f'<div class="compare"><div class="speedup">{_headline(cmp)}</div>'
        + (f'<p class="speedup-why" id="speedup-why">{esc(why)}</p>' if why else "")
        + (f'<p class="rerun-note" id="rerun-note">{esc(rerun)}</p>' if rerun else "")
        + f'{main}{lookup}<details class="measures"><summary>All figures and how they follow from each other</summary>'
        f"{fold}{rest}<ul>{details}</ul></details></div>"
    )


def _headline(cmp: Comparison) -> str:
    """ "REST was slower here: 0.85×" or "speedup 1.40×", and the same-output badge."""
    badge = f'<span class="same ok">{esc(identity_claim(cmp))}</span>' if cmp.identical else ""
    if cmp.identical is False:
        badge = f'<span class="same bad">{esc(identity_claim(cmp))}</span>'
    head = f'speedup <b id="speedup-value">{cmp.speedup:.2f}×</b>'
    if 0 < cmp.speedup < 1:  # a loss said plainly
        head = f'REST was slower here: <b id="speedup-value">{cmp.speedup:.2f}×</b>'
    load = cmp.load_note()
    if load:  # the headline does not claim a speedup the two runs' figures rule out
        head = (
            f'speedup <b id="speedup-value" class="unsure">{cmp.speedup:.2f}×</b> <span class="load">{esc(load)}</span>'
        )
    return f"{head} {badge}"


def speedup_short(cmp: Comparison, machine: Machine | None = None) -> str:
    """The headline's why in one sentence, from the table's step and M rows: "SmolLM2 on this
    machine's CPU (2 cores): a REST step took 1.48× as long as a plain one-token step but wrote only
    M = 1.25 tokens." When the runs' figures rule each other out, `speedup_why`'s sentence says so."""
    r, a = cmp.rest, cmp.ar
    if not (r.steps and a.steps and r.elapsed_s > 0 and a.elapsed_s > 0):
        return ""
    if load_changed(r, a):
        return speedup_why(cmp, machine)
    where = f"{machine.words()}: a" if machine is not None else "A"
    x, m = ratio(step_ms(r), step_ms(a)), shown(r.mean_generated_length, 2)
    wrote = "but wrote only" if x > m else "and wrote"
    return f"{where} REST step took {x:.2f}× as long as a plain one-token step {wrote} M = {m:.2f} tokens."


def speed_figure(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent], lookup: Any = None):
    """Cumulative tokens over decode time for both runs and, given its run (`lookup`: a LookupRun),
    prompt lookup's (prefill excluded, as in the paper; prompt lookup's prefill writes its first
    token, so its line starts there at 0 s)."""
    import plotly.graph_objects as go

    def series(events: Sequence[StepEvent]) -> tuple[list[float], list[int]]:
        return [0.0] + [e.totals.elapsed_s for e in events], [0] + [e.totals.new_tokens for e in events]

    data, end = [], 0.0
    for name, events, color in (
        ("REST", rest_events, SOURCE_COLORS[SOURCE_DATASTORE]),
        ("plain", ar_events, "#6b7280"),
    ):
        if events:
            x, y = series(events)
            end = max(end, x[-1])
            data.append(
                dict(type="scatter", x=x, y=y, mode="lines", name=name, line=dict(color=color, width=2.5, shape="hv"))
            )
    if lookup is not None and lookup.counts:
        first = len(lookup.token_ids) - sum(lookup.counts)
        x = [0.0] + [ms / 1000 for ms in lookup.ends_ms]
        y = [first] + [first + n for n in itertools.accumulate(lookup.counts)]
        end = max(end, x[-1])
        data.append(
            dict(
                type="scatter",
                x=x,
                y=y,
                mode="lines",
                name=f"prompt lookup k={lookup.k}",
                line=dict(color=LOOKUP_COLOR, width=2, shape="hv", dash="dot"),
            )
        )
    margin = dict(l=50, r=16, t=TOP_MARGIN, b=UNDER_AXIS)
    rows = legend_rows([d["name"] for d in data], phone_plot(margin))
    layout = dict(
        height=TOP_MARGIN + SPEED_PLOT + UNDER_AXIS + LEGEND_ROW * rows,
        # the page's label ("Tokens over time") sits over the figure's top: the plot starts under it;
        # the legend sits under the x axis's title, off the curves at any width (`UNDER_LEGEND`)
        margin=margin,
        # a little room past the last step, so the line's end stays inside the figure
        xaxis=dict(title="decode time (s)", range=[0, 1.04 * end if end > 0 else 1], automargin=True),
        yaxis=dict(title="tokens", rangemode="tozero"),
        legend=_legend_below(),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    return go.Figure(data=data, layout=layout)


# ----------------------------------------------------------------------------------------------
# Timeline: every method's forwards on one clock

# The page labels each figure over its top-left corner (Gradio's label, two lines on a phone):
# the plot area starts below it, so no tick or row hides under the label.
TOP_MARGIN = 56
# A horizontal legend wraps on a narrow screen: the figure keeps room for its rows as a 390 px
# phone lays them out, below the x axis's title. There a figure is this wide (screens16, 11: the
# plot's box from x = 46 to 346), its plot that less its side margins (`phone_plot`).
PHONE_FIGURE = 300
LOOKUP = -1  # a block's `sources` when prompt lookup drafted its accepted tokens
LOOKUP_COLOR = "#0d9488"  # teal: no engine source uses it


@dataclass(frozen=True)
class Block:
    """One forward pass on the decode clock (ms after the end of prefill)."""

    start_ms: float
    ms: float
    tokens: tuple[int, ...]
    sources: int  # who drafted most of its accepted drafts (`event_blocks`); 0: the model's own token only; LOOKUP


def event_blocks(events: Sequence[StepEvent]) -> list[Block]:
    """The engine's steps (REST or plain) as blocks: each ends at its event's elapsed time, coloured
    by who drafted most of its accepted tokens (the first of them on a tie): a step's first token is
    often one several sources drafted while the rest came from one (screens9: an 11-token block of
    6 conversation tokens read "several sources")."""
    out = []
    for e in events:
        drafted = Counter(int(s) for s in e.token_sources if s)  # most_common: the first seen on a tie
        most = drafted.most_common(1)[0][0] if drafted else 0
        end = 1000 * e.totals.elapsed_s
        out.append(Block(end - e.timings.total_ms, e.timings.total_ms, tuple(e.tokens), most))
    return out


def lookup_blocks(token_ids: Sequence[int], counts: Sequence[int], ends_ms: Sequence[float]) -> list[Block]:
    """Prompt lookup's forwards as blocks (rest_core.bench.prompt_lookup.LookupRun's fields): forward i
    added counts[i] tokens and ended at ends_ms[i]; the prefill's tokens come first, off the clock."""
    out, start, at = [], 0.0, len(token_ids) - sum(counts)
    for n, end in zip(counts, ends_ms):
        out.append(Block(start, end - start, tuple(token_ids[at : at + n]), LOOKUP if n > 1 else 0))
        start, at = end, at + n
    return out


def _block_style(sources: int, names: Mapping[int, str] | None = None) -> tuple[str, str]:
    """(colour, legend name) of a block; `names`: bit -> the store's name (`run_source_names`). A
    block drafted by several sources takes the page's violet and its one legend name, "several
    sources" (which ones, "chat + code", is its hover's: `block_sources`)."""
    if sources == LOOKUP:
        return LOOKUP_COLOR, "accepted drafts: prompt lookup"
    if sources == 0:
        return "#9ca3af", "model's own token only"
    who = SEVERAL_NAME if several(sources) else source_label(sources, names)
    return origin(sources).color, f"accepted drafts: {who}"


def block_sources(sources: int, names: Mapping[int, str] | None = None) -> str:
    """Who drafted a block drafted by several sources, for its hover ("several sources (chat +
    code)"); "" for any other block, whose legend name says it."""
    return f"{SEVERAL_NAME} ({source_label(sources, names)})" if sources != LOOKUP and several(sources) else ""


def run_source_names(events: Sequence[StepEvent]) -> dict[int, str]:
    """bit -> name of every source that searched in a run's steps ("chat", not "datastore")."""
    return {bit: name for e in events for bit, name in step_source_names(e)}


def _block_groups(
    lanes: Sequence[tuple[str, Sequence[Block]]], tokenizer: Tokenizer
) -> dict[tuple[int, str], dict[str, list]]:
    """The timeline's blocks grouped by (who drafted, lane): their bars' bases, widths, lanes, labels and hovers."""
    groups: dict[tuple[int, str], dict[str, list]] = {}
    for lane, blocks in lanes:
        for i, b in enumerate(blocks):
            g = groups.setdefault((b.sources, lane), {"base": [], "x": [], "y": [], "hover": []})
            text = visible(decode_text(tokenizer, b.tokens), 40)
            g["base"].append(b.start_ms)
            g["x"].append(b.ms)
            g["y"].append(lane)
            g["hover"].append(
                f"{esc(lane)}, forward {i + 1}: {plural(len(b.tokens), 'token')} in {b.ms:.1f} ms<br>{esc(text)}"
            )
    return groups


def _timeline_bars(groups: dict[tuple[int, str], dict[str, list]], names: Mapping[int, str] | None) -> list:
    """One horizontal bar trace per group of blocks, coloured and named by who drafted them."""
    import plotly.graph_objects as go

    data: list = []
    for (sources, _), g in sorted(groups.items()):
        color, name = _block_style(sources, names)
        who = block_sources(sources, names)
        data.append(
            go.Bar(
                base=g["base"],
                x=g["x"],
                y=g["y"],
                orientation="h",
                # no text in the blocks (too small to read): colour says who drafted, hover what they wrote
                marker=dict(color=color, line=dict(color="#ffffff", width=0.5)),
                name=name,
                legendgroup=name,
                showlegend=not any(d.name == name for d in data),
                hovertext=[f"{esc(who)}<br>{h}" for h in g["hover"]] if who else g["hover"],
                hoverinfo="text",
            )
        )
    return data


def timeline_figure(
    lanes: Sequence[tuple[str, Sequence[Block]]], tokenizer: Tokenizer, names: Mapping[int, str] | None = None
):
    """Methods on one wall-clock axis (decode time, prefill excluded), one lane each, top first:
    one block per forward pass, as wide as it took, labelled with the tokens it produced and
    coloured by who drafted its accepted tokens (grey: the model's own token only), the legend
    naming the sources by `names` (bit -> name: `run_source_names`)."""
    import plotly.graph_objects as go

    data = _timeline_bars(_block_groups(lanes, tokenizer), names)
    fig = go.Figure(data=data)
    margin = dict(l=8, r=16, t=TOP_MARGIN, b=UNDER_AXIS)
    rows = 1 + legend_rows([d.name for d in data if d.showlegend], phone_plot(margin))  # the key, then the items
    order = [lane for lane, _ in reversed(lanes)]  # the y axis's categories, bottom first
    for lane, _ in lanes:  # each lane's name just above its blocks, never over them, at any height drawn
        fig.add_annotation(
            text=esc(lane), xref="paper", x=0, xanchor="left", yref="y", y=order.index(lane) + (1 - BAR_GAP) / 2,
            yanchor="bottom", showarrow=False, font=dict(size=12, color="#374151"),
        )  # fmt: skip
    fig.update_layout(
        barmode="overlay",
        bargap=BAR_GAP,
        height=TOP_MARGIN + LANE * len(lanes) + UNDER_AXIS + LEGEND_ROW * rows,
        # the legend's rows below the axis's title, as many as it wraps to at the width drawn (`UNDER_LEGEND`)
        margin=margin,
        # prefill is excluded, as the page's text above says: a shorter title fits a phone
        xaxis=dict(title="decode time (ms)", rangemode="tozero", automargin=True),
        yaxis=dict(categoryorder="array", categoryarray=order, showticklabels=False),
        legend=_legend_below(BLOCK_KEY),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    return fig


def _legend_below(title: str = "") -> dict:
    """A horizontal legend at the figure's bottom, under the x axis's title, from the figure's left
    edge (not the plot's), in type a phone can read; `title`: a line above its items. (Anchored to
    the plot instead, under its title, the page's Plotly pushed the plot right to make room.)"""
    legend = dict(orientation="h", xref="container", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")
    return legend | dict(font=dict(size=LEGEND_FONT), title=dict(text=title, side="top") if title else None)


# UNDER_LEGEND: the bottom margin holds the x title alone; a container legend reserves the rows it wraps
# to as drawn (no band on a laptop). The height counts a phone's rows: a laptop's plot gets them.
LEGEND_ROW = 30  # px a legend row takes at 12 px type
UNDER_AXIS = 50  # px from the plot's bottom to under the x axis's title: the legend's rows go below
SPEED_PLOT = 200  # px: the tokens chart's plot area
LEGEND_FONT = 12  # px: the legend's type, legible at 390 px
CHAR_PX = 6.8  # px a character of the legend's type takes, about
BAR_GAP = 0.45  # of a lane, above and below its blocks: room for the lane's name
LANE = 64  # px a method's lane takes: its blocks stay tall enough to see and hover on a phone
BLOCK_KEY = "hover (or tap) a block for the tokens it wrote"


LEGEND_GAP = 5  # px between two items of a horizontal legend (Plotly's itemgap)


def phone_plot(margin: Mapping[str, float]) -> float:
    """A figure's plot width on a 390 px phone, `margin` its layout's margins."""
    return PHONE_FIGURE - margin["l"] - margin["r"]


def legend_rows(names: Sequence[str], width: float) -> int:
    """How many rows Plotly lays a horizontal legend of `names` out in, `width` being the plot's
    width (the bound Plotly sets such a legend, wherever it is anchored): one row when all its
    items fit side by side, else a grid whose columns are as wide as its widest item. (The tokens
    chart's three names fit one row of 330 px, so its height kept room for one; a phone drew them
    in three, one per row of its 234 px plot, and the plot lost 40 of its 200 px.) An item: a 40 px
    symbol and gap, then its text, about CHAR_PX a character at 12 px."""
    if not names:
        return 0
    items = [40 + CHAR_PX * len(name) for name in names]
    if sum(items) + LEGEND_GAP * (len(items) - 1) < width:
        return 1
    columns = max(1, int((width + LEGEND_GAP) // (max(items) + LEGEND_GAP)))
    return -(-len(items) // columns)


# ----------------------------------------------------------------------------------------------
# Why the speedup is not M


def speedup_why(cmp: Comparison, machine: Machine | None = None) -> str:
    """One sentence beside the headline: on this machine a REST step, one forward over the last
    token and its drafts, took X times a plain one-token step (the table's step row), so the
    speedup is M / X; on a GPU X is about 1 and the speedup approaches M. "" when a run is empty.
    When the runs' figures rule each other out (`load_changed`), it says so instead."""
    r, a = cmp.rest, cmp.ar
    if not (r.steps and a.steps and r.elapsed_s > 0 and a.elapsed_s > 0):
        return ""
    where = f"{machine.words()}: a" if machine is not None else "A"
    rest_ms, plain_ms = step_ms(r), step_ms(a)
    load = load_changed(r, a)
    if load:  # M / ratio would print a speedup above M, which no REST step can earn
        return (
            f"{where} REST step took {rest_ms:.1f} ms, shorter than a plain one-token step's {plain_ms:.1f} ms, which "
            "cannot be: a REST step does a plain step's work and more, so the machine's load changed between the two "
            "runs; rerun Compare."
        )
    x = ratio(rest_ms, plain_ms)
    m = shown(r.mean_generated_length, 2)
    text = (
        f"{where} REST step, one forward over the last token and its drafts, took "
        f"{divided(rest_ms, plain_ms)}× a plain one-token step, so the speedup is M / {x:.2f} = "
        f"{divided(m, x, places=2)}×"
    )
    if shown(ratio(m, x, 2), 2) != shown(cmp.speedup, 2):
        text += f", the headline's {cmp.speedup:.2f}× but for rounding"
    if machine is not None and machine.device == "GPU":
        return text + f"; the closer that factor comes to 1, the closer the speedup comes to M = {m:.2f}."
    return text + f"; on a GPU that factor is about 1, so the speedup approaches M = {m:.2f}."


def speedup_details(cmp: Comparison) -> list[str]:
    """The table's figures and how they follow from each other, one bullet each: the headline's
    division, what a REST step spends beside its forward, and what each time row measures."""
    r, a = cmp.rest, cmp.ar
    out = []  # M is the table's row "tokens / steps (M)": not repeated here
    if shown(a.tokens_per_s) > 0:
        out.append(f"The headline divides the tokens/s: {divided(r.tokens_per_s, a.tokens_per_s)}×.")
    forward = cmp.forwards[0]
    if r.steps and r.elapsed_s > 0 and not cmp.load_note():
        out.append(_beside_forward(r, step_ms(r), forward, cmp.splits[0]))
    return out + measures_note(cmp)


def _beside_forward(r: Totals, step: float, forward: ForwardTime | None, split: StepSplit | None = None) -> str:
    """What a REST step spends beside its forward, as the difference of the table's two rows, and
    retrieval's part of it, a step's: the table's retrieval per token times M, both as printed."""
    per_token, m = shown(r.retrieval_ms_per_token, 2), shown(r.mean_generated_length, 2)
    retrieval = f"{per_token:.2f} × {m:.2f} = {per_token * m:.1f} ms a step, the table's retrieval per token × M"
    if forward is None:
        return f"Retrieval with the trie adds {retrieval}."
    if split is not None:  # the step row is its parts' printed sum
        step = split.total
    return (
        f"Beside its forward, a REST step spends {minus(step, forward.ms)} ms, the table's step minus its forward: "
        f"retrieval with the trie takes {retrieval}; the rest is the acceptance and the step's bookkeeping."
    )
