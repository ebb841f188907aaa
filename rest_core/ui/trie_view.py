"""The draft-tree figure of one step (`trie_figure`): which trie nodes are drawn and where
(`tree_view`) and the compact events a session keeps (`compact_event`) live in
`rest_core.ui.tree_layout`, the marks in `rest_core.ui.tree_key`, the figure's short key in
`rest_core.ui.tree_legend` and its two sets of labels (a phone's, a laptop's) in `rest_core.ui.tree_text`.
The figure is as tall as the rows it draws (`_TrieDrawing.height`).

`TreeView` is testable without Plotly; Plotly is imported only to build a figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rest_core.decode.events import StepEvent
from rest_core.sources import origin
from rest_core.ui.style import (
    ACCEPTED_COLOR,
    GREY,
    MODEL_COLOR,
    Tokenizer,
    plot_esc,
    source_label,
    step_source_names,
    token_text,
    visible,
)
from rest_core.ui.tree_key import (
    END_MARK,
    MARK_OF_STATE,
    OFF_PATH,
    PROBE_SHORT,
    REJECTED,
    TREE_MARKS,
    UNCHECKED,
    budget_note,
    draft_states,
    end_token,
)
from rest_core.ui.tree_labels import CHAR_PX, PHONE, PHONE_PLOT_PX, WIDE, label_chars, label_room  # noqa: F401
from rest_core.ui.tree_layout import TRIE_MAX_NODES, TreeView, draft_to_trie, tree_view
from rest_core.ui.tree_legend import (
    KEY_LAYOUT,
    OFF_LOOK,
    REJECTED_ALPHA,
    REJECTED_RING,
    RING_WIDTH,
    faded,
    key_entries,
    key_px,
    key_traces,
)
from rest_core.ui.tree_text import (
    LABEL_HALO,
    LABEL_POSITION,
    WIDE_LABELS,  # noqa: F401 - the wide labels' trace, by name
    any_below,
    label_set,
    placed,
    punctuation,
    wide_trace,
)

TRIE_HEIGHT = 260  # a message-only figure's height; a tree's follows its rows (`_TrieDrawing.height`)
ROW_STEP_PX = 40  # px from one row of the tree to the next on a phone: a node and a 14 px label above it, with air
ROW_STEP_BELOW_PX = 52  # where labels also sit under a row: one under a row and one over the next fit
MIN_SPAN = 4.0  # rows the y axis spans at least: a tree of one or two rows is not squeezed into a strip


TITLE_TOP = 56  # px above the figure's title: the page's label badge sits there
OWN_ALONE = "the model's token alone"  # a step that drafted nothing verifies only its own next token
TITLE_LINES = 3  # the title's lines: the step's count, its budget, the trie's size
TOP_PX = TITLE_TOP + TITLE_LINES * 18 + 6  # the figure's top margin: the badge's band and the title
BOTTOM_PX = 10  # the figure's bottom margin, under the key

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


LABEL_PX = PHONE.font  # the nodes' own labels, a phone's (a wide plot's are WIDE.font, `tree_text`)


ROW_PX = 9  # a drafted node's row number, written inside its node: it cannot be read as a neighbour's
ROW_NODE_PX = 15  # a drafted node is at least this big, so that two digits fit inside it
ROW_TRACE = "verify row"
ROW_PAD = 0.9  # rows of room past the top and bottom nodes: a label above or below them, never clipped


# A label's colour by its node's mark (a retrieved-only node's is drawn only in a step that drafted nothing).
TEXT_COLOUR = {"accepted": "#111827", REJECTED: "#374151", OFF_PATH: "#4b5563", UNCHECKED: "#4b5563"}
TEXT_COLOUR["retrieved only"] = "#6b7280"


class _TrieDrawing:
    """The traces and layout of one step's trie figure (see `trie_figure`)."""

    def __init__(self, event: StepEvent, view: TreeView, tokenizer: Tokenizer) -> None:
        trie = event.trie
        assert trie is not None
        self.event, self.view, self.tokenizer = event, view, tokenizer
        self.tok = [int(trie.tokens[t]) for t in view.nodes]
        self.columns = float(max(view.x.max(), view.star_x if view.model_token is not None else 0)) + 1.6
        # a drafted node's row in the verify table and the mask, drawn beside it (`row_trace`)
        self.row_no = [view.draft_rows[k] if k < len(view.draft_rows) else 0 for k in range(len(view.nodes))]
        self.chars = label_chars(self.columns)  # a retrieved-only node's label, for hover and tests
        # Root sits at the mean row of its children (the model's token among them).
        root_kids = list(view.y[view.parent_pos < 0])
        if view.model_token is not None and view.model_parent_pos < 0:
            root_kids.append(view.star_y)
        root_kids += [fy for p, _, fy, _ in view.folds if p < 0]
        self.root_y = float(np.mean(root_kids)) if root_kids else 0.0
        # the nodes whose label is drawn: every drafted one; of the retrieved-only ones none, but in
        # a step that drafted nothing its first-level ones (the Retrieve panel names the heaviest)
        drafted = np.array([st != "retrieved" for st in view.states], dtype=bool)
        self.said = drafted | (not drafted.any() and view.x == 1)
        self.w = trie.weights[view.nodes]
        # Marker size by weight, at most 60% of a column on a phone, so neighbours never touch.
        biggest = float(np.clip(0.6 * PHONE_PLOT_PX / self.columns, 8, 14))
        self.sizes = 8 + (biggest - 8) * np.sqrt(self.w / float(max(self.w.max(), 1e-9)))
        numbered = np.array(self.row_no) > 0
        self.sizes[numbered] = np.maximum(self.sizes[numbered], ROW_NODE_PX)
        self.srcs = trie.sources[view.nodes]
        self.names = dict(step_source_names(event))
        self.marks = np.array([MARK_OF_STATE.get(st, "retrieved only") for st in view.states])
        self.star_colour = MODEL_COLOR
        self.key = key_entries(self)
        full = self.full_labels()
        self.below = any_below(self, full, PHONE) or any_below(
            self, full, WIDE
        )  # labels under a row: rows further apart
        lo, hi = self.y_range()
        row_px = self.plot_px() / (hi - lo)
        phone, wide = label_set(self, full, PHONE, row_px), label_set(self, full, WIDE, row_px)
        self.phone, self.wide = placed(self, phone, self.plot_px()), placed(self, wide, self.plot_px())
        self.labels, self.texts = self.phone.labels, self.phone.texts  # the nodes' own traces: the phone's

    def full_labels(self) -> list[str]:
        """Each drawn node's whole label: its token with blanks made visible, a lone mark quoted,
        the accepted end-of-text token (which prints as nothing) as END_MARK."""
        view = self.view
        full = [punctuation(visible(token_text(self.tokenizer, t), 99)) for t in self.tok]
        deepest = [k for k in range(len(view.nodes)) if view.accepted[k]]
        if end_token(self.event) is not None and deepest:
            full[max(deepest, key=lambda k: view.x[k])] = END_MARK
        return full

    def y_range(self) -> tuple[float, float]:
        """The y axis's range: room above the top row's labels and below the bottom row's, and at
        least MIN_SPAN rows, the tree in its middle."""
        view = self.view
        ys = [view.star_y, *(f[2] for f in view.folds)]
        top, bottom = float(max(view.y.max(), *ys)) + ROW_PAD, float(min(view.y.min(), *ys)) - ROW_PAD
        more = max(0.0, MIN_SPAN - (top - bottom)) / 2
        return bottom - more, top + more

    def plot_px(self) -> float:
        """The plot's height on a phone: ROW_STEP_PX a row, or ROW_STEP_BELOW_PX where labels sit
        under a row too, over the next row's (a wider figure's key takes fewer rows and gives its
        plot the rest)."""
        lo, hi = self.y_range()
        return (ROW_STEP_BELOW_PX if self.below else ROW_STEP_PX) * (hi - lo)

    def height(self) -> int:
        """The figure's height: the title's band, the plot's rows and the key's rows on a phone."""
        return int(round(TOP_PX + self.plot_px() + key_px(self.key) + BOTTOM_PX))

    def mask(self, mark: str) -> np.ndarray:
        return self.marks == mark

    def hover(self, k: int) -> str:
        state = self.view.states[k]
        says = {name: meaning for _, name, _, meaning in TREE_MARKS}[MARK_OF_STATE.get(state, "retrieved only")]
        row = f"row {self.row_no[k]} of the verify table: " if self.row_no[k] else ""
        return (
            f"{row}<b>{plot_esc(visible(token_text(self.tokenizer, self.tok[k]), 24))}</b> (id {self.tok[k]})<br>"
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
        """The nodes of one mark, with the phone's labels (`tree_text`: a wide plot hides them)."""
        idx = np.flatnonzero(mask)
        labels = marker.pop("labels", True)
        return dict(
            type="scatter",
            x=self.view.x[idx].tolist(),
            y=self.view.y[idx].tolist(),
            mode="markers+text",
            texttemplate="%{text}" if labels else " ",
            text=[self.labels[k] for k in idx],
            textposition=[self.texts.label_places[k] for k in idx],
            textfont=dict(size=LABEL_PX, color=marker.pop("textcolor", TEXT_COLOUR["accepted"]), shadow=LABEL_HALO),
            hovertext=[self.hover(k) for k in idx],
            hoverinfo="text",
            name=name,
            marker=dict(size=self.sizes[idx].tolist(), **marker),
            showlegend=False,  # the key (key_traces) names each mark drawn
        )

    def colors(self, idx_mask: np.ndarray) -> list[str]:
        return [origin(int(self.srcs[k])).color if self.srcs[k] else GREY for k in np.flatnonzero(idx_mask)]

    def retrieved_traces(self, not_sel: np.ndarray) -> list[dict]:
        """Retrieved-only nodes keep their label for hover and tests, but draw none (but those
        `said`: the first-level ones of a step that drafted nothing)."""
        named = not_sel & self.said
        return [
            self.node_trace(
                not_sel & (self.said if labels else ~self.said),
                "retrieved only",
                color="rgba(255,255,255,0.9)",
                line=dict(color=GREY, width=1.2),
                textcolor=TEXT_COLOUR["retrieved only"],
                labels=labels,
            )
            for labels in ((False, True) if named.any() else (False,))
        ]

    def traces(self) -> list[dict]:
        """Edges under nodes under labels: the nodes' traces carry the phone's labels; then the
        root and the key's legend-only traces; last the row numbers and the wide plot's labels."""
        view = self.view
        not_sel = self.mask("retrieved only")
        star = self.model_token_traces()
        return [
            self.edge_trace(not_sel, "retrieved", "#d1d5db", 1, "dot"),
            self.edge_trace(
                self.mask(REJECTED) | self.mask(UNCHECKED) | self.mask(OFF_PATH), "drafted", "#9ca3af", 1.2, "solid"
            ),
            self.edge_trace(view.accepted, "accepted", ACCEPTED_COLOR, 3.5, "solid"),
            *star[:1],  # the star's dashed line, under every label like the other edges
            *self.retrieved_traces(not_sel),
            *self.node_traces(),
            *star[1:],
            *self.fold_traces(),
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
            *key_traces(self.key),
            # last, in this order: the page's CSS hides every other trace's text on a wide plot,
            # and the last trace on a narrow one (`tree_text`)
            self.row_trace(),
            wide_trace(self, [TEXT_COLOUR[m] for m in self.marks]),
        ]

    def node_traces(self) -> list[dict]:
        """The drafted nodes, one trace per mark. Rejected drafts: their source's colour, faded, in
        a dark ring (an accepted one's is green and thicker), so they never pass for accepted ones.
        Under a rejected token, not used: faded grey as the key draws it, not ringed dark. Where
        the answer ended first: a hollow ring in its source's colour."""
        rejected, unchecked, off, accepted = (
            self.mask(REJECTED),
            self.mask(UNCHECKED),
            self.mask(OFF_PATH),
            self.view.accepted,
        )
        return [
            self.node_trace(
                rejected,
                "drafted, rejected",
                color=[faded(c, REJECTED_ALPHA) for c in self.colors(rejected)],
                line=dict(color=REJECTED_RING, width=RING_WIDTH),
                textcolor=TEXT_COLOUR[REJECTED],
            ),
            self.node_trace(off, OFF_PATH, **OFF_LOOK, textcolor=TEXT_COLOUR[OFF_PATH]),
            self.node_trace(
                unchecked,
                UNCHECKED,
                color="white",
                line=dict(color=self.colors(unchecked), width=2.5),
                textcolor=TEXT_COLOUR[UNCHECKED],
            ),
            self.node_trace(
                accepted, "accepted", color=self.colors(accepted), line=dict(color=ACCEPTED_COLOR, width=3.5)
            ),
        ]

    def row_trace(self) -> dict:
        """Each drafted node's row in the verify table and the mask ("3"), small and bold inside
        its node (white on a source's colour, dark on a pale fill): never dropped where the
        labels crowd, and never nearer another node than its own."""
        idx = [k for k, r in enumerate(self.row_no) if r]
        pale = (self.mask(OFF_PATH) | self.mask(UNCHECKED)).tolist()
        return dict(
            type="scatter",
            x=[float(self.view.x[k]) for k in idx],
            y=[float(self.view.y[k]) for k in idx],
            mode="text",
            text=[f"<b>{self.row_no[k]}</b>" for k in idx],
            textposition="middle center",
            textfont=dict(size=ROW_PX, color=["#111827" if pale[k] else "#ffffff" for k in idx]),
            hoverinfo="skip",
            name=ROW_TRACE,
            showlegend=False,
        )

    def model_token_traces(self) -> list[dict]:
        """The model's own token that closes the step: a star, dashed from its parent, in a row
        of its own (the layout gives it one, last under its parent), never on a circle (a star
        on a node reads as "the model chose this draft"); when the trie held that token
        (retrieved, outside the budget) its hover says so."""
        view = self.view
        if view.model_token is None:
            return []
        label = self.phone.star
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
                textposition=self.texts.label_places[len(view.nodes) + 1],
                textfont=dict(size=LABEL_PX, color=self.star_colour, shadow=LABEL_HALO),
                marker=dict(symbol="star", size=14, color=MODEL_COLOR),
                name="model's own token",
                hovertext=[
                    f"<b>{plot_esc(visible(token_text(self.tokenizer, view.model_token), 24))}</b> (id {view.model_token})<br>the model's own token ending this step, not a drafted node{also}"
                ],
                hoverinfo="text",
                showlegend=False,
            ),
        ]

    def fold_traces(self) -> list[dict]:
        """Each crowded level's lighter siblings as one small grey dot labelled "+N more", on a dotted
        line; its hover lists what it holds, with each drafted node's state."""
        folds = self.view.folds
        if not folds:
            return []
        trie = self.event.trie
        assert trie is not None
        d2t = draft_to_trie(trie, self.event.draft) if self.event.draft is not None else []
        state_of = dict(zip((int(t) for t in d2t), draft_states(self.event)))
        row_of = {int(t): f"row {i + 1}, " for i, t in enumerate(d2t) if t >= 0}
        xs: list = []
        ys: list = []
        texts, hovers = [], []
        for (p, fx, fy, held), text in zip(folds, self.phone.folds):
            px, py = self.parent_xy(p)
            xs += [px, fx, None]
            ys += [py, fy, None]
            more = f"+{len(held)} more"
            texts.append(text)
            lines = [
                f"{row_of.get(t, '')}{plot_esc(visible(token_text(self.tokenizer, int(trie.tokens[t])), 16))}: "
                f"{state_of.get(t, 'retrieved only')}"
                for t in held[:12]
            ]
            hovers.append(
                f"<b>{more}</b>, folded: lighter siblings<br>"
                + "<br>".join(lines)
                + ("<br>…" if len(held) > 12 else "")
            )
        edge = dict(
            type="scatter",
            x=xs,
            y=ys,
            mode="lines",
            line=dict(color="#9ca3af", width=1, dash="dot"),
            hoverinfo="skip",
            showlegend=False,
        )
        node = dict(
            type="scatter",
            x=[f[1] for f in folds],
            y=[f[2] for f in folds],
            mode="markers+text",
            text=texts,
            textposition=LABEL_POSITION,
            textfont=dict(size=LABEL_PX, color="#4b5563", shadow=LABEL_HALO),
            marker=dict(size=5, color="#6b7280"),
            name="folded",
            hovertext=hovers,
            hoverinfo="text",
            showlegend=False,
        )
        return [edge, node]  # fmt: skip

    def layout(self, c_max: int | None = None) -> dict:
        """The title (three short lines, under the page's badge), the axes and the key; as tall
        as the rows drawn (`height`)."""
        event, view = self.event, self.view
        shown = len(view.nodes)
        drafted = len(event.draft) if event.draft is not None else 0
        # Three short lines, so that a phone shows all of it.
        title = (
            f"Step {event.step + 1}: "
            + (
                f"accepted {event.accepted_len} of {drafted} drafted"
                if drafted
                else f"drafted nothing ({PROBE_SHORT if event.probe else OWN_ALONE})"
            )
            + "<br>"
            f"{budget_note(event, c_max)}<br>"
            f"trie of {view.total_nodes:,} nodes" + (f", {shown} drawn" if shown < view.total_nodes else "")
        )
        folded = sum(len(f[3]) for f in view.folds)
        title += f", {folded} folded" if folded else ""
        height = self.height()
        return dict(
            # Below the page's label badge (Chat's "Draft tree of the step" covers up to the top
            # TITLE_TOP px at a laptop's and a phone's width, its border and padding included).
            title=dict(text=title, font=dict(size=13), x=0.01, xanchor="left", y=1 - TITLE_TOP / height, yanchor="top"),
            height=height,
            margin=dict(l=10, r=10, t=TOP_PX, b=BOTTOM_PX),
            xaxis=dict(visible=False, range=[-0.4, self.columns - 0.4], fixedrange=True),
            # room above the top row's labels and below the bottom row's
            yaxis=dict(visible=False, range=list(self.y_range()), fixedrange=True),
            modebar=dict(remove=["zoom", "pan", "select", "lasso", "zoomIn", "zoomOut", "autoScale", "resetScale"]),
            plot_bgcolor="rgba(0,0,0,0)",
            paper_bgcolor="rgba(0,0,0,0)",
            legend=KEY_LAYOUT,
            hoverlabel=dict(font=dict(size=12)),
            showlegend=True,
        )
