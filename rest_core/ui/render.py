"""Step events -> what the app shows: highlighted answer HTML, the Plotly draft-tree figure,
the per-step inspector, live statistics and the REST-vs-plain speed comparison.

Pure functions and small accumulator classes over `StepEvent`s and a tokenizer; no Gradio here,
so everything is testable on hand-made events. Class names used in the HTML are styled by
assets/app.css.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from typing import Any, Protocol, Sequence

import numpy as np

from rest_core.decode.events import SOURCE_DATASTORE, StepEvent, Totals
from rest_core.sources import MODEL, STYLES, SourceTable, count_origins, origin
from rest_core.drafting.trie import Trie

# One colour per draft source (by bit), shared by the highlighting (CSS) and the trie figure;
# a token of several sources takes `origin(mask).color`.
SOURCE_COLORS: dict[int, str] = {bit: color for bit, (_, color) in STYLES.items()}
ACCEPTED_COLOR = "#16a34a"
MODEL_COLOR = MODEL.color
GREY = "#9ca3af"


class Tokenizer(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ..., **kwargs: Any) -> str: ...


def _decode(tokenizer: Tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def esc(text: str) -> str:
    """HTML-escape model output, quotes included (it also lands inside attributes)."""
    return html.escape(text, quote=True)


def source_class(mask: int) -> str:
    return origin(mask).css


def source_label(mask: int, names: dict[int, str] | None = None) -> str:
    """"code + context": the sources of `mask` by name (`names`: bit -> name, e.g. an engine's
    table or a step's matches; else the default names)."""
    return origin(mask, names).label


# ----------------------------------------------------------------------------------------------
# Incremental detokenization


class IncrementalDecoder:
    """Turns a stream of token ids into text pieces, one per token, that concatenate to the
    decoded text exactly.

    Decoding token by token is wrong for byte-level vocabularies: one character (an emoji, a CJK
    character) can span several tokens, and a token can end inside a character. So each new token
    decodes a short window of recent ids and takes the growth of that text; while the window ends
    inside a character (the decoded text ends with U+FFFD) the token yields None and its bytes are
    carried into the next token's piece.
    """

    MAX_PENDING = 4  # a UTF-8 character is at most 4 bytes: never wait for more tokens than that

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._prefix = 0  # start of the decode window (kept one token back for word-start spaces)
        self._read = 0  # ids before this index have been emitted as text

    def push(self, token_id: int) -> str | None:
        """Add one token; return the text it completes, or None if it ends inside a character."""
        self.ids.append(int(token_id))
        prefix_text = _decode(self.tokenizer, self.ids[self._prefix : self._read])
        full_text = _decode(self.tokenizer, self.ids[self._prefix :])
        pending = len(self.ids) - self._read
        if full_text.endswith("\ufffd") and pending < self.MAX_PENDING:
            return None
        return self._emit(prefix_text, full_text)

    def flush(self) -> str:
        """Text of tokens still waiting for the rest of a character (at the end of an answer)."""
        if self._read == len(self.ids):
            return ""
        prefix_text = _decode(self.tokenizer, self.ids[self._prefix : self._read])
        return self._emit(prefix_text, _decode(self.tokenizer, self.ids[self._prefix :]))

    def _emit(self, prefix_text: str, full_text: str) -> str:
        # The window's text extends the prefix's text; its growth is this token's piece.
        piece = full_text[len(prefix_text) :]
        self._prefix = self._read
        self._read = len(self.ids)
        return piece


# ----------------------------------------------------------------------------------------------
# Highlighted answer


_LEADING_BLANKS = re.compile(r"[ \t]*\n\s*|[ \t]{2,}")  # a line break with its indentation, or 2+ spaces


def run_level(accepted_len: int) -> int:
    """Shade strength for a step that accepted this many draft tokens: 1..4."""
    if accepted_len <= 1:
        return 1
    if accepted_len <= 3:
        return 2
    if accepted_len <= 7:
        return 3
    return 4


@dataclass(frozen=True)
class Span:
    """One highlighted piece of the answer: the text of one token, or of a few tokens when a
    character straddles token boundaries (then the first token's attributes are shown)."""

    text: str
    token_ids: tuple[int, ...]
    step: int
    source: int  # bitmask of the sources that drafted it; 0 = the model's own token
    accepted_len: int  # draft tokens accepted in this step
    suffix_lens: tuple[tuple[str, int], ...]  # (source name, matched suffix length) per source
    names: tuple[tuple[int, str], ...] = ()  # (bit, name) of the step's sources: stores by their names

    def title(self) -> str:
        parts = [f"step {self.step + 1}"]
        if self.source:
            parts.append(f"drafted by {source_label(self.source, dict(self.names))}")
        else:
            parts.append("model's own token")
        if self.suffix_lens:
            parts.append(
                "matched suffix " + ", ".join(f"{n} ({name})" if len(self.suffix_lens) > 1 else str(n) for name, n in self.suffix_lens)
            )
        parts.append(f"{self.accepted_len} draft token{'s' if self.accepted_len != 1 else ''} accepted this step")
        if len(self.token_ids) > 1:
            parts.append(f"{len(self.token_ids)} tokens form this character")
        return " · ".join(parts)

    def html(self) -> str:
        parity = self.step % 2
        if self.source:
            cls = f"tok d {source_class(self.source)} r{run_level(self.accepted_len)} p{parity}"
        else:
            cls = f"tok m p{parity}"
        attrs = f'data-step="{self.step}" title="{esc(self.title())}"'
        # Indentation and line breaks are not words: a run of them gets a thin line in the
        # token's colour, not the block of colour a word gets (class "ws").
        lead = _LEADING_BLANKS.match(self.text)
        if lead is None:
            return f'<span class="{cls}" {attrs}>{esc(self.text)}</span>'
        blank, rest = lead.group(0), self.text[lead.end():]
        out = f'<span class="{cls} ws" {attrs}>{esc(blank)}</span>'
        return out + (f'<span class="{cls}" {attrs}>{esc(rest)}</span>' if rest else "")


class AnswerView:
    """Accumulates one answer's step events into highlighted spans (cheap to extend per step)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.events: list[StepEvent] = []
        self.spans: list[Span] = []
        self._decoder = IncrementalDecoder(tokenizer)
        self._html: list[str] = []
        self._waiting: list[tuple[int, int, StepEvent]] = []  # tokens inside an unfinished character

    def add(self, event: StepEvent) -> None:
        self.events.append(event)
        for token, src in zip(event.tokens, event.token_sources):
            self._waiting.append((token, src, event))
            piece = self._decoder.push(token)
            if piece is not None:
                self._add_span(piece)
        if event.finished:
            self.finish()

    def finish(self) -> None:
        """Flush tokens that were waiting for the rest of a character."""
        if self._waiting:
            self._add_span(self._decoder.flush())

    def _add_span(self, text: str) -> None:
        waiting, self._waiting = self._waiting, []
        if not text:  # special tokens (EOS) decode to nothing
            return
        _, src, event = waiting[0]
        span = Span(
            text=text,
            token_ids=tuple(t for t, _, _ in waiting),
            step=event.step,
            source=src,
            accepted_len=event.accepted_len,
            suffix_lens=tuple((m.source, m.suffix_len) for m in event.matches),
            names=step_source_names(event),
        )
        self.spans.append(span)
        self._html.append(span.html())

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @property
    def totals(self) -> Totals | None:
        return self.events[-1].totals if self.events else None

    def html(self) -> str:
        return "".join(self._html)


def step_source_names(event: StepEvent) -> tuple[tuple[int, str], ...]:
    """(bit, name) of the sources that searched in this step: a store's own name ("code")
    instead of the bit's default ("store 2")."""
    return tuple((int(m.source_bit), m.source) for m in event.matches)


def highlight_html(events: Sequence[StepEvent], tokenizer: Tokenizer) -> str:
    """Highlighted HTML of a whole answer (see AnswerView for the incremental form)."""
    view = AnswerView(tokenizer)
    for e in events:
        view.add(e)
    view.finish()
    return view.html()


def legend_html(stores: Sequence[str] = ("datastore",)) -> str:
    """The colour key: one entry per datastore drafting (`stores`, in the engine's order, each
    in its own colour), the context, several sources together, the shades and the model."""

    def sample(cls: str, text: str, title: str) -> str:
        return f'<span class="{cls}" title="{esc(title)}">{esc(text)}</span>'

    levels = ((1, "1"), (2, "2-3"), (3, "4-7"), (4, "8+"))
    table = SourceTable.for_stores(list(stores))
    several = "both" if len(table.stores) < 2 else "several"

    def shades(css: str, name: str) -> str:  # each source's hue darkens the same way
        return f'<span class="shade-row">{esc(name)} ' + "".join(sample(f"tok d {css} r{k} p0", label, f"{name}: {label} draft tokens accepted in one step") for k, label in levels) + "</span>"

    return (
        '<div class="legend">'
        + "".join(sample(f"tok d {s.css} r1 p0", s.name, f"draft tokens retrieved from the datastore {s.name}") for s in table.stores)
        + sample("tok d cx r1 p0", "context", "draft tokens found earlier in this conversation")
        + sample("tok d both r1 p0", several, "draft tokens proposed by several sources")
        + sample("tok m p0", "model", "the model's own token that ends every step")
        + '<span class="legend-item">shade = draft tokens accepted in that step (darker: a longer accepted run): '
        + "".join(shades(st.css, st.name) for st in table.stores) + shades("cx", "context") + shades("both", several)
        + "</span>"
        + '<span class="legend-item">indentation and line breaks get a thin line, not a block; hover a token for its step, click it to inspect the step</span>'
        + "</div>"
    )


TREE_LEGEND = (
    "<b>Reading the draft tree.</b> ■ the <b>root</b>: the last token written, where this step starts. "
    "Each circle to its right is one token of the <b>trie</b> (the retrieved continuations merged, shared beginnings "
    "sharing a branch), deeper to the right, sized by <b>weight</b>: each source's weight split evenly over its "
    "continuations, summed over the continuations through the node (a node both sources reach adds both shares). "
    "Blue: datastore, amber: context, violet: both. "
    "● <b>filled</b> circle: one of the c <b>heaviest</b> nodes, drafted and verified; faded when the model disagreed. "
    "○ <b>hollow</b> grey circle with a dotted edge: retrieved, not drafted (outside the budget c). "
    "<b>Green</b> outline and thick green edge: the accepted path. "
    "★ on a <b>dashed</b> line: the model's own token that ends the step. "
    "Labels: ∅ a token that prints as nothing (a special token), · a space, ↵ a newline."
)


def tree_legend_html() -> str:
    """What every mark of `trie_figure` means, for beside it."""
    return f'<div class="tree-legend">{TREE_LEGEND}</div>'


# ----------------------------------------------------------------------------------------------
# Conversation


@dataclass
class Turn:
    """One exchange as shown in the chat: the user's text and the (possibly partial) answer."""

    user: str
    answer_html: str = ""
    note: str = ""  # e.g. "stopped", an error message, the finish reason
    error: bool = False


def conversation_html(turns: Sequence[Turn], placeholder: str = "") -> str:
    if not turns:
        return f'<div class="convo empty"><div class="placeholder">{esc(placeholder)}</div></div>'
    parts = []
    for t in turns:
        parts.append(f'<div class="msg user"><div class="bubble">{esc(t.user)}</div></div>')
        note = f'<div class="note{" err" if t.error else ""}">{esc(t.note)}</div>' if t.note else ""
        body = f'<div class="answer">{t.answer_html}</div>' if t.answer_html else ""
        if not body and not note:
            body = '<div class="answer thinking">…</div>'
        parts.append(f'<div class="msg bot"><div class="bubble">{body}{note}</div></div>')
    # column-reverse keeps the newest message in view while streaming, without any script.
    return '<div class="convo"><div class="convo-inner">' + "".join(parts) + "</div></div>"


# ----------------------------------------------------------------------------------------------
# Statistics


def source_counts(events: Sequence[StepEvent]) -> dict[str, int]:
    """Emitted tokens by origin: 'datastore', 'context', 'both', 'model'."""
    return count_origins(s for e in events for s in e.token_sources)


def stats_html(events: Sequence[StepEvent], running: bool = False) -> str:
    if not events:
        return '<div class="stats muted">Stats appear here while the answer streams.</div>'
    t = events[-1].totals
    c = source_counts(events)
    n = max(t.new_tokens, 1)
    items = [
        ("tokens/s", f"{t.tokens_per_s:.1f}"),
        ("tokens / step (M)", f"{t.mean_generated_length:.2f}"),
        ("steps", f"{t.steps}"),
        ("tokens", f"{t.new_tokens}"),
        ("from drafts", f"{100 * t.draft_share:.0f}%"),
    ]
    if events[-1].method == "rest":
        shares = ", ".join(f"{k} {100 * c[k] / n:.0f}%" for k in ("datastore", "context", "both") if c[k])
        items.append(("by source", shares or "none"))
    state = '<span class="live">generating…</span>' if running else ""
    cells = "".join(
        f'<div class="stat{" small" if len(v) > 12 else ""}"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
        for k, v in items
    )
    return f'<div class="stats">{cells}{state}</div>'


# ----------------------------------------------------------------------------------------------
# Token labels


def token_text(tokenizer: Tokenizer, token_id: int) -> str:
    return _decode(tokenizer, [int(token_id)])


def visible(text: str, limit: int = 10) -> str:
    """Make whitespace visible and cut long labels (for tree labels and inspector chips)."""
    shown = text.replace("\n", "↵").replace("\t", "⇥").replace(" ", "·")
    if not shown:
        shown = "∅"
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------------
# Draft-tree figure


@dataclass(frozen=True)
class TreeView:
    """The part of a step's trie that is drawn, with each node's role (testable without Plotly)."""

    nodes: np.ndarray  # trie indices shown, BFS order
    selected: np.ndarray  # bool per shown node: in the verified top-c draft
    accepted: np.ndarray  # bool per shown node: on the accepted path
    x: np.ndarray  # depth
    y: np.ndarray  # vertical position
    parent_pos: np.ndarray  # position in `nodes` of each node's parent, -1 = root
    total_nodes: int
    model_token: int | None  # the token the model emitted itself at the end of the accepted path
    model_parent_pos: int  # where that token hangs (-1 = root)
    model_in_trie_pos: int  # its shown position if the retrieved trie had it (but not drafted), else -1


def draft_to_trie(trie: Trie, draft: Trie) -> np.ndarray:
    """Trie index of every draft node (matched by token path, so any node order works)."""
    child: dict[tuple[int, int], int] = {(int(p), int(t)): i for i, (p, t) in enumerate(zip(trie.parents, trie.tokens))}
    out = np.full(len(draft), -1, dtype=np.int64)
    for i in range(len(draft)):
        p = int(draft.parents[i])
        tp = -1 if p < 0 else int(out[p])
        out[i] = child.get((tp, int(draft.tokens[i])), -1)
    return out


TRIE_MAX_NODES = 40  # nodes drawn per step (the accepted path and the draft first)
TRIE_MAX_EXTRA = 8  # of which at most this many retrieved-only nodes


def _drawn(event: StepEvent, max_nodes: int, max_extra: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which trie nodes the figure draws (accepted path, then drafted, then at most `max_extra`
    retrieved-only nodes, heaviest first, closed under ancestors), as boolean masks over the
    trie: (drawn, selected, accepted), and the trie index of each draft node (-1: not found)."""
    trie = event.trie
    assert trie is not None
    n = len(trie)
    selected = np.zeros(n, dtype=bool)
    accepted = np.zeros(n, dtype=bool)
    d2t = np.zeros(0, dtype=np.int64)
    if event.draft is not None and len(event.draft):
        d2t = draft_to_trie(trie, event.draft)
        ok = d2t >= 0
        selected[d2t[ok]] = True
        acc = [int(d2t[i]) for i in event.accepted if d2t[i] >= 0]
        accepted[acc] = True
    else:
        selected[[i for i in event.draft_idx if 0 <= i < n]] = True

    # Priority: accepted path, drafted nodes, the rest; heavier first; shallower on ties.
    order = np.lexsort((np.arange(n), trie.depths, -trie.weights, ~selected, ~accepted))
    keep = np.zeros(n, dtype=bool)
    count = 0
    extra = 0
    for i in order:
        if count >= max_nodes:
            break
        if not selected[i]:
            if extra >= max_extra:
                break  # the rest of the order is retrieved-only nodes too
            extra += 1
        j = int(i)
        while j >= 0 and not keep[j]:  # add the node with its missing ancestors
            keep[j] = True
            count += 1
            j = int(trie.parents[j])
    return keep, selected, accepted, d2t


def compact_event(event: StepEvent, max_nodes: int = TRIE_MAX_NODES, max_extra: int = TRIE_MAX_EXTRA) -> StepEvent:
    """The event with its trie cut to what the page can show of it: the nodes the figure draws
    plus the whole verified draft (at most c nodes), re-indexed; `draft_idx` follows and
    `trie_nodes` keeps the whole trie's size for the figure's title. A step's retrieved trie
    holds tens of thousands of nodes at K=5000, so a session keeps these instead; the figure and
    the inspector of the compact event equal those of the full one.

    Why the figure is unchanged: the kept nodes keep their relative (breadth-first) order, every
    drawn node's ancestors are drawn, and the nodes kept beyond the drawn ones are draft nodes,
    which the drawing order reaches only after it stopped; so `_drawn` picks the same nodes."""
    trie = event.trie
    if trie is None or len(trie) == 0 or event.trie_nodes is not None:
        return event
    keep, _, _, d2t = _drawn(event, max_nodes, max_extra)
    keep[d2t[d2t >= 0]] = True
    keep[[i for i in event.draft_idx if 0 <= i < len(trie)]] = True
    old = np.flatnonzero(keep)  # ascending: the breadth-first order is kept
    new_of = np.full(len(trie) + 1, -1, dtype=np.int64)  # old index -> new; slot -1 maps the root to -1
    new_of[old] = np.arange(len(old))
    small = Trie(
        tokens=trie.tokens[old].copy(),
        parents=new_of[trie.parents[old]],
        depths=trie.depths[old].copy(),
        weights=trie.weights[old].copy(),
        sources=trie.sources[old].copy(),
    )
    draft_idx = tuple(int(new_of[i]) for i in event.draft_idx if 0 <= i < len(trie))
    return replace(event, trie=small, draft_idx=draft_idx, trie_nodes=len(trie))


def tree_view(event: StepEvent, max_nodes: int = TRIE_MAX_NODES, max_extra: int = TRIE_MAX_EXTRA) -> TreeView | None:
    """Choose which trie nodes to draw (see `_drawn`) and lay them out: depth to the right,
    heaviest branch on top."""
    trie = event.trie
    if trie is None or len(trie) == 0:
        return None
    keep, selected, accepted, _ = _drawn(event, max_nodes, max_extra)
    nodes = np.flatnonzero(keep)  # BFS order, so parents come before children
    pos = {int(t): k for k, t in enumerate(nodes)}
    parent_pos = np.array([pos.get(int(trie.parents[t]), -1) for t in nodes], dtype=np.int64)

    # The model's own last token: where it hangs, and whether the trie had it (retrieved, not drafted).
    model_token = None
    model_parent_pos = -1
    model_in_trie_pos = -1
    if event.tokens and event.token_sources and event.token_sources[-1] == 0:
        model_token = int(event.tokens[-1])
        acc_nodes = [k for k, t in enumerate(nodes) if accepted[t]]
        model_parent_pos = max(acc_nodes, key=lambda k: trie.depths[nodes[k]]) if acc_nodes else -1
        for k in range(len(nodes)):
            if parent_pos[k] == model_parent_pos and int(trie.tokens[nodes[k]]) == model_token:
                model_in_trie_pos = k

    # Layout: leaves get consecutive rows in depth-first order (heavy children first); a parent
    # sits at the mean of its children's rows.
    children: list[list[int]] = [[] for _ in range(len(nodes) + 1)]  # last list = root's children
    for k, p in enumerate(parent_pos):
        children[p if p >= 0 else len(nodes)].append(k)
    for ch in children:
        ch.sort(key=lambda k: (-trie.weights[nodes[k]], int(trie.tokens[nodes[k]])))
    y = np.zeros(len(nodes))
    next_row = [0.0]

    def place(k: int) -> float:
        kids = children[k]
        if not kids:
            y[k] = next_row[0]
            next_row[0] += 1
        else:
            y[k] = float(np.mean([place(c) for c in kids]))
        return y[k]

    for k in children[len(nodes)]:
        place(k)
    return TreeView(
        nodes=nodes,
        selected=selected[nodes],
        accepted=accepted[nodes],
        x=trie.depths[nodes].astype(float),
        y=-y,
        parent_pos=parent_pos,
        total_nodes=event.trie_nodes if event.trie_nodes is not None else len(trie),
        model_token=model_token,
        model_parent_pos=model_parent_pos,
        model_in_trie_pos=model_in_trie_pos,
    )


TRIE_HEIGHT = 420  # fixed: Plotly's responsive mode in the page keeps the first figure's height


NO_TRIE_YET = "The draft tree of each step appears here."


def empty_figure(message: str = NO_TRIE_YET, height: int = TRIE_HEIGHT):
    """A blank figure with a centred message (before the first step, or a step with no draft)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
        annotations=[dict(text=message, showarrow=False, font=dict(size=14, color="#6b7280"), x=0.5, y=0.5, xref="paper", yref="paper")],
    )
    return fig


def trie_figure(event: StepEvent | None, tokenizer: Tokenizer, max_nodes: int = TRIE_MAX_NODES):
    """Plotly figure of one step's retrieved trie: drafted (top-c) nodes filled in their source's
    colour, the rest hollow grey, the accepted path outlined in green, marker size by weight."""
    import plotly.graph_objects as go

    if event is None:
        return empty_figure()
    view = tree_view(event, max_nodes=max_nodes)
    if view is None:
        why = "plain decoding: no draft" if event.method == "ar" else "no match in any source: a plain one-token step"
        return empty_figure(f"Step {event.step + 1}: {why}")
    drawing = _TrieDrawing(event, view, tokenizer)
    return go.Figure(data=drawing.traces(), layout=drawing.layout())


class _TrieDrawing:
    """The traces and layout of one step's trie figure (see `trie_figure`)."""

    def __init__(self, event: StepEvent, view: TreeView, tokenizer: Tokenizer) -> None:
        trie = event.trie
        assert trie is not None
        self.event, self.view, self.tokenizer = event, view, tokenizer
        self.tok = [int(trie.tokens[t]) for t in view.nodes]
        self.labels = [esc(visible(token_text(tokenizer, t), 7)) for t in self.tok]  # Plotly reads <b>, <br>... in text
        self.w = trie.weights[view.nodes]
        self.sizes = 7 + 12 * np.sqrt(self.w / float(max(self.w.max(), 1e-9)))
        self.srcs = trie.sources[view.nodes]
        self.names = dict(step_source_names(event))
        # Root sits at the mean row of its children.
        root_kids = np.flatnonzero(view.parent_pos < 0)
        self.root_y = float(np.mean(view.y[root_kids])) if len(root_kids) else 0.0

    def hover(self, k: int) -> str:
        view = self.view
        state = "accepted" if view.accepted[k] else ("drafted, rejected" if view.selected[k] else "retrieved, not drafted")
        return (
            f"<b>{esc(visible(token_text(self.tokenizer, self.tok[k]), 24))}</b> (id {self.tok[k]})<br>"
            f"weight {self.w[k]:.3g} · depth {int(view.x[k])}<br>source: {esc(source_label(int(self.srcs[k]), self.names))}<br>{state}"
        )

    def parent_xy(self, p: int) -> tuple[float, float]:
        return (0.0, self.root_y) if p < 0 else (float(self.view.x[p]), float(self.view.y[p]))

    def edge_trace(self, mask: np.ndarray, name: str, color: str, width: float, dash: str) -> dict:
        xs: list = []
        ys: list = []
        for k in np.flatnonzero(mask):
            px, py = self.parent_xy(int(self.view.parent_pos[k]))
            xs += [px, float(self.view.x[k]), None]
            ys += [py, float(self.view.y[k]), None]
        return dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(color=color, width=width, dash=dash), hoverinfo="skip", showlegend=False, name=name)

    def node_trace(self, mask: np.ndarray, name: str, **marker: Any) -> dict:
        idx = np.flatnonzero(mask)
        return dict(
            type="scatter",
            x=self.view.x[idx].tolist(),
            y=self.view.y[idx].tolist(),
            mode="markers+text",
            texttemplate="%{text}" if marker.pop("labels", True) else " ",
            text=[self.labels[k] for k in idx],
            textposition="top center",
            textfont=dict(size=10, color=marker.pop("textcolor", "#111827")),
            hovertext=[self.hover(k) for k in idx],
            hoverinfo="text",
            name=name,
            marker=dict(size=self.sizes[idx].tolist(), **marker),
            showlegend=bool(len(idx)),
        )

    def colors(self, idx_mask: np.ndarray) -> list[str]:
        return [origin(int(self.srcs[k])).color if self.srcs[k] else GREY for k in np.flatnonzero(idx_mask)]

    def traces(self) -> list[dict]:
        view = self.view
        not_sel = ~view.selected
        rejected = view.selected & ~view.accepted
        return [
            self.edge_trace(not_sel, "retrieved", "#d1d5db", 1, "dot"),
            self.edge_trace(rejected, "drafted", "#9ca3af", 1.2, "solid"),
            self.edge_trace(view.accepted, "accepted", ACCEPTED_COLOR, 3.5, "solid"),
            # Retrieved-only nodes keep their label for hover and tests, but draw none: less clutter.
            self.node_trace(not_sel, "retrieved only", color="rgba(255,255,255,0.9)", line=dict(color=GREY, width=1.2), textcolor="#9ca3af", labels=False),
            self.node_trace(rejected, "drafted, rejected", color=self.colors(rejected), opacity=0.45, line=dict(color="#6b7280", width=1), textcolor="#6b7280"),
            self.node_trace(view.accepted, "accepted", color=self.colors(view.accepted), line=dict(color=ACCEPTED_COLOR, width=3.5)),
            *self.model_token_traces(),
            dict(type="scatter", x=[0], y=[self.root_y], mode="markers", marker=dict(symbol="square", size=12, color="#374151"), name="last token", hovertext=["root: the last accepted token"], hoverinfo="text", showlegend=False),
        ]

    def model_token_traces(self) -> list[dict]:
        """The model's own token that closes the step: a star, dashed from its parent."""
        view = self.view
        if view.model_token is None:
            return []
        label = esc(visible(token_text(self.tokenizer, view.model_token), 7))
        px, py = self.parent_xy(view.model_parent_pos)
        if view.model_in_trie_pos >= 0:
            mx, my = float(view.x[view.model_in_trie_pos]), float(view.y[view.model_in_trie_pos])
        else:
            mx, my = px + 1, py - 0.5  # between rows, clear of the rejected draft child
        return [
            dict(type="scatter", x=[px, mx], y=[py, my], mode="lines", line=dict(color=MODEL_COLOR, width=1.5, dash="dash"), hoverinfo="skip", showlegend=False),
            dict(
                type="scatter",
                x=[mx],
                y=[my],
                mode="markers+text",
                text=[label],
                textposition="bottom center",
                textfont=dict(size=10, color=MODEL_COLOR),
                marker=dict(symbol="star", size=15, color=MODEL_COLOR),
                name="model's own token",
                hovertext=[f"<b>{esc(visible(token_text(self.tokenizer, view.model_token), 24))}</b> (id {view.model_token})<br>the model's own token ending this step"],
                hoverinfo="text",
            ),
        ]

    def layout(self) -> dict:
        event, view = self.event, self.view
        max_depth = float(view.x.max()) + (1 if view.model_token is not None else 0)
        shown = len(view.nodes)
        title = (
            f"Step {event.step + 1}: accepted {event.accepted_len} of {len(event.draft) if event.draft is not None else 0} drafted"
            f" (c={event.budget}) · {view.total_nodes} retrieved" + (f", {shown} shown" if shown < view.total_nodes else "")
        )
        return dict(
            title=dict(text=esc(title), font=dict(size=13), x=0.01, xanchor="left"),
            height=TRIE_HEIGHT,
            margin=dict(l=10, r=10, t=36, b=10),
            xaxis=dict(visible=False, range=[-0.5, max_depth + 0.6], fixedrange=True),
            yaxis=dict(visible=False, range=[float(view.y.min()) - 0.9, float(view.y.max()) + 1.0], fixedrange=True),
            modebar=dict(remove=["zoom", "pan", "select", "lasso", "zoomIn", "zoomOut", "autoScale", "resetScale"]),
            plot_bgcolor="rgba(0,0,0,0)",
            paper_bgcolor="rgba(0,0,0,0)",
            legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=11)),
            hoverlabel=dict(font=dict(size=12)),
            showlegend=True,
        )


