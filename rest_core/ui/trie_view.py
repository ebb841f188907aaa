"""The draft-tree figure of one step: which trie nodes are drawn and where (`tree_view`), the
compact events a session keeps (`compact_event`) and the Plotly figure (`trie_figure`); its key
and marks live in `rest_core.ui.tree_key`.

`TreeView` is testable without Plotly; Plotly is imported only to build a figure.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rest_core.decode.events import StepEvent
from rest_core.drafting.trie import Trie
from rest_core.sources import SEVERAL, origin
from rest_core.ui.style import (
    ACCEPTED_COLOR,
    GREY,
    MODEL_COLOR,
    SEVERAL_NAME,
    Tokenizer,
    several,
    source_label,
    step_source_names,
    token_text,
    visible,
)
from rest_core.ui.tree_key import (
    END_MARK,
    MARK_OF_STATE,
    OFF_PATH,
    REJECTED,
    TREE_MARKS,
    UNCHECKED,
    budget_note,
    draft_states,
    end_token,
    key_name,
)
from rest_core.ui.tree_layout import layout_rows, model_token_place


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
    star_x: float = 0.0  # where the model's token is drawn: a row of its own, under its parent
    star_y: float = 0.0
    states: tuple[str, ...] = ()  # per shown node: its `DraftState` ("retrieved" when not drafted)
    rows: int = 0  # rows of the layout: each leaf, and the model's token, has one of its own


def draft_to_trie(trie: Trie, draft: Trie) -> np.ndarray:
    """Trie index of every draft node (matched by token path, so any node order works). A draft
    is at most a few dozen nodes and a trie tens of thousands (K=5000): each draft node is looked
    up among its parent's children with array compares, no table over the whole trie."""
    out = np.full(len(draft), -1, dtype=np.int64)
    for i in range(len(draft)):
        p = int(draft.parents[i])
        tp = -1 if p < 0 else int(out[p])
        if p >= 0 and tp < 0:
            continue  # its parent is not in the trie, so neither is it
        hit = np.flatnonzero((trie.parents == tp) & (trie.tokens == int(draft.tokens[i])))
        out[i] = int(hit[0]) if len(hit) else -1
    return out


TRIE_MAX_NODES = 40  # nodes drawn per step (the accepted path and the draft first)
TRIE_MAX_EXTRA = 8  # of which at most this many retrieved-only nodes
HEAVIEST_KEPT = 64  # a compact event also keeps the heaviest retrieved-only nodes (Why this c?, c <= 64)


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

    order = _draw_order(trie, selected, accepted, max_extra)
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


def _draw_order(trie: Trie, selected: np.ndarray, accepted: np.ndarray, max_extra: int) -> np.ndarray:
    """The order `_drawn` walks: accepted path, drafted nodes, then the rest; heavier first,
    shallower on ties, then by index. Only the first `max_extra` retrieved-only nodes can be
    drawn, so only those ranked at or above the max_extra-th heaviest weight are sorted (ties
    included): the same order's prefix, without sorting a K=5000 trie of 80,000 nodes."""
    rest = np.flatnonzero(~selected)
    if max_extra <= 0:
        rest = rest[:0]
    elif max_extra < len(rest):
        w = trie.weights[rest]
        cut = np.partition(w, len(w) - max_extra)[len(w) - max_extra]
        rest = rest[w >= cut]
    cand = np.concatenate([np.flatnonzero(selected), rest])
    key = np.lexsort((cand, trie.depths[cand], -trie.weights[cand], ~selected[cand], ~accepted[cand]))
    return cand[key]


def compact_event(event: StepEvent, max_extra: int = TRIE_MAX_EXTRA) -> StepEvent:
    """The event with its trie cut to what the page can show of it: the nodes the figure draws,
    the whole verified draft (at most c nodes) and the `HEAVIEST_KEPT` heaviest retrieved-only
    nodes (what a budget up to 64 would verify: Why this c? and the sources' shares read them),
    closed under ancestors and re-indexed; `draft_idx` follows and
    `trie_nodes` keeps the whole trie's size for the figure's title. A step's retrieved trie
    holds tens of thousands of nodes at K=5000, so a session keeps these instead; the figure and
    the inspector of the compact event equal those of the full one.

    Why the figure is unchanged: the kept nodes keep their relative (breadth-first) order, every
    drawn node's ancestors are drawn, and the kept nodes are the drawing order's first ones (the
    whole draft, then at least `max_extra` retrieved-only nodes, with their ancestors), which
    hold whatever prefix of that order the figure draws; so `_drawn` picks the same nodes."""
    trie = event.trie
    if trie is None or len(trie) == 0 or event.trie_nodes is not None:
        return event
    keep, _, _, d2t = _drawn(event, len(trie), max(max_extra, HEAVIEST_KEPT))
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


