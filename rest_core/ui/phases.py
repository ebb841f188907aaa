"""One REST step shown as its phases for the step-through view: retrieve (the matched suffix and
what followed it), build the trie, verify in one forward (row by row against the model's own
tokens), accept (the walk and what stays in the cache); `step_panels` puts them together with
the provenance, the trie figure and the mask heatmap.

Pure functions over events, the conversation's token ids and a tokenizer; no Gradio, no torch.
`context` everywhere is the token ids before the step: the prompt and every token emitted by
earlier steps, its last one being the step's root (emitted, not cached yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rest_core.config import RetrievalConfig
from rest_core.decode.events import StepEvent
from rest_core.sources import origin
from rest_core.ui.answer_view import shade_class
from rest_core.ui.feeds_view import feeds_html
from rest_core.ui.provenance import provenance_html
from rest_core.ui.style import (
    CONTEXT_NAME,
    Tokenizer,
    decode_text,
    esc,
    is_special,
    plural,
    shown_name,
    source_class,
    token_label,
    token_text,
    visible,
)
from rest_core.ui.tree_key import (
    ACCEPTED,
    END_MARK,
    END_SHOWN,
    KEY_SHORT,
    OFF_PATH,
    REJECTED,
    UNCHECKED,
    budget_note,
    budget_words,
    draft_states,
    end_token,
    no_own_reason,
    undrafted_reason,
)
from rest_core.ui.tree_mask import mask_figure, mask_view
from rest_core.ui.trie_view import trie_figure
from rest_core.ui.words import K_MEANS

# ----------------------------------------------------------------------------------------------
# Every panel: one plain sentence of what happened in this step, the rest folded


def panel(phase: str, lead: str, fold_title: str, fold: str) -> str:
    """A step-through panel's text: ONE plain sentence (`lead`, plain text) of what happened in
    this step, then everything else (`fold`, HTML) inside a <details> titled `fold_title`."""
    more = f'<details class="tt-more"><summary>{esc(fold_title)}</summary>{fold}</details>' if fold else ""
    return f'<p class="tt-lead" data-phase="{phase}">{esc(lead)}</p>{more}'


# ----------------------------------------------------------------------------------------------
# Retrieve


def retrieve_lead(event: StepEvent) -> str:
    """The Retrieve panel's one sentence: how often each source held the conversation's ending,
    and that what followed makes the tree."""
    found = [m for m in event.matches if m.suffix_len]
    if not event.matches:
        return "Plain decoding: no source is asked for a draft."
    if not found:
        return "No source held the end of the conversation, so this step has no draft."
    # "the conversation's last 4 tokens", "once": "the code held its last 4 tokens 1 time" read as
    # the code's own last tokens, and "1 time" as a typo (screens14).
    said = []
    for m in found:
        name = shown_name(m.source_bit, m.source)
        whose, when = ("its own", " earlier") if name == CONTEXT_NAME else ("the conversation's", "")
        tokens = "token" if m.suffix_len == 1 else plural(m.suffix_len, "token")
        times = "once" if m.occurrences == 1 else plural(m.occurrences, "time")
        said.append(f"the {name} holds {whose} last {tokens} {times}{when}")
    text = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
    return f"{text[0].upper()}{text[1:]}; the tokens after those matches make the tree below."


def retrieve_caption(
    event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, retrieval: RetrievalConfig | None = None
) -> str:
    """One sentence per source: which suffix of the context matched, how often, whether K capped it."""
    if not event.matches:
        return "Plain decoding: no source is asked for a draft; the model writes one token."
    parts = []
    tried = min(retrieval.n_max, len(context)) if retrieval else None
    if tried:
        parts.append(
            f"Each source looks up the last {plural(tried, 'token')} of the conversation, then shorter suffixes until one occurs."
        )
    for m in event.matches:
        tried_txt = ""
        if not m.suffix_len:
            end = (
                f"the conversation's last {plural(retrieval.n_min, 'token')} (the shortest ending it looks up)"
                if retrieval
                else "the end of the conversation"
            )
            parts.append(
                f"The {shown_name(m.source_bit, m.source)} does not contain {end}{tried_txt}: it drafts nothing."
            )
            continue
        text = visible(decode_text(tokenizer, m.suffix_tokens), 60)
        capped = ""
        if retrieval is not None and m.occurrences > retrieval.max_matches:
            capped = f"; K = {retrieval.max_matches:,}, {K_MEANS}, caps them: a fair sample of {retrieval.max_matches:,} is read"
        elif retrieval is not None:
            capped = f"; all are read (K = {retrieval.max_matches:,}, {K_MEANS})"
        parts.append(
            f"The {shown_name(m.source_bit, m.source)} matched the last {plural(m.suffix_len, 'token')} “{text}”{tried_txt}: "
            f"{plural(m.occurrences, 'occurrence')}{capped}."
        )
    return " ".join(parts)


def template_note(marks: Sequence[str]) -> str:
    """The one line naming the chat template's markers among the conversation's tokens shown."""
    listed = marks[0] if len(marks) == 1 else ", ".join(marks[:-1]) + " and " + marks[-1]
    return f"{listed}: the chat template's markers, which open and close each turn."


def match_underline(bits: Sequence[int]) -> str:
    """The style attribute underlining a context token in the colour of every source whose match
    covers it, one 3 px stripe each, the first lowest ("" for none): where code matched 3 tokens
    and chat 5, the last 3 carry both stripes and the 2 before them chat's alone."""
    if not bits:
        return ""
    stripes = ", ".join(f"inset 0 -{3 * (i + 1)}px 0 {origin(b).color}" for i, b in enumerate(bits))
    return f' style="box-shadow: {stripes}"'