# ----------------------------------------------------------------------------------------------
# Step inspector


def inspector_html(event: StepEvent | None, tokenizer: Tokenizer, n_steps: int | None = None, samples: int = 4) -> str:
    if event is None:
        return '<div class="inspector muted">Pick a step to see what was matched, drafted and accepted.</div>'
    dec = lambda ids: _decode(tokenizer, ids)  # noqa: E731
    own = [t for t, s in zip(event.tokens, event.token_sources) if not s]
    of = f" of {n_steps}" if n_steps else ""
    head = (
        f'<div class="ins-head"><b>Step {event.step + 1}{of}</b> · {"REST" if event.method == "rest" else "plain decoding"}'
        f" · budget c={event.budget} · drafted {len(event.draft) if event.draft is not None else 0}"
        f" · accepted {event.accepted_len}</div>"
    )
    rows = []
    for m in event.matches:
        if m.suffix_len:
            conts = "".join(f'<li><code>{esc(visible(dec(c), 60))}</code></li>' for c in m.sample[:samples])
            rows.append(
                f'<div class="ins-src"><span class="chip {source_class(m.source_bit)}">{esc(m.source)}</span> '
                f"matched the last <b>{m.suffix_len}</b> token{'s' if m.suffix_len != 1 else ''} "
                f'<code>{esc(visible(dec(m.suffix_tokens), 60))}</code> · <b>{m.occurrences:,}</b> occurrence{"s" if m.occurrences != 1 else ""}'
                + (f'<ul class="conts">{conts}</ul>' if conts else "")
                + "</div>"
            )
        else:
            rows.append(f'<div class="ins-src"><span class="chip">{esc(m.source)}</span> no match</div>')
    if not event.matches:
        rows.append('<div class="ins-src muted">no draft source (plain decoding)</div>')
    acc = "".join(f'<span class="tok d {source_class(s)} r1 p0">{esc(visible(dec([t]), 20))}</span>' for t, s in zip(event.tokens, event.token_sources) if s)
    own_html = "".join(f'<span class="tok m p0">{esc(visible(dec([t]), 20))}</span>' for t in own)
    t = event.timings
    timing = (
        f"retrieve {t.retrieve_ms:.2f} ms · draft {t.draft_ms:.2f} ms · forward {t.forward_ms:.1f} ms · "
        f"accept {t.accept_ms:.2f} ms · step {t.total_ms:.1f} ms"
    )
    return (
        '<div class="inspector">'
        + head
        + "".join(rows)
        + f'<div class="ins-acc">accepted: {acc or "<i>none</i>"} then the model\'s own: {own_html or "<i>none</i>"}</div>'
        + f'<div class="ins-time">{timing}</div>'
        + "</div>"
    )