MAX_ROWS = 16  # rows the figure's height holds with readable labels; retrieved-only nodes give way first


def tree_view(event: StepEvent, max_nodes: int = TRIE_MAX_NODES, max_extra: int = TRIE_MAX_EXTRA) -> TreeView | None:
    """Choose which trie nodes to draw (see `_drawn`) and lay them out: depth to the right,
    heaviest branch on top, every leaf and the model's own token in a row of its own; fewer
    retrieved-only nodes where their rows would crowd the drafted ones (at most MAX_ROWS rows
    unless the draft alone needs more)."""
    trie = event.trie
    if trie is None or len(trie) == 0:
        return None
    view = _laid_out(event, max_nodes, max_extra)
    while view.rows > MAX_ROWS and max_extra > 0:
        max_extra -= 1
        view = _laid_out(event, max_nodes, max_extra)
    return view


def _laid_out(event: StepEvent, max_nodes: int, max_extra: int) -> TreeView:
    """The drawn nodes (`_drawn`) with their states, the model's own token and their rows."""
    trie = event.trie
    assert trie is not None
    keep, selected, accepted, d2t = _drawn(event, max_nodes, max_extra)
    nodes = np.flatnonzero(keep)  # BFS order, so parents come before children
    pos = {int(t): k for k, t in enumerate(nodes)}
    parent_pos = np.array([pos.get(int(trie.parents[t]), -1) for t in nodes], dtype=np.int64)
    state_of = {int(t): st for t, st in zip(d2t, draft_states(event)) if t >= 0}
    states = tuple(state_of.get(int(t), "retrieved") for t in nodes)
    model_token, model_parent_pos, model_in_trie_pos = model_token_place(event, trie, nodes, parent_pos, accepted)
    y, rows = layout_rows(trie, nodes, parent_pos, model_token, model_parent_pos)
    n = len(nodes)
    x = trie.depths[nodes].astype(float)
    star_x = (float(x[model_parent_pos]) if model_parent_pos >= 0 else 0.0) + 1
    return TreeView(
        nodes=nodes,
        selected=selected[nodes],
        accepted=accepted[nodes],
        x=x,
        y=-y[:n],
        parent_pos=parent_pos,
        total_nodes=event.trie_nodes if event.trie_nodes is not None else len(trie),
        model_token=model_token,
        model_parent_pos=model_parent_pos,
        model_in_trie_pos=model_in_trie_pos,
        star_x=star_x,
        star_y=-float(y[n]),
        states=states,
        rows=rows,
    )


TRIE_HEIGHT = (
    560  # fixed: Plotly's responsive mode in the page keeps the first figure's height; 16 rows and a phone's key fit
)


TITLE_TOP = 56  # px above the figure's title: the page's label badge sits there
TITLE_LINES = 3  # the title's lines: the step's count, its budget, the trie's size

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
        annotations=[
            dict(
                text=message,
                showarrow=False,
                font=dict(size=14, color="#6b7280"),
                x=0.5,
                y=0.5,
                xref="paper",
                yref="paper",
            )
        ],
    )
    return fig


def trie_figure(
    event: StepEvent | None, tokenizer: Tokenizer, max_nodes: int = TRIE_MAX_NODES, c_max: int | None = None
):
    """Plotly figure of one step's retrieved trie: drafted (top-c) nodes filled in their source's
    colour, the rest hollow grey, the accepted path outlined in green, marker size by weight.
    `c_max`: the most an auto budget may draft per step, for the title (unknown: not said)."""
    import plotly.graph_objects as go

    if event is None:
        return empty_figure()
    view = tree_view(event, max_nodes=max_nodes)
    if view is None:
        why = "plain decoding: no draft" if event.method == "ar" else "no match in any source: a plain one-token step"
        return empty_figure(f"Step {event.step + 1}: {why}")
    drawing = _TrieDrawing(event, view, tokenizer)
    return go.Figure(data=drawing.traces(), layout=drawing.layout(c_max))