def retrieve_html(
    event: StepEvent,
    context: Sequence[int],
    tokenizer: Tokenizer,
    retrieval: RetrievalConfig | None = None,
    tail: int = 24,
    samples: int = 4,
) -> str:
    """The end of the conversation with each source's matched suffix underlined in its colour,
    and the continuations behind the heaviest branches of the trie (event.feeds), or, for an
    event without them, a few of the continuations that followed the matches."""
    longest = max((m.suffix_len for m in event.matches), default=0)
    shown = list(context[-max(tail, longest) :])
    cut = len(context) - len(shown)
    spans = []
    for i, t in enumerate(shown):
        from_end = len(shown) - i
        bits = [m.source_bit for m in event.matches if m.suffix_len >= from_end]
        cls = " ".join(f"m-{source_class(b)}" for b in bits)
        spans.append(
            f'<span class="tt-tok {cls}"{match_underline(bits)}>{esc(visible(token_text(tokenizer, t), 24))}</span>'
        )
    lead = "…" if cut > 0 else ""
    marks = list(dict.fromkeys(token_text(tokenizer, t) for t in shown if is_special(tokenizer, t)))
    template = f'<p class="tt-note">{esc(template_note(marks))}</p>' if marks else ""
    rows = [feeds_html(event, tokenizer)]
    for m in event.matches:
        if not m.suffix_len or event.feeds:
            continue
        conts = "".join(
            f"<li><code>{esc(visible(decode_text(tokenizer, c), 60))}</code></li>" for c in m.sample[:samples]
        )
        if conts:
            rows.append(
                f'<div><span class="chip {source_class(m.source_bit)}">{esc(shown_name(m.source_bit, m.source))}</span> what followed: <ul class="conts">{conts}</ul></div>'
            )
    # The lead sentence, the lookup's words folded, then the figure: the conversation's end with
    # each match underlined; the continuations behind the tree folded after it.
    caption = f'<p class="tt-cap">{esc(retrieve_caption(event, context, tokenizer, retrieval))}</p>'
    behind = "".join(rows)
    return (
        panel("retrieve", retrieve_lead(event), "How each source looked it up", caption)
        + f'<div class="tt-ctx">{lead}{"".join(spans)}</div>{template}'
        + (
            f'<details class="tt-more"><summary>The continuations behind the tree</summary>{behind}</details>'
            if behind
            else ""
        )
    )