# ----------------------------------------------------------------------------------------------
# Speed comparison


@dataclass(frozen=True)
class Comparison:
    rest: Totals
    ar: Totals
    identical: bool | None  # None when sampling (outputs may differ by design)

    @property
    def speedup(self) -> float:
        return self.rest.tokens_per_s / self.ar.tokens_per_s if self.ar.tokens_per_s > 0 else 0.0


def compare(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent], greedy: bool) -> Comparison:
    if not rest_events or not ar_events:
        raise ValueError("both runs need at least one step")
    identical = None
    if greedy:
        rest_ids = [t for e in rest_events for t in e.tokens]
        ar_ids = [t for e in ar_events for t in e.tokens]
        identical = rest_ids == ar_ids
    return Comparison(rest_events[-1].totals, ar_events[-1].totals, identical)


def comparison_rows(cmp: Comparison) -> list[tuple[str, str, str]]:
    r, a = cmp.rest, cmp.ar
    rows = [
        ("tokens / s", f"{r.tokens_per_s:.1f}", f"{a.tokens_per_s:.1f}"),
        ("mean token time", f"{r.mean_token_ms:.1f} ms", f"{a.mean_token_ms:.1f} ms"),
        ("tokens / steps (M)", f"{r.new_tokens} / {r.steps} = {r.mean_generated_length:.2f}", f"{a.new_tokens} / {a.steps} = {a.mean_generated_length:.2f}"),
        ("retrieval per token", f"{r.retrieval_ms_per_token:.2f} ms", "-"),
        ("tokens from drafts", f"{100 * r.draft_share:.0f}%", "-"),
        ("prefill", f"{r.prefill_ms:.0f} ms", f"{a.prefill_ms:.0f} ms"),
    ]
    if cmp.identical is not None:
        rows.append(("same output (greedy)", "yes" if cmp.identical else "NO", ""))
    return rows