def plot_esc(text: str) -> str:
    """Text for a Plotly label, title or tick, escaped once for that medium: Plotly reads its
    own small HTML (<b>, <br>) and only a few entities (&amp; &lt; &gt; and numeric ones), so
    `esc`'s &quot; and &#x27; would show as typed (a drafted `."` read `.&quot;`)."""
    return html.escape(text, quote=False)


PHONE_PLOT_PX = 300  # the plot's width on a 390 px phone: labels are cut to fit a column there


LABEL_POSITION = "top center"  # every label above its node: one side, clear of the edges that leave it to the right
LABEL_HALO = "-1px -1px 0 #fff, 1px -1px 0 #fff, -1px 1px 0 #fff, 1px 1px 0 #fff, 0 0 3px #fff"  # a line under a label never hides it


def label_chars(columns: float) -> int:
    """How many characters a node's label may have to fit on a phone (about 6.2 px a character
    at the labels' 10 px), centred above its node within its column."""
    room = PHONE_PLOT_PX / max(columns, 1.0) - 4
    return int(max(2, min(8, room // 6.2)))


def label_positions(x: Sequence[float]) -> list[str]:
    """Where each label sits: above its node, every one alike (labels that alternate above and
    below, or sit beside a node where its edges leave, read as a second code)."""
    return [LABEL_POSITION] * len(x)


def faded(colour: str, alpha: float = 0.35) -> str:
    """A "#rrggbb" colour as rgba with `alpha`: a faded fill under a solid outline or cross."""
    h = colour.lstrip("#")
    if len(h) != 6:
        return colour
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


class _TrieDrawing:
    """The traces and layout of one step's trie figure (see `trie_figure`)."""

    def __init__(self, event: StepEvent, view: TreeView, tokenizer: Tokenizer) -> None:
        trie = event.trie
        assert trie is not None
        self.event, self.view, self.tokenizer = event, view, tokenizer
        self.tok = [int(trie.tokens[t]) for t in view.nodes]
        self.columns = float(max(view.x.max(), view.star_x if view.model_token is not None else 0)) + 1.6
        self.chars = label_chars(self.columns)
        self.labels = [plot_esc(visible(token_text(tokenizer, t), self.chars)) for t in self.tok]
        end = end_token(event)
        if end is not None:  # the accepted end-of-text token prints as nothing: mark it
            deepest = [k for k in range(len(view.nodes)) if view.accepted[k]]
            if deepest:
                self.labels[max(deepest, key=lambda k: view.x[k])] = END_MARK
        self.w = trie.weights[view.nodes]
        # Marker size by weight, at most 60% of a column on a phone, so neighbours never touch.
        biggest = float(np.clip(0.6 * PHONE_PLOT_PX / self.columns, 8, 14))
        self.sizes = 8 + (biggest - 8) * np.sqrt(self.w / float(max(self.w.max(), 1e-9)))  # 8 px: a cross shows
        self.srcs = trie.sources[view.nodes]
        self.names = dict(step_source_names(event))
        self.has_kids = np.zeros(len(view.nodes), dtype=bool)
        self.has_kids[view.parent_pos[view.parent_pos >= 0]] = True
        if view.model_token is not None and view.model_parent_pos >= 0:
            self.has_kids[view.model_parent_pos] = True
        self.marks = np.array([MARK_OF_STATE.get(st, "retrieved only") for st in view.states])
        # Root sits at the mean row of its children (the model's token among them).
        root_kids = list(view.y[view.parent_pos < 0])
        if view.model_token is not None and view.model_parent_pos < 0:
            root_kids.append(view.star_y)
        self.root_y = float(np.mean(root_kids)) if root_kids else 0.0

    def mask(self, mark: str) -> np.ndarray:
        return self.marks == mark

    def hover(self, k: int) -> str:
        state = self.view.states[k]
        says = {name: meaning for _, name, _, meaning in TREE_MARKS}[MARK_OF_STATE.get(state, "retrieved only")]
        return (
            f"<b>{plot_esc(visible(token_text(self.tokenizer, self.tok[k]), 24))}</b> (id {self.tok[k]})<br>"
            f"weight {self.w[k]:.3g} · depth {int(self.view.x[k])}<br>source: {plot_esc(source_label(int(self.srcs[k]), self.names))}"
            f"<br>{plot_esc(says)}"
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
        return dict(
            type="scatter",
            x=xs,
            y=ys,
            mode="lines",
            line=dict(color=color, width=width, dash=dash),
            hoverinfo="skip",
            showlegend=False,
            name=name,
        )

    def node_trace(self, mask: np.ndarray, name: str, **marker: Any) -> dict:
        idx = np.flatnonzero(mask)
        return dict(
            type="scatter",
            x=self.view.x[idx].tolist(),
            y=self.view.y[idx].tolist(),
            mode="markers+text",
            texttemplate="%{text}" if marker.pop("labels", True) else " ",
            text=[self.labels[k] for k in idx],
            textposition=label_positions(self.view.x[idx].tolist()),
            textfont=dict(size=10, color=marker.pop("textcolor", "#111827"), shadow=LABEL_HALO),
            hovertext=[self.hover(k) for k in idx],
            hoverinfo="text",
            name=name,
            marker=dict(size=self.sizes[idx].tolist(), **marker),
            showlegend=False,  # the key (key_traces) lists every mark, drawn or not
        )

    def colors(self, idx_mask: np.ndarray) -> list[str]:
        return [origin(int(self.srcs[k])).color if self.srcs[k] else GREY for k in np.flatnonzero(idx_mask)]

    def traces(self) -> list[dict]:
        view = self.view
        not_sel = self.mask("retrieved only")
        rejected, unchecked, off = self.mask(REJECTED), self.mask(UNCHECKED), self.mask(OFF_PATH)
        star = self.model_token_traces()
        return [
            self.edge_trace(not_sel, "retrieved", "#d1d5db", 1, "dot"),
            self.edge_trace(rejected | unchecked | off, "drafted", "#9ca3af", 1.2, "solid"),
            self.edge_trace(view.accepted, "accepted", ACCEPTED_COLOR, 3.5, "solid"),
            *star[:1],  # the star's dashed line, under every label like the other edges
            # Retrieved-only nodes keep their label for hover and tests, but draw none: less
            # clutter, and the key says so.
            self.node_trace(
                not_sel,
                "retrieved only",
                color="rgba(255,255,255,0.9)",
                line=dict(color=GREY, width=1.2),
                textcolor="#6b7280",
                labels=False,
            ),
            # Rejected drafts: a faded fill under a bold dark cross (visible at 8 px), so they
            # never pass for accepted ones.
            self.node_trace(
                rejected,
                "drafted, rejected",
                color=[faded(c) for c in self.colors(rejected)],
                symbol="circle-x",
                line=dict(color="#111827", width=2),
                textcolor="#374151",
            ),
            # Drafted under a rejected token: never compared, so faded, not crossed.
            self.node_trace(
                off,
                OFF_PATH,
                color=self.colors(off),
                opacity=0.35,
                line=dict(color=GREY, width=1),
                textcolor="#4b5563",
            ),
            # Drafted where the walk never got because the answer ended first: a hollow ring
            # in its source's colour.
            self.node_trace(
                unchecked,
                UNCHECKED,
                color="white",
                line=dict(color=self.colors(unchecked), width=2.5),
                textcolor="#4b5563",
            ),
            self.node_trace(
                view.accepted, "accepted", color=self.colors(view.accepted), line=dict(color=ACCEPTED_COLOR, width=3.5)
            ),
            *star[1:],
            dict(
                type="scatter",
                x=[0],
                y=[self.root_y],
                mode="markers",
                marker=dict(symbol="square", size=12, color="#374151"),
                name="last token",
                hovertext=["root: the last token written; the step starts here"],
                hoverinfo="text",
                showlegend=False,
            ),
            *self.key_traces(),
        ]

    def model_token_traces(self) -> list[dict]:
        """The model's own token that closes the step: a star, dashed from its parent, in a row
        of its own (the layout gives it one, last under its parent), never on a circle (a star
        on a node reads as "the model chose this draft"); when the trie held that token
        (retrieved, outside the budget) its hover says so."""
        view = self.view
        if view.model_token is None:
            return []
        label = plot_esc(visible(token_text(self.tokenizer, view.model_token), self.chars))
        px, py = self.parent_xy(view.model_parent_pos)
        mx, my = view.star_x, view.star_y
        in_trie = view.model_in_trie_pos >= 0
        also = "<br>the trie had it too (a hollow circle), not drafted this step" if in_trie else ""
        return [
            dict(
                type="scatter",
                x=[px, mx],
                y=[py, my],
                mode="lines",
                line=dict(color=MODEL_COLOR, width=1.5, dash="dash"),
                hoverinfo="skip",
                showlegend=False,
            ),
            dict(
                type="scatter",
                x=[mx],
                y=[my],
                mode="markers+text",
                text=[label],
                textposition=LABEL_POSITION,
                textfont=dict(size=10, color=MODEL_COLOR, shadow=LABEL_HALO),
                marker=dict(symbol="star", size=14, color=MODEL_COLOR),
                name="model's own token",
                hovertext=[
                    f"<b>{plot_esc(visible(token_text(self.tokenizer, view.model_token), 24))}</b> (id {view.model_token})<br>the model's own token ending this step, not a drafted node{also}"
                ],
                hoverinfo="text",
                showlegend=False,
            ),
        ]

    def key_traces(self) -> list[dict]:
        """The figure's key: every mark of TREE_MARKS ("not checked" only where drawn: it shows
        only when an answer ends inside a draft), in neutral grey (a mark's fill is its source's
        colour), then the colour of each source whose nodes are drawn. Legend-only traces."""
        look = {
            "root": dict(symbol="square", size=11, color="#374151"),
            "accepted": dict(color="#e5e7eb", line=dict(color=ACCEPTED_COLOR, width=3)),
            "rejected": dict(symbol="circle-x", color=faded(GREY), line=dict(color="#111827", width=2)),
            OFF_PATH: dict(color=GREY, opacity=0.35, line=dict(color=GREY, width=1)),
            "not checked": dict(color="white", line=dict(color=GREY, width=2.5)),
            "retrieved only": dict(color="white", line=dict(color=GREY, width=1.2)),
            "model's own token": dict(symbol="star", size=14, color=MODEL_COLOR),
        }
        marks = [
            (key_name(name), look[name])
            for _, name, _, _ in TREE_MARKS
            if name != "not checked" or self.mask("not checked").any()
        ]
        drawn = {int(m) for m in self.srcs if m}  # the source masks of the drawn nodes
        colours = [
            (f"from {name}", origin(bit).color) for bit, name in self.names.items() if any(m & bit for m in drawn)
        ]
        if any(several(m) for m in drawn):  # a node more than one source reached
            colours.append((f"from {SEVERAL_NAME}", SEVERAL[1]))
        marks += [(name, dict(color=colour)) for name, colour in colours]
        return [
            dict(type="scatter", x=[None], y=[None], mode="markers", name=plot_esc(name), hoverinfo="skip",
                 marker={"size": 13, **marker}, showlegend=True)
            for name, marker in marks
        ]  # fmt: skip

    def layout(self, c_max: int | None = None) -> dict:
        event, view = self.event, self.view
        shown = len(view.nodes)
        drafted = len(event.draft) if event.draft is not None else 0
        # Three short lines, so that a phone shows all of it.
        title = (
            f"Step {event.step + 1}: accepted {event.accepted_len} of {drafted} drafted<br>"
            f"{budget_note(event, c_max)}<br>"
            f"trie of {view.total_nodes:,} nodes" + (f", {shown} drawn" if shown < view.total_nodes else "")
        )
        top, bottom = float(max(view.y.max(), view.star_y)), float(min(view.y.min(), view.star_y))
        return dict(
            # Below the page's label badge (Chat's "Draft tree of the step" covers up to the top
            # TITLE_TOP px at a laptop's and a phone's width, its border and padding included).
            title=dict(
                text=title, font=dict(size=13), x=0.01, xanchor="left", y=1 - TITLE_TOP / TRIE_HEIGHT, yanchor="top"
            ),
            height=TRIE_HEIGHT,
            margin=dict(l=10, r=10, t=TITLE_TOP + TITLE_LINES * 18 + 6, b=10),
            xaxis=dict(visible=False, range=[-0.4, self.columns - 0.4], fixedrange=True),
            yaxis=dict(visible=False, range=[bottom - 0.6, top + 0.6], fixedrange=True),
            modebar=dict(remove=["zoom", "pan", "select", "lasso", "zoomIn", "zoomOut", "autoScale", "resetScale"]),
            plot_bgcolor="rgba(0,0,0,0)",
            paper_bgcolor="rgba(0,0,0,0)",
            legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=11)),
            hoverlabel=dict(font=dict(size=12)),
            showlegend=True,
        )
