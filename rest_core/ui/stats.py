"""The live statistics under the chat: tokens/s, M, steps, tokens, and one sentence on where the
tokens came from, in the colour key's groups (who drafted them, and how many are the model's own)."""

from __future__ import annotations

from collections.abc import Sequence

from rest_core.decode.events import StepEvent
from rest_core.sources import count_origins
from rest_core.ui.measures import LIVE_RATE, LIVE_RATE_SO_FAR
from rest_core.ui.style import CONTEXT_NAME, SEVERAL_NAME, esc, several, source_label, step_source_names
from rest_core.ui.why_c_view import auto_budget

# What the tokens/s counts, said under the figures: the steps' own clock, so neither the prefill,
# nor loading the model, nor the page drawing between steps; but the page draws on the same
# machine while the model decodes, so on a small CPU the live figure is below Speed's, whose runs
# go back to back with nothing drawn in between.
TIMING_NOTE = (
    "The greyed tokens/s counts the decode steps only, not the prefill or loading the model, while the page draws. "
    "For REST's speedup, press Compare below: it times REST and plain decoding back to back, with nothing drawn."
)

# Under an auto-budget answer: its draft counts follow this machine's timings, so the same prompt
# drafted differently on a phone's and a laptop's run with nothing saying why (screens12).
AUTO_NOTE = (
    "The auto budget drafts by timings measured on this machine, so another run of this prompt can draft differently."
)


def source_counts(events: Sequence[StepEvent]) -> dict[str, int]:
    """Emitted tokens by origin: 'datastore', 'context', 'both', 'model'."""
    return count_origins(s for e in events for s in e.token_sources)


def origin_shares(events: Sequence[StepEvent]) -> dict[str, int]:
    """Emitted tokens by the colour the answer gives them: each source alone by its name ("code",
    "conversation"), several sources together under "several sources (code + chat)", and
    "model". The model's own tokens come last, every other group in order of first appearance."""
    names: dict[int, str] = {}
    for e in events:
        names.update(step_source_names(e))
    alone: dict[str, int] = {}
    together: dict[str, int] = {}
    model = 0
    for e in events:
        for mask in e.token_sources:
            if not mask:
                model += 1
                continue
            label = source_label(mask, names)
            group = together if several(mask) else alone
            group[label] = group.get(label, 0) + 1
    out = dict(alone)
    if together:
        out[f"{SEVERAL_NAME} ({', '.join(together)})"] = sum(together.values())
    out["model"] = model
    return out


def _named(group: str) -> str:
    """A group of origin_shares as the sentence names it: "the conversation", "the datastore
    code", "several sources (code + chat)"."""
    if group == CONTEXT_NAME:
        return f"the {CONTEXT_NAME}"
    if group.startswith(SEVERAL_NAME):
        return group
    return "the datastore" if group == "datastore" else f"the datastore {group}"


def origin_sentence(events: Sequence[StepEvent]) -> str:
    """ "Of the 64 tokens, 38 (59%) were drafted: 9 by the conversation, 3 by the datastore code
    and 26 by several sources (code + chat); 26 are the model's own": the groups of the colour key,
    every token once, in counts (which add up, and equal counts read equal), and one percentage,
    the drafted share, as Compare's "tokens from drafts" rounds it."""
    shares = origin_shares(events)
    n = sum(shares.values())
    if not n:
        return ""
    model = shares.get("model", 0)
    drafted = n - model
    tokens = f"{n} token{'' if n == 1 else 's'}"
    if not drafted:
        return f"Of the {tokens}, none was drafted: all are the model's own."
    groups = [f"{v} by {_named(k)}" for k, v in shares.items() if k != "model" and v]
    listed = groups[0] if len(groups) == 1 else f"{', '.join(groups[:-1])} and {groups[-1]}"
    own = "none is" if not model else f"{model} {'is' if model == 1 else 'are'}"
    return f"Of the {tokens}, {drafted} ({100 * drafted / n:.0f}%) were drafted: {listed}; {own} the model's own."


def stats_html(events: Sequence[StepEvent], running: bool = False) -> str:
    if not events:
        return '<div class="stats muted">Stats appear here while the answer streams.</div>'
    t = events[-1].totals
    # M leads: tokens per step do not depend on what else the machine does. The live tokens/s
    # comes last and greyed: it is measured while the page draws on the same cores, so it reads
    # below Compare's figures, which are the speed to quote (screens13 took it for the headline).
    items = [
        ("tokens / step (M)", f"{t.mean_generated_length:.2f}", " lead"),
        ("steps", f"{t.steps}", ""),
        ("tokens", f"{t.new_tokens}", ""),
        (LIVE_RATE_SO_FAR if running else LIVE_RATE, f"{t.tokens_per_s:.1f}", " live-rate"),
    ]
    state = '<span class="live">generating…</span>' if running else ""
    cells = "".join(
        f'<div class="stat{kind}{" small" if len(v) > 12 else ""}"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
        for k, v, kind in items
    )
    if events[-1].method == "rest":
        cells += f'<div class="stat wide"><div class="v origin">{esc(origin_sentence(events))}</div></div>'
    note = TIMING_NOTE + (f" {AUTO_NOTE}" if auto_budget(events) else "")
    return f'<div class="stats">{cells}{state}<div class="stats-note">{esc(note)}</div></div>'