# ----------------------------------------------------------------------------------------------
# Build the trie


def trie_lead(event: StepEvent) -> str:
    """The Build panel's one sentence: how many of the trie's nodes are drafted (the budget is the
    step header's and the fold's to say, not said a third time here)."""
    trie = event.trie
    if trie is None or len(trie) == 0:
        return "Nothing was retrieved, so this step has no trie and no draft."
    drafted = len(event.draft) if event.draft is not None else 0
    nodes = plural(event.trie_nodes or len(trie), "node")
    if not drafted:
        why = undrafted_reason(event)
        return f"None of the trie's {nodes} is drafted" + (f": {why}." if why else ".")
    return f"The {drafted} likeliest of the trie's {nodes} {'is' if drafted == 1 else 'are'} drafted."


def trie_caption(event: StepEvent) -> str:
    trie, draft = event.trie, event.draft
    if trie is None or len(trie) == 0:
        return "Nothing was retrieved, so there is no trie: this step verifies the root alone, like plain decoding."
    drafted = len(draft) if draft is not None else 0
    depth = int(draft.depths.max()) if draft is not None and len(draft) else 0
    return (
        f"What followed the matches merges into one trie of {plural(event.trie_nodes or len(trie), 'node')}: shared "
        f"prefixes become one branch, and a node's weight is the share of continuations through it (each source's "
        f"weight spread over its own). The {plural(drafted, 'likeliest node')}, a subtree up to "
        f"depth {depth}, are drafted ({budget_note(event)})."
        if drafted
        else f"None is drafted: {undrafted_reason(event)}."
    )


# ----------------------------------------------------------------------------------------------
# Verify: the model's own token at every row


@dataclass(frozen=True)
class RowCheck:
    """One draft node against the model's own token at its parent's row."""

    node: int  # index into event.draft (row node + 1)
    parent_row: int  # 0 = the root
    drafted: int  # the node's token
    # the model's own token at the parent row; off the walk's path, its likeliest token there
    # (event.row_tokens); None when that is not known
    model: int | None
    # "agree" | "disagree" | "not reached" (an earlier row of its branch disagreed) | "not checked"
    # (the answer ended before the walk got to the parent row): `draft_states`, the tree's marks
    status: str


ROW_STATUS = {ACCEPTED: "agree", REJECTED: "disagree", OFF_PATH: "not reached", UNCHECKED: "not checked"}


def model_tokens_by_row(event: StepEvent) -> dict[int, int]:
    """The model's own token at every row the acceptance walk visited: the walk starts at the
    root and moves to the drafted child that equals the model's token, so the i-th emitted token
    was the model's choice at the i-th visited row (greedy or sampled alike)."""
    visited = [0] + [a + 1 for a in event.accepted]
    return {row: int(t) for row, t in zip(visited, event.tokens)}


def row_checks(event: StepEvent) -> list[RowCheck]:
    """agree / disagree / not reached / not checked for every draft node, in row order, from
    `draft_states` (what the tree draws). The agreeing nodes are exactly the accepted ones."""
    draft = event.draft
    if draft is None or not len(draft):
        return []
    said = model_tokens_by_row(event)
    rows = event.row_tokens
    out = []
    for i, state in enumerate(draft_states(event)):
        parent = int(draft.parents[i]) + 1
        tok = int(draft.tokens[i])
        model = said.get(parent)
        if model is None:  # the walk chose nothing there: what the model would say, when the event has it
            model = rows[parent] if parent < len(rows) else None
        out.append(RowCheck(i, parent, tok, model, ROW_STATUS[state]))
    return out


NOT_USED = "· not used"  # a row off the walk's path: computed, not used


