"""Teaching views of one REST step: its phases (retrieve, build the trie, verify in one forward,
accept) as captions, HTML and Plotly figures built from the step's real `StepEvent`, plus the
"why this c" figure from the measured forward-cost curve.

Pure functions over events, the conversation's token ids and a tokenizer; no Gradio, no torch.
`context` everywhere is the token ids before the step: the prompt and every token emitted by
earlier steps, its last one being the step's root (emitted, not cached yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from rest_core.budget.auto import CostCurve
from rest_core.config import RetrievalConfig
from rest_core.decode.events import MatchInfo, StepEvent
from rest_core.ui.style import ACCEPTED_COLOR, MODEL_COLOR, Tokenizer, esc, source_class, token_text, visible
from rest_core.sources import SOURCE_CONTEXT, origin
from rest_core.drafting.tree import layout

N_CONTEXT_SHOWN = 4  # cached context columns drawn left of the tree in the mask figure
MAX_MASK_NODES = 64  # the mask figure draws at most this many draft nodes (c is at most 64 here)


def _dec(tokenizer: Tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def _label(tokenizer: Tokenizer, token: int, limit: int = 10) -> str:
    return visible(token_text(tokenizer, int(token)), limit)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ----------------------------------------------------------------------------------------------
# Retrieve


def retrieve_caption(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, retrieval: RetrievalConfig | None = None) -> str:
    """One sentence per source: which suffix of the context matched, how often, whether K capped it."""
    if not event.matches:
        return "Plain decoding: no source is asked for a draft; the model writes one token."
    parts = []
    tried = min(retrieval.n_max, len(context)) if retrieval else None
    if tried:
        parts.append(f"Each source looks up the last {_plural(tried, 'token')} of the conversation, then shorter suffixes until one occurs.")
    for m in event.matches:
        tried_txt = ""
        if not m.suffix_len:
            floor = f" of at least {_plural(retrieval.n_min, 'token')}" if retrieval else ""
            parts.append(f"The {m.source} has no suffix{floor} of the conversation{tried_txt}: it drafts nothing.")
            continue
        text = visible(_dec(tokenizer, m.suffix_tokens), 60)
        capped = ""
        if retrieval is not None and m.occurrences > retrieval.max_matches:
            capped = f"; K = {retrieval.max_matches:,} caps them, so a fair sample of {retrieval.max_matches:,} is used"
        elif retrieval is not None:
            capped = f"; all of them are used (K = {retrieval.max_matches:,})"
        parts.append(
            f"The {m.source} matched the last {_plural(m.suffix_len, 'token')} “{text}”{tried_txt}: "
            f"{_plural(m.occurrences, 'occurrence')}{capped}."
        )
    return " ".join(parts)


def retrieve_html(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, retrieval: RetrievalConfig | None = None,
                  tail: int = 24, samples: int = 4) -> str:
    """The end of the conversation with each source's matched suffix underlined in its colour,
    and a few of the continuations that followed the matches."""
    longest = max((m.suffix_len for m in event.matches), default=0)
    shown = list(context[-max(tail, longest):])
    cut = len(context) - len(shown)
    spans = []
    for i, t in enumerate(shown):
        from_end = len(shown) - i
        cls = " ".join(f"m-{source_class(m.source_bit)}" for m in event.matches if m.suffix_len >= from_end)
        spans.append(f'<span class="tt-tok {cls}">{esc(visible(token_text(tokenizer, t), 24))}</span>')
    lead = "…" if cut > 0 else ""
    rows = []
    for m in event.matches:
        if not m.suffix_len:
            continue
        conts = "".join(f"<li><code>{esc(visible(_dec(tokenizer, c), 60))}</code></li>" for c in m.sample[:samples])
        if conts:
            rows.append(f'<div><span class="chip {source_class(m.source_bit)}">{esc(m.source)}</span> what followed: <ul class="conts">{conts}</ul></div>')
    return (
        f'<p class="tt-cap" data-phase="retrieve">{esc(retrieve_caption(event, context, tokenizer, retrieval))}</p>'
        f'<div class="tt-ctx">{lead}{"".join(spans)}</div>' + "".join(rows)
    )


# ----------------------------------------------------------------------------------------------
# Where it came from (provenance)

PROVENANCE_SHOWN = 3  # occurrences shown per source
PROVENANCE_BEFORE = 40  # corpus tokens shown before a match
PROVENANCE_AFTER = 24  # and after its continuation


def _marked(tokenizer: Tokenizer, window: Sequence[int], at: int, n: int, cont: int, css: str) -> str:
    """Corpus text of `window` with the match (window[at:at + n]) and the continuation that
    followed it (the next `cont` tokens) marked; each part decoded as a whole (multi-byte
    characters split over tokens stay intact)."""
    w = [int(t) for t in window]
    parts = [
        ("prov-before", w[:at]),
        (f"prov-match m-{css}", w[at : at + n]),
        (f"prov-cont {css}", w[at + n : at + n + cont]),
        ("prov-after", w[at + n + cont :]),
    ]
    return "".join(f'<span class="{cls}">{esc(_dec(tokenizer, ids))}</span>' for cls, ids in parts if ids)


def _occurrence_html(m: MatchInfo, i: int, store: Any, context: Sequence[int], tokenizer: Tokenizer) -> str:
    pos = m.positions[i]
    cont = len(m.sample[i]) if i < len(m.sample) else 0
    css = source_class(m.source_bit)
    if m.source_bit == SOURCE_CONTEXT:
        lo = max(0, pos - PROVENANCE_BEFORE)
        window = list(context[lo : pos + m.suffix_len + cont + PROVENANCE_AFTER])
        where = f"earlier in this conversation, token {pos:,}"
    else:  # a datastore: the document the occurrence sits in
        span = store.document_at(pos)
        window = store.context_around(pos, PROVENANCE_BEFORE, m.suffix_len + cont + PROVENANCE_AFTER)
        lo = max(span.start, pos - PROVENANCE_BEFORE)
        where = f'<span class="prov-doc">{esc(span.name)}</span> · token {pos - span.start:,} of {span.end - span.start:,} in that document'
    text = _marked(tokenizer, window, pos - lo, m.suffix_len, cont, css)
    return f'<li class="prov-occ" data-position="{pos}"><div class="prov-where">{where}</div><div class="prov-text">{text}</div></li>'


def provenance_html(event: StepEvent, stores: Mapping[str, Any], context: Sequence[int], tokenizer: Tokenizer,
                    shown: int = PROVENANCE_SHOWN) -> str:
    """"Where it came from": for the first few sampled occurrences of each source's match, the
    document (a datastore's; the conversation for the context source) and the text around it,
    the matched suffix and the continuation that followed it marked. `stores`: the engine's
    datastores by source name. A store without a document index says how to rebuild it."""
    blocks = []
    for m in event.matches:
        if not m.suffix_len or not m.positions:
            continue
        head = f'<span class="chip {source_class(m.source_bit)}">{esc(m.source)}</span>'
        store = stores.get(m.source) if m.source_bit != SOURCE_CONTEXT else None
        if m.source_bit != SOURCE_CONTEXT and store is None:
            continue
        if store is not None and store.documents is None:
            blocks.append(f'<div class="prov-src">{head} <span class="prov-note">{esc(store.documents_note)}</span></div>')
            continue
        n = min(shown, len(m.positions))
        items = "".join(_occurrence_html(m, i, store, context, tokenizer) for i in range(n))
        of = f"{n} of the {_plural(m.occurrences, 'occurrence')}"
        blocks.append(f'<div class="prov-src">{head} {of}: the match <span class="prov-match-key m-{source_class(m.source_bit)}">underlined</span>, '
                      f'what followed it (the draft) <span class="prov-cont-key {source_class(m.source_bit)}">shaded</span><ul class="prov-list">{items}</ul></div>')
    if not blocks:
        return ""
    return (
        '<details class="prov" id="provenance"><summary>Where it came from: the documents behind the drafts</summary>'
        + "".join(blocks) + "</details>"
    )


# ----------------------------------------------------------------------------------------------
# Build the trie


def trie_caption(event: StepEvent) -> str:
    trie, draft = event.trie, event.draft
    if trie is None or len(trie) == 0:
        return "Nothing was retrieved, so there is no trie: this step verifies the root alone, like plain decoding."
    drafted = len(draft) if draft is not None else 0
    depth = int(draft.depths.max()) if draft is not None and len(draft) else 0
    return (
        f"What followed the matches merges into one trie of {_plural(len(trie), 'node')}: shared "
        f"prefixes become one branch, and a node's weight is the share of continuations through it (each source's "
        f"weight spread over its own). The {_plural(drafted, 'heaviest node')} (c = {event.budget}), a subtree up to "
        f"depth {depth}, are drafted."
    )


# ----------------------------------------------------------------------------------------------
# Verify: the tree attention mask


@dataclass(frozen=True)
class MaskView:
    """The verification forward's attention pattern, as drawn.

    z: (1 + N, k + 1 + N) int: 0 = hidden, 1 = cached context (every row sees it), 2 = the root or
    an ancestor, 3 = the row itself. Rows: root + draft nodes; columns: the last k cached context
    tokens, the root, the draft nodes. mask: the (1 + N, 1 + N) tree part, True = may attend.
    """

    z: np.ndarray
    mask: np.ndarray
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    row_positions: tuple[int, ...]  # position ids of the rows (root position + depth)
    col_positions: tuple[int, ...]
    n_context: int  # k
    hidden_nodes: int  # draft nodes beyond MAX_MASK_NODES, not drawn


def mask_view(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, n_context: int = N_CONTEXT_SHOWN,
              max_nodes: int = MAX_MASK_NODES) -> MaskView:
    """The mask of the step's verification forward, built by the same `rest_core.drafting.tree.layout`
    the engine uses, with the last `n_context` cached tokens in front."""
    draft = event.draft
    if draft is not None and len(draft):
        tree = layout(draft)
        mask, offsets, tokens = tree.mask, tree.positions, tree.tokens.tolist()
    else:
        mask, offsets, tokens = np.ones((1, 1), bool), np.zeros(1, np.int64), []
    hidden = max(0, len(tokens) - max_nodes)
    q = min(len(tokens), max_nodes) + 1
    mask, offsets, tokens = mask[:q, :q], offsets[:q], tokens[: q - 1]
    root = int(context[-1])
    root_pos = len(context) - 1  # the cache holds context[:-1]
    cached = list(context[-1 - n_context : -1]) if len(context) > 1 else []
    k = len(cached)
    z = np.zeros((q, k + q), np.int64)
    z[:, :k] = 1
    z[:, k:] = np.where(mask, 2, 0)
    z[np.arange(q), k + np.arange(q)] = 3
    rows = [f"root {_label(tokenizer, root)}"] + [f"{i + 1}: {_label(tokenizer, t)}" for i, t in enumerate(tokens)]
    cols = [_label(tokenizer, t) for t in cached] + rows
    return MaskView(
        z=z,
        mask=mask.copy(),
        row_labels=tuple(rows),
        col_labels=tuple(cols),
        row_positions=tuple(int(root_pos + o) for o in offsets),
        col_positions=tuple(range(root_pos - k, root_pos)) + tuple(int(root_pos + o) for o in offsets),
        n_context=k,
        hidden_nodes=hidden,
    )


MASK_COLORS = ("#f3f4f6", "#93c5fd", "#16a34a", "#065f46")  # hidden, cached context, root/ancestor, itself


def mask_figure(view: MaskView):
    """Plotly heatmap of a MaskView: one row per token verified (its position id in brackets),
    one column per token it could see (the position id under it); the last cached context
    column is followed by a dotted line."""
    import plotly.graph_objects as go

    q, cols = view.z.shape
    scale = []
    for i, color in enumerate(MASK_COLORS):  # discrete colours for the values 0..3
        scale += [[i / 4, color], [(i + 1) / 4, color]]
    # Unique category names (the same token can sit in several rows), the position id under each.
    cols_cat = [f"{i}:{lab}<br><sub>{p}</sub>" for i, (lab, p) in enumerate(zip(map(esc, view.col_labels), view.col_positions))]
    rows_cat = [f"{esc(lab)} ({p})" for lab, p in zip(view.row_labels, view.row_positions)]
    # No per-cell hover text: with c = 64 that is ~4,500 strings and most of the figure's cost;
    # the colour bar names the four values instead.
    fig = go.Figure(
        go.Heatmap(
            z=view.z, x=cols_cat, y=rows_cat, zmin=0, zmax=4, colorscale=scale, xgap=1, ygap=1,
            hovertemplate="row %{y}<br>column %{x}<extra></extra>",
            colorbar=dict(tickvals=[0.5, 1.5, 2.5, 3.5], ticktext=["hidden", "cached context", "root / ancestor", "itself"], thickness=10, len=0.9),
        )
    )
    size = max(220, min(760, 60 + 18 * q))
    fig.update_layout(
        height=size,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(type="category", side="top", tickangle=0 if cols <= 12 else -90, tickfont=dict(size=9), fixedrange=True),
        yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=9), fixedrange=True),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    if view.n_context:
        fig.add_vline(x=view.n_context - 0.5, line=dict(color="#374151", width=1.5, dash="dot"))
    return fig


@dataclass(frozen=True)
class RowCheck:
    """One draft node against the model's own token at its parent's row."""

    node: int  # index into event.draft (row node + 1)
    parent_row: int  # 0 = the root
    drafted: int  # the node's token
    model: int | None  # the model's own token at the parent row; None when the walk never got there
    status: str  # "agree" | "disagree" | "not reached"


def model_tokens_by_row(event: StepEvent) -> dict[int, int]:
    """The model's own token at every row the acceptance walk visited: the walk starts at the
    root and moves to the drafted child that equals the model's token, so the i-th emitted token
    was the model's choice at the i-th visited row (greedy or sampled alike)."""
    visited = [0] + [a + 1 for a in event.accepted]
    return {row: int(t) for row, t in zip(visited, event.tokens)}


def row_checks(event: StepEvent) -> list[RowCheck]:
    """agree / disagree / not reached for every draft node, in row order. The agreeing nodes are
    exactly the accepted ones."""
    draft = event.draft
    if draft is None or not len(draft):
        return []
    said = model_tokens_by_row(event)
    out = []
    for i in range(len(draft)):
        parent = int(draft.parents[i]) + 1
        tok = int(draft.tokens[i])
        model = said.get(parent)
        status = "not reached" if model is None else ("agree" if model == tok else "disagree")
        out.append(RowCheck(i, parent, tok, model, status))
    return out


def verify_caption(event: StepEvent, context: Sequence[int]) -> str:
    n = len(event.draft) if event.draft is not None else 0
    checks = row_checks(event)
    agree = sum(c.status == "agree" for c in checks)
    disagree = sum(c.status == "disagree" for c in checks)
    root_pos = len(context) - 1
    if not n:
        return f"One forward over the root alone (position {root_pos}): the model's next token, as in plain decoding."
    return (
        f"One forward pass reads all {n + 1} rows at once (the root at position {root_pos}, each node at the root's "
        f"position plus its depth); the mask lets each row see the cached context, its ancestors and itself, so every row "
        f"computes what plain decoding would compute there. The output head then scores only the rows the walk reaches "
        f"(lazy logits). {agree} drafted token{'s' if agree != 1 else ''} "
        f"agree{'s' if agree == 1 else ''} with the model's own, {disagree} disagree, the rest are never reached."
    )


def verify_html(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, limit: int = 24) -> str:
    """The caption and a table: row, position id, drafted token, the model's own token at its
    parent row, agree / disagree / not reached."""
    checks = row_checks(event)
    root_pos = len(context) - 1
    draft = event.draft
    body = []
    said = model_tokens_by_row(event)
    root_tok = said.get(0)
    body.append(
        f'<tr class="tt-root"><td>root</td><td>{root_pos}</td><td><code>{esc(_label(tokenizer, context[-1], 16))}</code></td>'
        f'<td><code>{esc(_label(tokenizer, root_tok, 16)) if root_tok is not None else "–"}</code></td><td>(the step starts here)</td></tr>'
    )
    for c in checks[:limit]:
        assert draft is not None
        pos = root_pos + int(draft.depths[c.node])
        model = esc(_label(tokenizer, c.model, 16)) if c.model is not None else "–"
        mark = {"agree": "✓ agree", "disagree": "✗ disagree", "not reached": "· not reached"}[c.status]
        body.append(
            f'<tr class="tt-{c.status.replace(" ", "-")}"><td>{c.node + 1} (parent {c.parent_row or "root"})</td><td>{pos}</td>'
            f"<td><code>{esc(_label(tokenizer, c.drafted, 16))}</code></td><td><code>{model}</code></td><td>{mark}</td></tr>"
        )
    more = f'<p class="muted">{len(checks) - limit} more rows not listed.</p>' if len(checks) > limit else ""
    return (
        f'<p class="tt-cap" data-phase="verify">{esc(verify_caption(event, context))}</p>'
        '<table class="tt-rows"><thead><tr><th>row</th><th>position id</th><th>drafted</th><th>model\'s own token at the parent row</th><th></th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


# ----------------------------------------------------------------------------------------------
# Accept


def kept_rows(event: StepEvent) -> tuple[list[int], list[int]]:
    """(rows whose KV stays in the cache, rows dropped) of the verification forward: the root and
    the accepted rows stay, except the last emitted token's (it is the next step's root)."""
    q = 1 + (len(event.draft) if event.draft is not None else 0)
    rows = [a + 1 for a in event.accepted]
    keep = [0] + rows[: len(event.tokens) - 1]
    return keep, [r for r in range(q) if r not in keep]


def accept_caption(event: StepEvent, tokenizer: Tokenizer) -> str:
    acc = [t for t, s in zip(event.tokens, event.token_sources) if s]
    own = [t for t, s in zip(event.tokens, event.token_sources) if not s]
    keep, drop = kept_rows(event)
    walk = (
        f"The walk from the root follows the drafted child equal to the model's own token: it accepts {_plural(len(acc), 'draft token')}"
        + (f" “{visible(_dec(tokenizer, acc), 60)}”" if acc else "")
    )
    tail = f", then appends the model's own token “{visible(_dec(tokenizer, own), 20)}”" if own else " (and stops: end of text or length)"
    return (
        f"{walk}{tail}: {_plural(len(event.tokens), 'token')} from one forward. "
        f"The KV of rows {', '.join(map(str, keep))} stays in the cache; {_plural(len(drop), 'row')} are dropped."
    )


def accept_html(event: StepEvent, tokenizer: Tokenizer) -> str:
    chips = []
    for t, s in zip(event.tokens, event.token_sources):
        cls = f"tok d {origin(s).css} r1 p0" if s else "tok m p0"
        chips.append(f'<span class="{cls}">{esc(visible(token_text(tokenizer, t), 20))}</span>')
    return f'<p class="tt-cap" data-phase="accept">{esc(accept_caption(event, tokenizer))}</p><div class="tt-acc">{"".join(chips)}</div>'


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


def step_panels(event: StepEvent, context: Sequence[int], tokenizer: Tokenizer, retrieval: RetrievalConfig | None = None,
                n_steps: int | None = None, max_trie_nodes: int = 80, stores: Mapping[str, Any] | None = None) -> StepPanels:
    """Every phase of one step. `stores`: the engine's datastores by name, for "where it came from"."""
    from rest_core.ui.trie_view import trie_figure

    of = f" of {n_steps}" if n_steps else ""
    header = (
        f'<div class="tt-head"><b>Step {event.step + 1}{of}</b> · c = {event.budget} · '
        f"{len(event.tokens)} token{'s' if len(event.tokens) != 1 else ''} this step · {event.totals.new_tokens} so far"
        f"{' · finished' if event.finished else ''}</div>"
    )
    return StepPanels(
        header=header,
        retrieve=retrieve_html(event, context, tokenizer, retrieval) + provenance_html(event, stores or {}, context, tokenizer),
        trie_caption=f'<p class="tt-cap" data-phase="trie">{esc(trie_caption(event))}</p>',
        trie=trie_figure(event, tokenizer, max_nodes=max_trie_nodes),
        verify=verify_html(event, context, tokenizer),
        mask=mask_figure(mask_view(event, context, tokenizer)),
        accept=accept_html(event, tokenizer),
    )


# ----------------------------------------------------------------------------------------------
# Why this c


def expected_accepted(events: Sequence[StepEvent], cs: Sequence[int]) -> np.ndarray:
    """(len(cs),) expected draft tokens accepted per step with budget c, from the session's tries.

    A node's share of the root's weight estimates the chance the model's path runs through it;
    summed over the top-c nodes it predicts the accepted count (as the auto budget does). The
    prediction is scaled so that at the budgets actually used it matches what was accepted.
    """
    cs = np.asarray(cs, np.int64)
    predicted = np.zeros(cs.shape[0])
    used_pred = used_acc = 0.0
    steps = 0
    for e in events:
        if e.method != "rest":
            continue
        steps += 1
        trie = e.trie
        if trie is None or len(trie) == 0:
            continue
        root_weight = float(trie.weights[trie.depths == 1].sum())
        if root_weight <= 0:
            continue
        w = np.sort(trie.weights)[::-1][: int(cs.max())] / root_weight
        cum = np.concatenate(([0.0], np.cumsum(w)))
        predicted += cum[np.minimum(cs, w.shape[0])]
        used_pred += cum[min(len(e.draft) if e.draft is not None else 0, w.shape[0])]
        used_acc += e.accepted_len
    if not steps:
        return np.zeros(cs.shape[0])
    scale = used_acc / used_pred if used_pred > 0 else 1.0
    return scale * predicted / steps


def why_c_figure(curve: CostCurve, events: Sequence[StepEvent], chosen_c: int, max_c: int = 64):
    """Two panels: the measured forward cost against the tokens verified (1 + c), and the expected
    speedup over plain decoding against c, with the chosen c marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cs = np.arange(0, max_c + 1)
    acc = expected_accepted(events, cs)
    overheads = [e.timings.total_ms - e.timings.forward_ms for e in events if e.method == "rest"]
    overhead = float(np.median(overheads)) if overheads else 0.0
    plain = float(curve(1))
    speedup = (1.0 + acc) * plain / (overhead + curve(cs + 1))
    best = int(cs[np.argmax(speedup)])
    fig = make_subplots(rows=1, cols=2, subplot_titles=("forward cost on this device", "expected speedup vs c"), horizontal_spacing=0.14)
    fig.add_trace(go.Scatter(x=list(curve.sizes), y=list(curve.ms), mode="lines+markers", name="measured", line=dict(color=MODEL_COLOR),
                             hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>"), 1, 1)
    fig.add_trace(go.Scatter(x=cs.tolist(), y=speedup.tolist(), mode="lines", name="expected speedup", line=dict(color="#2563eb"),
                             customdata=acc.tolist(), hovertemplate="c = %{x}: %{y:.2f}× (%{customdata:.2f} accepted per step)<extra></extra>"), 1, 2)
    c = int(min(max(chosen_c, 0), max_c))
    fig.add_trace(go.Scatter(x=[c], y=[float(speedup[c])], mode="markers+text", text=[f"your c = {c}"], textposition="top center",
                             marker=dict(size=11, color=ACCEPTED_COLOR), name="chosen c", hoverinfo="skip"), 1, 2)
    fig.add_hline(y=1.0, line=dict(color="#9ca3af", dash="dot"), row=1, col=2)
    fig.update_xaxes(title_text="tokens in one forward (1 + c)", type="log", tickvals=list(curve.sizes), row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="c (draft tokens verified)", row=1, col=2)
    fig.update_yaxes(title_text="× plain decoding", rangemode="tozero", row=1, col=2)
    fig.update_layout(height=300, margin=dict(l=50, r=10, t=40, b=45), showlegend=False,
                      plot_bgcolor="rgba(0,0,0,0)", paper_bgcolor="rgba(0,0,0,0)")
    fig.layout.meta = dict(best_c=best)
    return fig


def why_c_caption(curve: CostCurve, events: Sequence[StepEvent], chosen_c: int) -> str:
    rest = [e for e in events if e.method == "rest"]
    if not rest:
        return "Generate (or step through) an answer first: the expected speedup needs the session's acceptance figures."
    acc = float(np.mean([e.accepted_len for e in rest]))
    m = (rest[-1].totals.new_tokens / rest[-1].totals.steps) if rest[-1].totals.steps else 0.0
    ratio = float(curve(1 + chosen_c) / curve(1))
    return (
        f"Verifying 1 token costs {float(curve(1)):.1f} ms here and 1 + {chosen_c} tokens {float(curve(1 + chosen_c)):.1f} ms "
        f"({ratio:.2f}× as long). This session accepted {acc:.2f} draft tokens per step (M = {m:.2f} tokens per forward), "
        f"so a bigger c pays only while the extra accepted tokens outgrow the extra forward cost: on a GPU the cost is almost "
        f"flat up to dozens of tokens, on a CPU it grows at once."
    )


# ----------------------------------------------------------------------------------------------
# Compare: lanes on one clock

LOOKUP = -1  # a block's `sources` when prompt lookup drafted its accepted tokens
LOOKUP_COLOR = "#0d9488"  # teal: no engine source uses it


@dataclass(frozen=True)
class Block:
    """One forward pass on the decode clock (ms after the end of prefill)."""

    start_ms: float
    ms: float
    tokens: tuple[int, ...]
    sources: int  # the source bits of its first accepted draft; 0: the model's own token only; LOOKUP


def event_blocks(events: Sequence[StepEvent]) -> list[Block]:
    """The engine's steps (REST or plain) as blocks: each ends at its event's elapsed time."""
    out = []
    for e in events:
        drafted = [s for s in e.token_sources if s]
        end = 1000 * e.totals.elapsed_s
        out.append(Block(end - e.timings.total_ms, e.timings.total_ms, tuple(e.tokens), int(drafted[0]) if drafted else 0))
    return out


def lookup_blocks(token_ids: Sequence[int], counts: Sequence[int], ends_ms: Sequence[float]) -> list[Block]:
    """Prompt lookup's forwards as blocks (rest_core.bench.prompt_lookup.LookupRun's fields): forward i
    added counts[i] tokens and ended at ends_ms[i]; the prefill's tokens come first, off the clock."""
    out, start, at = [], 0.0, len(token_ids) - sum(counts)
    for n, end in zip(counts, ends_ms):
        out.append(Block(start, end - start, tuple(token_ids[at : at + n]), LOOKUP if n > 1 else 0))
        start, at = end, at + n
    return out


def _block_style(sources: int) -> tuple[str, str]:
    """(colour, legend name) of a block."""
    if sources == LOOKUP:
        return LOOKUP_COLOR, "accepted drafts: prompt lookup"
    if sources == 0:
        return "#9ca3af", "model's own token only"
    o = origin(sources)
    return o.color, f"accepted drafts: {o.label}"


def timeline_figure(lanes: Sequence[tuple[str, Sequence[Block]]], tokenizer: Tokenizer):
    """Methods on one wall-clock axis (decode time, prefill excluded), one lane each, top first:
    one block per forward pass, as wide as it took, labelled with the tokens it produced and
    coloured by who drafted its accepted tokens (grey: the model's own token only)."""
    import plotly.graph_objects as go

    groups: dict[tuple[int, str], dict[str, list]] = {}
    for lane, blocks in lanes:
        for i, b in enumerate(blocks):
            g = groups.setdefault((b.sources, lane), {"base": [], "x": [], "y": [], "text": [], "hover": []})
            text = visible(_dec(tokenizer, b.tokens), 40)
            g["base"].append(b.start_ms)
            g["x"].append(b.ms)
            g["y"].append(lane)
            g["text"].append(esc(text))
            g["hover"].append(f"{esc(lane)}, forward {i + 1}: {_plural(len(b.tokens), 'token')} in {b.ms:.1f} ms<br>{esc(text)}")
    data: list = []
    for (sources, _), g in sorted(groups.items()):
        color, name = _block_style(sources)
        data.append(go.Bar(
            base=g["base"], x=g["x"], y=g["y"], orientation="h", text=g["text"], textposition="inside", insidetextanchor="start",
            textfont=dict(size=10), marker=dict(color=color, line=dict(color="#ffffff", width=1)), name=name,
            legendgroup=name, showlegend=not any(d.name == name for d in data), hovertext=g["hover"], hoverinfo="text",
        ))
    fig = go.Figure(data=data)
    fig.update_layout(
        barmode="overlay", height=140 + 45 * len(lanes), margin=dict(l=90, r=10, t=34, b=40),
        xaxis=dict(title="decode time (ms, prefill excluded)", rangemode="tozero"),
        yaxis=dict(categoryorder="array", categoryarray=[lane for lane, _ in reversed(lanes)]),
        legend=dict(orientation="h", y=-0.45, font=dict(size=11)),
        plot_bgcolor="rgba(0,0,0,0)", paper_bgcolor="rgba(0,0,0,0)",
    )
    return fig


# ----------------------------------------------------------------------------------------------
# Guided examples: prompt, datastore, mode and knobs together


@dataclass(frozen=True)
class GuidedExample:
    """One lesson: what to type, which store, where to run it (mode) and the settings, plus
    what to watch. mode: "step" (the step-through), "send" (stream the answer), "compare"."""

    title: str
    prompt: str
    store: str  # a store's name, or "none"
    mode: str
    knobs: tuple[tuple[str, Any], ...]  # knob name -> value; the others keep the device preset's
    watch: str


GUIDED_EXAMPLES: tuple[GuidedExample, ...] = (
    GuidedExample(
        "Code with the code store, step by step (c = 16)",
        "Write a Python function that checks whether a string is a palindrome, with a docstring and two tests.",
        "code", "step", (("c", 16), ("budget", "fixed"), ("use_datastore", True), ("use_context", True), ("temperature", 0.0)),
        "Press Next step: each step shows the suffix it matched, the trie of what followed, the mask of the one forward "
        "and the walk that accepts drafts. Open “Where it came from” to see the code files behind a draft.",
    ),
    GuidedExample(
        "A question the corpus knows nothing about: few drafts, plain speed",
        "Name three rivers of Mongolia and say where each one flows.",
        "code", "compare", (("use_datastore", True), ("use_context", False), ("n_min", 3), ("temperature", 0.0)),
        "The code store has little to say about Mongolian rivers: with n_min = 3, most steps find no match and draft nothing, "
        "so REST runs at about plain decoding's speed (press Compare), and never changes the text.",
    ),
    GuidedExample(
        "Ask the same thing twice: the conversation drafts the second answer",
        "Explain the difference between a list and a tuple in Python, in three sentences.",
        "none", "send", (("use_datastore", False), ("use_context", True), ("temperature", 0.0)),
        "Send it, then send the same message again. The second answer repeats the first, so the context source "
        "(amber) drafts whole runs of it and M jumps.",
    ),
    GuidedExample(
        "Sampling at temperature 0.8: still exact",
        "What are three tips for staying productive when working from home?",
        "chat", "send", (("temperature", 0.8), ("top_p", 0.95), ("use_datastore", True), ("use_context", True)),
        "The model now samples. A draft token is kept only when it equals the model's own draw at that position, so each "
        "token still follows exactly the model's distribution: the drafts change the speed, never the odds.",
    ),
)


def example_settings(example: GuidedExample, knob_values: Mapping[str, Any]) -> dict[str, Any]:
    """The page's knob values (name -> value) with the example's settings applied."""
    unknown = [k for k, _ in example.knobs if k not in knob_values]
    if unknown:
        raise ValueError(f"example {example.title!r} sets unknown knobs: {', '.join(unknown)}")
    return {**knob_values, **dict(example.knobs)}


# ----------------------------------------------------------------------------------------------
# Why the speedup is not M


def speedup_explained(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent]) -> str:
    """Why the measured speedup is M divided by how much longer a REST step takes, from the two
    runs' own figures (decode time, prefill excluded); "" when either run is empty."""
    if not rest_events or not ar_events:
        return ""
    r, a = rest_events[-1].totals, ar_events[-1].totals
    if not (r.steps and a.steps and r.elapsed_s > 0 and a.elapsed_s > 0):
        return ""
    rest_ms, plain_ms = 1000 * r.elapsed_s / r.steps, 1000 * a.elapsed_s / a.steps
    ratio = rest_ms / plain_ms
    retrieval = r.retrieval_ms / r.steps
    noisy = (
        " A REST step cannot really be faster than a plain one (it does the same forward and more): the machine was busier "
        "during one run than the other, so compare again for steadier figures." if ratio < 1 else ""
    )
    return (
        f"Why the speedup is not M: REST wrote M = {r.mean_generated_length:.2f} tokens per forward, but a REST step took "
        f"{rest_ms:.1f} ms against {plain_ms:.1f} ms for a plain one-token step ({ratio:.2f}× as long: its forward verifies "
        f"the root and up to c drafts, and retrieval with the trie adds {retrieval:.1f} ms), so the speedup is "
        f"{r.mean_generated_length:.2f} / {ratio:.2f} = {r.mean_generated_length / ratio:.2f}×.{noisy} "
        "These tokens/s can differ from the live stats above: both leave out prefill (the one forward over the whole prompt "
        "before the first new token), but the live answer may also have paid the first request's warm-up (compiling the "
        "retrieval kernels, filling caches) and shared the machine with other users, while this comparison runs each method "
        "back to back on a warm model."
    )