def comparison_html(cmp: Comparison) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(r)}</td><td>{esc(a)}</td></tr>" for k, r, a in comparison_rows(cmp))
    badge = ""
    if cmp.identical is not None:
        badge = (
            '<span class="same ok">identical output ✓</span>' if cmp.identical else '<span class="same bad">outputs differ</span>'
        )
    return (
        '<div class="compare">'
        f'<div class="speedup">speedup <b id="speedup-value">{cmp.speedup:.2f}×</b> {badge}</div>'
        '<table class="cmp"><thead><tr><th></th><th>REST</th><th>plain</th></tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def speed_figure(rest_events: Sequence[StepEvent], ar_events: Sequence[StepEvent]):
    """Cumulative tokens over decode time for both runs (prefill excluded, as in the paper)."""
    import plotly.graph_objects as go

    def series(events: Sequence[StepEvent]) -> tuple[list[float], list[int]]:
        return [0.0] + [e.totals.elapsed_s for e in events], [0] + [e.totals.new_tokens for e in events]

    data = []
    for name, events, color in (("REST", rest_events, SOURCE_COLORS[SOURCE_DATASTORE]), ("plain", ar_events, "#6b7280")):
        if events:
            x, y = series(events)
            data.append(dict(type="scatter", x=x, y=y, mode="lines", name=name, line=dict(color=color, width=2.5, shape="hv")))
    layout = dict(
        height=260,
        margin=dict(l=50, r=10, t=10, b=40),
        xaxis=dict(title="decode time (s)", rangemode="tozero"),
        yaxis=dict(title="tokens", rangemode="tozero"),
        legend=dict(x=0.99, xanchor="right", y=0.02, yanchor="bottom", bgcolor="rgba(255,255,255,0.6)"),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    return go.Figure(data=data, layout=layout)

