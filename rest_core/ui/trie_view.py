"""The draft-tree figure of one step (`trie_figure`): which trie nodes are drawn and where
(`tree_view`) and the compact events a session keeps (`compact_event`) live in
`rest_core.ui.tree_layout`, the key and marks in `rest_core.ui.tree_key`.

`TreeView` is testable without Plotly; Plotly is imported only to build a figure.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from rest_core.decode.events import StepEvent
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
    PROBE_SHORT,
    REJECTED,
    TREE_MARKS,
    UNCHECKED,
    budget_note,
    draft_states,
    end_token,
    key_name,
)
from rest_core.ui.tree_labels import CHAR_PX, PHONE_PLOT_PX, label_chars, label_room, label_sides
from rest_core.ui.tree_layout import TRIE_MAX_NODES, TreeView, draft_to_trie, tree_view
from rest_core.ui.tree_places import Scene, place_texts

# Fixed: Plotly's responsive mode in the page keeps the first figure's height. MAX_ROWS rows
# of 12 px labels, about 29 px apart, above a key of nine lines.
TRIE_HEIGHT = 620


TITLE_TOP = 56  # px above the figure's title: the page's label badge sits there
OWN_ALONE = "the model's token alone"  # a step that drafted nothing verifies only its own next token
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


LABEL_PX = 12  # node labels: readable on a laptop and a phone
LABEL_POSITION = "top center"  # a label above its node (tree_places shifts it left or right off an edge)
LABEL_HALO = (
    "-1px -1px 0 #fff, 1px -1px 0 #fff, -1px 1px 0 #fff, 1px 1px 0 #fff, "
    "-2px 0 0 #fff, 2px 0 0 #fff, 0 -2px 0 #fff, 0 2px 0 #fff, 0 0 4px #fff"
)  # a line under a label never hides it


ROW_PX = 9  # a drafted node's row number, written inside its node: it cannot be read as a neighbour's
ROW_NODE_PX = 15  # a drafted node is at least this big, so that two digits fit inside it
ROW_TRACE = "verify row"
ROW_KEY = "1, 2, … inside a node: its row in the verify table"  # the key's line for the numbers
ROW_PAD = 0.9  # rows of room past the top and bottom nodes: a label above or below them, never clipped


def key_text(name: str) -> str:
    """A key line as Plotly writes it: the numbers' line shows its numbers bold, as drawn."""
    if name == ROW_KEY:
        head, rest = name.split(" inside", 1)
        return f"<b>{plot_esc(head)}</b> inside{plot_esc(rest)}"
    return plot_esc(name)


def punctuation(text: str) -> str:
    """A label of one or two punctuation marks (",", ".", "),") in quotes, “,”, so that it reads as a token
    and not as a stray mark; spaces (·), newlines (↵) and named tokens stay as they are."""
    if text and len(text) <= 2 and not any(ch.isalnum() or ch in "·↵⇥⟨⟩∅…" for ch in text):
        return f"“{text}”"
    return text


def faded(colour: str, alpha: float = 0.35) -> str:
    """A "#rrggbb" colour as rgba with `alpha`: a faded fill under a solid outline or cross."""
    h = colour.lstrip("#")
    if len(h) != 6:
        return colour
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# Under a rejected token, not used: one look for the nodes and the key's sample.
OFF_LOOK: dict[str, Any] = dict(color=GREY, opacity=0.35, line=dict(color=GREY, width=1))
REJECTED_RING, RING_WIDTH = "#111827", 2  # a rejected node's dark ring, thinner than an accepted one's green
REJECTED_ALPHA = 0.85  # a rejected node's source colour, faded, still reads as that colour