def _mark(check: RowCheck) -> str:
    """A verify row's first cell, short enough for a phone (the caption says what each means):
    agree / disagree, not used (a row under a rejected one: no verdict, its model token greyed),
    or not checked (the answer ended first)."""
    if check.status in ("agree", "disagree"):
        return {"agree": "✓ agree", "disagree": "✗ disagree"}[check.status]
    if check.status == "not checked":
        return "· not checked"
    return NOT_USED


def verify_caption(event: StepEvent, context: Sequence[int]) -> str:
    n = len(event.draft) if event.draft is not None else 0
    checks = row_checks(event)
    count = {s: sum(c.status == s for c in checks) for s in ("agree", "disagree", "not reached", "not checked")}
    root_pos = len(context) - 1
    if not n:
        return f"One forward over the root alone (position {root_pos}): the model's next token, as in plain decoding."
    parts = [
        f"{count['agree']} agree with the model's own (✓)",
        f"{count['disagree']} disagree (✗)",
        f"{count['not reached']} {'is' if count['not reached'] == 1 else 'are'} {KEY_SHORT[OFF_PATH]}: "
        "the walk stops where the model disagrees and never reaches the rows under it (the model's token there "
        "is greyed)",
    ]
    if count["not checked"]:
        parts.append(f"{count['not checked']} not checked: the answer ended first")
    return (
        f"One forward pass reads all {n + 1} rows at once (the root at position {root_pos}, each node at the root's "
        f"position plus its depth); the mask lets each row see the cached context, its ancestors and itself, so every row "
        f"computes what plain decoding would compute there. {_scored(event)} Of the drafted tokens, {'; '.join(parts)}."
    )


def _scored(event: StepEvent) -> str:
    """Which rows the output head scored: in the engine only those the walk reaches (lazy logits);
    the step-through's own steps (the engine's `explain` flag) also score the rest, after the
    step's clock, so the table can show the model's own token at rows never reached."""
    lazy = "The engine's output head scores only the rows the walk reaches (lazy logits)"
    if not event.row_tokens:
        return lazy + "."
    return (
        lazy + "; for this view only, the step-through asks it (its explain flag) to score every row too, after the "
        "step's clock, so the table shows the model's own token at the rows never reached."
    )


ROW_CLASS = {
    "agree": "tt-agree",
    "disagree": "tt-disagree",
    "not reached": "tt-not-reached",
    "not checked": "tt-not-reached tt-not-checked",
}


def verify_lead(event: StepEvent) -> str:
    """The Verify panel's one sentence: one forward, how many rows, how many agree."""
    checks = row_checks(event)
    if not checks:
        return "One forward over the root alone gives the model's next token, as plain decoding does."
    agree = sum(c.status == "agree" for c in checks)
    # the rows under a rejected token are counted once, by their fold under the table
    return (
        f"One forward checked all {len(checks) + 1} rows; "
        f"{agree} of the {plural(len(checks), 'drafted token')} {'is' if agree == 1 else 'are'} accepted."
    )


# The verify table's head: the model's own token after the parent row, the token it chooses at
# the node's place, beside the drafted one; the root's row is the last token already written.
MODEL_COLUMN = "model's choice here"
ROOT_ROW = "last written"


