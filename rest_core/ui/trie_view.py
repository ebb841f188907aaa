"""The draft-tree figure of one step: which trie nodes are drawn and where (`tree_view`), the
compact events a session keeps (`compact_event`), the Plotly figure (`trie_figure`) and the key
beside it (`tree_legend_html`).

`TreeView` is testable without Plotly; Plotly is imported only to build a figure.
"""

from __future__ import annotations

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
    esc,
    source_label,
    step_source_names,
    token_text,
    visible,
)


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
        state = (
            "accepted" if view.accepted[k] else ("drafted, rejected" if view.selected[k] else "retrieved, not drafted")
        )
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
            textposition="top center",
            textfont=dict(size=10, color=marker.pop("textcolor", "#111827")),
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
        not_sel = ~view.selected
        rejected = view.selected & ~view.accepted
        return [
            self.edge_trace(not_sel, "retrieved", "#d1d5db", 1, "dot"),
            self.edge_trace(rejected, "drafted", "#9ca3af", 1.2, "solid"),
            self.edge_trace(view.accepted, "accepted", ACCEPTED_COLOR, 3.5, "solid"),
            # Retrieved-only nodes keep their label for hover and tests, but draw none: less clutter.
            self.node_trace(
                not_sel,
                "retrieved only",
                color="rgba(255,255,255,0.9)",
                line=dict(color=GREY, width=1.2),
                textcolor="#9ca3af",
                labels=False,
            ),
            # Rejected drafts: faded and crossed out, so they never pass for accepted ones.
            self.node_trace(
                rejected,
                "drafted, rejected",
                color=self.colors(rejected),
                symbol="circle-x",
                opacity=0.4,
                line=dict(color="#374151", width=1.5),
                textcolor="#6b7280",
            ),
            self.node_trace(
                view.accepted, "accepted", color=self.colors(view.accepted), line=dict(color=ACCEPTED_COLOR, width=3.5)
            ),
            *self.model_token_traces(),
            dict(
                type="scatter",
                x=[0],
                y=[self.root_y],
                mode="markers",
                marker=dict(symbol="square", size=12, color="#374151"),
                name="last token",
                hovertext=["root: the last accepted token"],
                hoverinfo="text",
                showlegend=False,
            ),
            *self.key_traces(),
        ]

    def model_token_traces(self) -> list[dict]:
        """The model's own token that closes the step: a star, dashed from its parent, drawn
        between the rows, never on a circle (a star on a node reads as "the model chose this
        draft"); when the trie held that token (retrieved, outside the budget) it sits just
        below that node and its hover says so."""
        view = self.view
        if view.model_token is None:
            return []
        label = esc(visible(token_text(self.tokenizer, view.model_token), 7))
        px, py = self.parent_xy(view.model_parent_pos)
        in_trie = view.model_in_trie_pos >= 0
        if in_trie:
            mx, my = float(view.x[view.model_in_trie_pos]) + 0.3, float(view.y[view.model_in_trie_pos]) - 0.45
        else:
            mx, my = px + 1, py - 0.5  # between rows, clear of the rejected draft child
        also = "<br>the trie had it too (the hollow circle beside it), outside the budget c" if in_trie else ""
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
                textposition="bottom center",
                textfont=dict(size=10, color=MODEL_COLOR),
                marker=dict(symbol="star", size=15, color=MODEL_COLOR),
                name="model's own token",
                hovertext=[
                    f"<b>{esc(visible(token_text(self.tokenizer, view.model_token), 24))}</b> (id {view.model_token})<br>the model's own token ending this step, not a drafted node{also}"
                ],
                hoverinfo="text",
                showlegend=False,
            ),
        ]

    def key_traces(self) -> list[dict]:
        """The figure's key: every mark TREE_LEGEND describes, whether this step drew it or not,
        in neutral grey (a mark's fill is its source's colour), then the colour of each source
        whose nodes are drawn. Legend-only traces: no points."""
        marks = [
            ("root: the last token", dict(symbol="square", size=11, color="#374151")),
            ("accepted: green ring", dict(color="#e5e7eb", line=dict(color=ACCEPTED_COLOR, width=3))),
            (
                "drafted, rejected: crossed",
                dict(symbol="circle-x", color=GREY, opacity=0.4, line=dict(color="#374151", width=1.5)),
            ),
            ("retrieved only: hollow", dict(color="white", line=dict(color=GREY, width=1.2))),
            ("model's token: ends the step", dict(symbol="star", size=14, color=MODEL_COLOR)),
        ]
        drawn = {int(m) for m in self.srcs if m}  # the source masks of the drawn nodes
        colours = [
            (f"from {name}", origin(bit).color) for bit, name in self.names.items() if any(m & bit for m in drawn)
        ]
        if any(m & (m - 1) for m in drawn):  # a node more than one source reached
            colours.append((f"from {SEVERAL_NAME}", SEVERAL[1]))
        marks += [(name, dict(color=colour)) for name, colour in colours]
        return [
            dict(type="scatter", x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                 marker={"size": 13, **marker}, showlegend=True)
            for name, marker in marks
        ]  # fmt: skip

    def layout(self) -> dict:
        event, view = self.event, self.view
        max_depth = float(view.x.max()) + (1 if view.model_token is not None else 0)
        shown = len(view.nodes)
        title = (
            f"Step {event.step + 1}: accepted {event.accepted_len} of {len(event.draft) if event.draft is not None else 0} drafted"
            f" (c={event.c}) · trie of {view.total_nodes:,} nodes"
            + (f", {shown} shown" if shown < view.total_nodes else "")
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


TREE_LEGEND = (
    "<b>Reading the draft tree.</b> ■ the <b>root</b>: the last token written, where this step starts. "
    "Each circle to its right is one token of the <b>trie</b> (the retrieved continuations merged, shared beginnings "
    "sharing a branch), deeper to the right, sized by <b>weight</b>: each source's weight split evenly over its "
    "continuations, summed over the continuations through the node (a node several sources reach adds each one's "
    "share). A circle's fill is the source that retrieved it, named in the figure's key (each datastore in a colour "
    "of its own, the same in every view; amber: the conversation (context); violet: several sources). "
    "● <b>filled</b> circle: one of the c <b>heaviest</b> nodes, drafted and verified. "
    "<b>Green</b> outline and thick green edge: accepted (the model agreed). "
    "⊗ <b>faded and crossed</b> circle: drafted, not accepted (the model chose differently here or earlier on its branch). "
    "○ <b>hollow</b> grey circle with a dotted edge: retrieved, not drafted (outside the budget c). "
    "★ on a <b>dashed</b> line, between the rows: the model's own token that ends the step; it is never a drafted "
    "node (a drafted node with that token would have been accepted). "
    "Labels: ∅ a token that prints as nothing (a special token), · a space, ↵ a newline."
)


def tree_legend_html() -> str:
    """What every mark of `trie_figure` means, for beside it."""
    return f'<div class="tree-legend">{TREE_LEGEND}</div>'