class _TrieDrawing:
    """The traces and layout of one step's trie figure (see `trie_figure`)."""

    def __init__(self, event: StepEvent, view: TreeView, tokenizer: Tokenizer) -> None:
        trie = event.trie
        assert trie is not None
        self.event, self.view, self.tokenizer = event, view, tokenizer
        self.tok = [int(trie.tokens[t]) for t in view.nodes]
        self.columns = float(max(view.x.max(), view.star_x if view.model_token is not None else 0)) + 1.6
        full = [punctuation(visible(token_text(tokenizer, t), 99)) for t in self.tok]
        end = end_token(event)
        deepest = [k for k in range(len(view.nodes)) if view.accepted[k]]
        if end is not None and deepest:  # the accepted end-of-text token prints as nothing: mark it
            full[max(deepest, key=lambda k: view.x[k])] = END_MARK
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
        cap = self.label_caps(full)
        self.labels = [plot_esc(f if f == END_MARK else visible(f, cap.get(k, self.chars))) for k, f in enumerate(full)]
        self.w = trie.weights[view.nodes]
        # Marker size by weight, at most 60% of a column on a phone, so neighbours never touch.
        biggest = float(np.clip(0.6 * PHONE_PLOT_PX / self.columns, 8, 14))
        self.sizes = 8 + (biggest - 8) * np.sqrt(self.w / float(max(self.w.max(), 1e-9)))
        numbered = np.array(self.row_no) > 0
        self.sizes[numbered] = np.maximum(self.sizes[numbered], ROW_NODE_PX)
        self.srcs = trie.sources[view.nodes]
        self.names = dict(step_source_names(event))
        self.has_kids = np.zeros(len(view.nodes), dtype=bool)
        self.has_kids[view.parent_pos[view.parent_pos >= 0]] = True
        if view.model_token is not None and view.model_parent_pos >= 0:
            self.has_kids[view.model_parent_pos] = True
        self.marks = np.array([MARK_OF_STATE.get(st, "retrieved only") for st in view.states])
        self.texts = place_texts(self.scene())

    def label_caps(self, full: list[str]) -> dict[int, int]:
        """Each drawn label's characters (`said`), taking turns above and below along a crowded row
        (`label_sides`): at least two and "…" where cut, never none; the star's and the folds'
        after them (`star_chars`, `fold_chars`)."""
        view, tok = self.view, self.tokenizer
        said = [int(k) for k in np.flatnonzero(self.said)]
        star = punctuation(visible(token_text(tok, view.model_token), 99)) if view.model_token is not None else ""
        more = [f"+{len(f[3])} more" for f in view.folds]
        xs = [float(view.x[k]) for k in said] + [view.star_x] + [f[1] for f in view.folds]
        ys = [float(view.y[k]) for k in said] + [view.star_y if star else 1e9] + [f[2] for f in view.folds]
        wants = [len(full[k]) for k in said] + [len(star)] + [len(m) for m in more]
        least = [len(END_MARK) if full[k] == END_MARK else 3 for k in said] + [3] + [len(m) - 5 for m in more]
        down = [i for i, k in enumerate(said) if self.goes_down(k)]
        below = label_sides(xs, ys, self.columns, wants, len(said), down)[: len(said)]
        room = label_room(xs, ys, self.columns, wants, least, below)
        self.below = dict(zip(said, below))
        self.star_chars, self.fold_chars = room[len(said)], room[len(said) + 1 :]
        return dict(zip(said, room))

    def goes_down(self, k: int) -> bool:
        """Whether an edge runs below node k: to a child in a lower row, the star's dashed one, or
        its own from a lower parent (the root, under a deep chain's first node)."""
        view = self.view
        if self.parent_xy(int(view.parent_pos[k]))[1] < view.y[k]:
            return True
        kids = [c for c in range(len(view.nodes)) if view.parent_pos[c] == k]
        star = view.model_token is not None and view.model_parent_pos == k and view.star_y < view.y[k]
        return star or any(view.y[c] < view.y[k] for c in kids)

    def scene(self) -> Scene:
        """The tree as `tree_places` reads it: the nodes, then the root and the star; every
        edge; each drawn label's width."""
        view = self.view
        n = len(view.nodes)
        xy = [(float(view.x[k]), float(view.y[k])) for k in range(n)] + [(0.0, self.root_y)]
        sizes = [float(s) for s in self.sizes] + [12.0]
        edges = [(self.parent_xy(int(view.parent_pos[k])), xy[k]) for k in range(n)]
        edges += [(self.parent_xy(p), (fx, fy)) for p, fx, fy, _ in view.folds]
        fixed = [(fx, fy, len(f"+{len(held)}") * CHAR_PX) for _, fx, fy, held in view.folds]
        if view.model_token is not None:
            xy.append((view.star_x, view.star_y))
            sizes.append(14.0)
            edges.append((self.parent_xy(view.model_parent_pos), xy[-1]))
        shown = [len(html.unescape(lab)) * CHAR_PX if said else 0.0 for said, lab in zip(self.said, self.labels)]
        return Scene(
            xy=xy,
            sizes=sizes,
            edges=edges,
            label_px=shown + [0.0] + ([len(html.unescape(self.star_label())) * CHAR_PX] if len(xy) > n + 1 else []),
            columns=self.columns,
            y_range=self.y_range(),
            label_font=LABEL_PX,
            fixed=fixed,
            # the star's label may go under it, clear of its row's labels above (`label_caps`)
            label_sides=[("bottom" if self.below.get(k) else "top") for k in range(n)] + ["top", ""],
        )

    def y_range(self) -> tuple[float, float]:
        """The y axis's range: room above the top row's labels and below the bottom row's."""
        view = self.view
        ys = [view.star_y, *(f[2] for f in view.folds)]
        top, bottom = float(max(view.y.max(), *ys)), float(min(view.y.min(), *ys))
        return bottom - ROW_PAD, top + ROW_PAD

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
        idx = np.flatnonzero(mask)
        return dict(
            type="scatter",
            x=self.view.x[idx].tolist(),
            y=self.view.y[idx].tolist(),
            mode="markers+text",
            texttemplate="%{text}" if marker.pop("labels", True) else " ",
            text=[self.labels[k] for k in idx],
            textposition=[self.texts.label_places[k] for k in idx],
            textfont=dict(size=LABEL_PX, color=marker.pop("textcolor", "#111827"), shadow=LABEL_HALO),
            hovertext=[self.hover(k) for k in idx],
            hoverinfo="text",
            name=name,
            marker=dict(size=self.sizes[idx].tolist(), **marker),
            showlegend=False,  # the key (key_traces) lists every mark, drawn or not
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
                textcolor="#6b7280",
                labels=labels,
            )
            for labels in ((False, True) if named.any() else (False,))
        ]

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
            *self.retrieved_traces(not_sel),
            # Rejected drafts: their source's colour, faded, in a dark ring (an accepted one's is
            # green and thicker), so they never pass for accepted ones; the row number inside.
            self.node_trace(
                rejected,
                "drafted, rejected",
                color=[faded(c, REJECTED_ALPHA) for c in self.colors(rejected)],
                line=dict(color=REJECTED_RING, width=RING_WIDTH),
                textcolor="#374151",
            ),
            # Under a rejected token, not used: faded grey as the key draws it, not ringed dark. Where the answer ended
            # first: a hollow ring in its source's colour.
            self.node_trace(off, OFF_PATH, **OFF_LOOK, textcolor="#4b5563"),
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
            self.row_trace(),
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
            *self.key_traces(),
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

    def star_label(self) -> str:
        """The model's own token's label, cut to its room."""
        tok = visible(token_text(self.tokenizer, self.view.model_token), 99)
        return plot_esc(visible(punctuation(tok), self.star_chars))

    def model_token_traces(self) -> list[dict]:
        """The model's own token that closes the step: a star, dashed from its parent, in a row
        of its own (the layout gives it one, last under its parent), never on a circle (a star
        on a node reads as "the model chose this draft"); when the trie held that token
        (retrieved, outside the budget) its hover says so."""
        view = self.view
        if view.model_token is None:
            return []
        label = self.star_label()
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
                textfont=dict(size=LABEL_PX, color=MODEL_COLOR, shadow=LABEL_HALO),
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
        for (p, fx, fy, held), chars in zip(folds, self.fold_chars):
            px, py = self.parent_xy(p)
            xs += [px, fx, None]
            ys += [py, fy, None]
            more = f"+{len(held)} more"
            texts.append(more if len(more) <= chars else f"+{len(held)}")
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

    def key_traces(self) -> list[dict]:
        """The figure's key: every mark of TREE_MARKS ("not checked" only where drawn: it shows
        only when an answer ends inside a draft), in neutral grey (a mark's fill is its source's
        colour), then the colour of each source whose nodes are drawn. Legend-only traces."""
        look = {
            "root": dict(symbol="square", size=11, color="#374151"),
            "accepted": dict(color="#e5e7eb", line=dict(color=ACCEPTED_COLOR, width=3)),
            "rejected": dict(color=faded(GREY, REJECTED_ALPHA), line=dict(color=REJECTED_RING, width=RING_WIDTH)),
            OFF_PATH: OFF_LOOK,
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
        if any(self.row_no):  # the numbers inside the nodes, read without a hover (a phone has none)
            marks.append((ROW_KEY, dict(color="rgba(0,0,0,0)")))
        return [
            dict(type="scatter", x=[None], y=[None], mode="markers", name=key_text(name), hoverinfo="skip",
                 marker={"size": 13, **marker}, showlegend=True)
            for name, marker in marks
        ]  # fmt: skip

    def layout(self, c_max: int | None = None) -> dict:
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
        return dict(
            # Below the page's label badge (Chat's "Draft tree of the step" covers up to the top
            # TITLE_TOP px at a laptop's and a phone's width, its border and padding included).
            title=dict(
                text=title, font=dict(size=13), x=0.01, xanchor="left", y=1 - TITLE_TOP / TRIE_HEIGHT, yanchor="top"
            ),
            height=TRIE_HEIGHT,
            margin=dict(l=10, r=10, t=TITLE_TOP + TITLE_LINES * 18 + 6, b=10),
            xaxis=dict(visible=False, range=[-0.4, self.columns - 0.4], fixedrange=True),
            # room above the top row's labels and below the bottom row's
            yaxis=dict(visible=False, range=list(self.y_range()), fixedrange=True),
            modebar=dict(remove=["zoom", "pan", "select", "lasso", "zoomIn", "zoomOut", "autoScale", "resetScale"]),
            plot_bgcolor="rgba(0,0,0,0)",
            paper_bgcolor="rgba(0,0,0,0)",
            legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=11)),
            hoverlabel=dict(font=dict(size=12)),
            showlegend=True,
        )