def _rows_table(rows: Sequence[str]) -> str:
    return (
        '<div class="scroll-x"><table class="tt-rows"><thead><tr><th></th><th>row</th><th>drafted</th>'
        f'<th title="the model\'s own token after the parent row">{MODEL_COLUMN}</th>'
        f'<th class="tt-pos" title="position id">pos</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def verify_html(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, limit: int = 24) -> str:
    """The caption and a table: the row's verdict first (so a phone keeps it on screen), the row
    and its parent, the drafted token, the model's own token at its parent row, the position id
    (class tt-pos: a phone hides it; the caption gives the rule). The rows under a rejected token
    (not used) sit in a fold of their own, with the same numbers (the tree's and the mask's)."""
    checks = row_checks(event)
    root_pos = len(context) - 1
    draft = event.draft
    root_tok = model_tokens_by_row(event).get(0)
    # the root is written: its choice is for the place after it, where its first-level drafts sit
    after = f' <span class="muted">(for pos {root_pos + 1})</span>' if root_tok is not None else ""
    body = [
        f'<tr class="tt-root"><td>{ROOT_ROW}</td><td>root</td><td><code>{esc(token_label(tokenizer, context[-1], 12))}</code></td>'
        f"<td><code>{esc(token_label(tokenizer, root_tok, 12)) if root_tok is not None else '–'}</code>{after}</td>"
        f'<td class="tt-pos">{root_pos}</td></tr>'
    ]
    unused = []
    for c in checks[:limit]:
        assert draft is not None
        pos = root_pos + int(draft.depths[c.node])
        model = esc(token_label(tokenizer, c.model, 12)) if c.model is not None else "–"
        grey = ' class="tt-unused"' if c.status == "not reached" else ""
        (unused if c.status == "not reached" else body).append(
            f'<tr class="{ROW_CLASS[c.status]}"><td>{esc(_mark(c))}</td><td>{c.node + 1} (parent {c.parent_row or "root"})</td>'
            f"<td><code>{esc(token_label(tokenizer, c.drafted, 12))}</code></td><td{grey}><code>{model}</code></td>"
            f'<td class="tt-pos">{pos}</td></tr>'
        )
    more = f'<p class="muted">{len(checks) - limit} more rows not listed.</p>' if len(checks) > limit else ""
    folded = (
        f'<details class="tt-unused-rows"><summary>{plural(len(unused), "row")} under a rejected token, not used'
        f"</summary>{_rows_table(unused)}</details>"
        if unused
        else ""
    )
    table = _rows_table(body) + folded + more
    # The lead sentence, the how folded, the table in view (a figure, not a wall of words).
    fold = f'<p class="tt-cap">{esc(verify_caption(event, context))}</p>'
    return panel("verify", verify_lead(event), "How one forward checks every row", fold) + table


# ----------------------------------------------------------------------------------------------
# Accept


def kept_rows(event: StepEvent) -> tuple[list[int], list[int]]:
    """(rows whose KV stays in the cache, rows dropped) of the verification forward, from the
    verify table: the root and the ✓ rows stay, except the row of the step's last written token
    when a draft is that token (it is the next step's root, so its KV is computed then)."""
    q = 1 + (len(event.draft) if event.draft is not None else 0)
    agree = [c.node + 1 for c in row_checks(event) if c.status == "agree"]
    path = [a + 1 for a in event.accepted]  # the same rows, in the walk's order
    assert sorted(agree) == sorted(path)
    ends_on_draft = bool(event.tokens) and bool(event.token_sources) and event.token_sources[-1] != 0
    keep = [0] + (path[:-1] if ends_on_draft else path)
    return keep, [r for r in range(q) if r not in keep]


def accept_caption(event: StepEvent, tokenizer: Tokenizer) -> str:
    """The walk's outcome in short sentences, every number from the verify table (`row_checks`,
    `kept_rows`): the ✓ rows accepted, the model's own token, the rows kept and dropped."""
    acc = [t for t, s in zip(event.tokens, event.token_sources) if s]
    own = [t for t, s in zip(event.tokens, event.token_sources) if not s]
    keep, drop = kept_rows(event)
    path = [a + 1 for a in event.accepted]
    out = ["The walk starts at the root and follows the drafted child that equals the model's own token."]
    if acc:
        end = end_token(event)
        labels = [token_label(tokenizer, t, 20) for t in acc]
        text = "".join(labels[:-1] + [END_MARK if end is not None else labels[-1]])
        out.append(
            f"It accepts {plural(len(acc), 'draft token')}, “{text}”: "
            f"{'row' if len(path) == 1 else 'rows'} {', '.join(map(str, path))}, the ✓ rows of the table."
        )
    else:
        out.append("It accepts 0 draft tokens: the table has no ✓ row.")
    if own:
        out.append(f"Then it appends the model's own token “{token_label(tokenizer, own[-1], 20)}”.")
    elif end_token(event) is not None:
        out.append(f"The last is the end of text: {no_own_reason(event)}. {END_SHOWN.strip()}")
    else:
        out.append(f"Then {no_own_reason(event)}.")
    out.append(f"{plural(len(event.tokens), 'token')} from one forward.")
    out.append(f"The cache keeps the KV of rows {', '.join(map(str, keep))}: the root and the accepted rows.")
    if not own and path:
        out.append(
            f"Row {path[-1]}'s token is the last one written; like every step's last token it would be the next "
            "step's root, so its KV is not kept."
        )
    out.append(f"{plural(len(drop), 'row')} {'is' if len(drop) == 1 else 'are'} dropped.")
    return " ".join(out)


def accept_lead(event: StepEvent, tokenizer: Tokenizer) -> str:
    """The Accept panel's one sentence: what the step wrote."""
    acc = sum(1 for s in event.token_sources if s)
    own = [t for t, s in zip(event.tokens, event.token_sources) if not s]
    then = f" and the model's own “{token_label(tokenizer, own[-1], 20)}”" if own else ""
    if end_token(event) is not None:
        then = f", the last the end of text {END_MARK}"
    return f"It accepts {plural(acc, 'draft token')}{then}: {plural(len(event.tokens), 'token')} from one forward."


def accept_html(event: StepEvent, tokenizer: Tokenizer) -> str:
    """The one sentence, the step's tokens, shaded as the answer above shades them (`shade_class`),
    an accepted end of text shown as END_MARK; the walk's details folded."""
    chips = []
    end = end_token(event)
    for i, (t, s) in enumerate(zip(event.tokens, event.token_sources)):
        cls = shade_class(s, event.accepted_len, event.step)
        text = (
            END_MARK if end is not None and i == len(event.tokens) - 1 else esc(visible(token_text(tokenizer, t), 20))
        )
        chips.append(f'<span class="{cls}">{text}</span>')
    return (
        panel("accept", accept_lead(event, tokenizer), "The walk, and what the cache keeps",
              f'<p class="tt-cap">{esc(accept_caption(event, tokenizer))}</p>')
        + f'<div class="tt-acc">{"".join(chips)}</div>'
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# One step, all phases


@dataclass(frozen=True)
class StepPanels:
    """What the step-through view shows for one step."""

    header: str  # HTML
    retrieve: str  # HTML
    trie_caption: str  # HTML
    trie: Any  # plotly Figure
    verify: str  # HTML
    mask: Any  # plotly Figure
    accept: str  # HTML


def step_header(event: StepEvent) -> str:
    """The step's header: its number and the answer's tokens so far, never a total of steps
    (the answer goes on past the steps taken: "Step 3 of 3" read as its end)."""
    return (
        f'<div class="tt-head"><b>Step {event.step + 1}</b> · {plural(event.totals.new_tokens, "token")} so far, '
        f"{len(event.tokens)} this step · {budget_words(event)}{' · finished' if event.finished else ''}</div>"
    )


def step_panels(
    event: StepEvent,
    context: Sequence[int],
    tokenizer: Tokenizer,
    retrieval: RetrievalConfig | None = None,
    max_trie_nodes: int = 80,
    stores: Mapping[str, Any] | None = None,
) -> StepPanels:
    """Every phase of one step. `stores`: the engine's datastores by name, for "where it came from"."""
    return StepPanels(
        header=step_header(event),
        retrieve=retrieve_html(event, context, tokenizer, retrieval)
        + provenance_html(event, stores or {}, context, tokenizer),
        trie_caption=panel(
            "trie", trie_lead(event), "How the trie is built", f'<p class="tt-cap">{esc(trie_caption(event))}</p>'
        ),
        trie=trie_figure(event, tokenizer, max_nodes=max_trie_nodes),
        verify=verify_html(event, context, tokenizer),
        mask=mask_figure(mask_view(event, context, tokenizer)),
        accept=accept_html(event, tokenizer),
    )
