"""The verification forward's tree attention mask as a heatmap: which cached context, ancestors
and itself each row verified in one step may see, with the position ids (`mask_view`, `mask_figure`).

Built by the same `rest_core.drafting.tree.layout` the engine uses; Plotly is imported only to
build the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rest_core.decode.events import StepEvent
from rest_core.drafting.tree import layout
from rest_core.ui.style import Tokenizer, token_label
from rest_core.ui.trie_view import plot_esc

N_CONTEXT_SHOWN = 4  # cached context columns drawn left of the tree in the mask figure
MAX_MASK_NODES = 64  # the mask figure draws at most this many draft nodes (c is at most 64 here)


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


def mask_view(
    event: StepEvent,
    context: Sequence[int],
    tokenizer: Tokenizer,
    n_context: int = N_CONTEXT_SHOWN,
    max_nodes: int = MAX_MASK_NODES,
) -> MaskView:
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
    rows = [f"root {token_label(tokenizer, root)}"] + [
        f"{i + 1}: {token_label(tokenizer, t)}" for i, t in enumerate(tokens)
    ]
    cols = [token_label(tokenizer, t) for t in cached] + rows
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


def mask_ticks(labels: Sequence[str], positions: Sequence[int]) -> list[str]:
    """One axis's tick labels, "label (position id)" on one line: a tree column reads as its row
    ("root ↵ (41)"), and a label stays under its own column when the axis turns them sideways (a
    second line, as "<br>" made it, lands beside the next column once turned). Unique as Plotly's
    categories must be: context columns differ by position, tree rows by their "i:" number."""
    return [f"{plot_esc(lab)} ({p})" for lab, p in zip(labels, positions)]


def column_ticks(view: MaskView) -> list[str]:
    """The columns' categories: a cached token as "tok (41)", cut short (unique, as Plotly's
    categories must be, and named in full by the hover), then the tree's columns by their row
    alone, "root", "1", "2", ... (the row labels and the verify table name the tokens)."""
    k = view.n_context
    context = mask_ticks([lab[:CONTEXT_CHARS] for lab in view.col_labels[:k]], view.col_positions[:k])
    return context + ["root"] + [str(i) for i in range(1, len(view.col_labels) - k)]


def shown_ticks(view: MaskView, categories: Sequence[str]) -> list[str]:
    """What each column's tick shows: at most SHOWN_CHARS characters, so that turned sideways on
    a 390 px phone (about 10 px a column at c = 16) no tick runs into the next: a cached token
    without its position id ("ass", "(im…"; the key says the cached positions), "…" for the
    earlier ones, the tree's "root", "1", "2", ..."""
    first = len(categories) - (len(view.col_labels) - view.n_context) - view.n_context
    out = list(categories)
    for i in range(first, first + view.n_context):
        lab = view.col_labels[i - first]  # cut with "…": "(im_" read as a whole token
        out[i] = plot_esc(lab if len(lab) <= SHOWN_CHARS else lab[: SHOWN_CHARS - 1] + "…") or "·"
    if first:
        out[0] = "…"
    return out


def context_name(view: MaskView) -> str:
    """The key's name for the cached context, with its positions ("cached context: positions 0–44")."""
    if not view.n_context:
        return MASK_NAMES[1]
    last = view.col_positions[view.n_context - 1]
    return f"{MASK_NAMES[1]}: positions 0–{last}" if last > 0 else f"{MASK_NAMES[1]}: position 0"


CONTEXT_CHARS = 4  # a cached token's characters in its column's category
SHOWN_CHARS = 4  # a column tick's characters at most ("root", "ista")
TICK_PX = 11  # the mask's tick labels: readable on a phone


MASK_COLORS = ("#f3f4f6", "#93c5fd", "#16a34a", "#065f46")  # hidden, cached context, root/ancestor, itself
MASK_NAMES = ("hidden", "cached context", "root / ancestor", "itself")  # the key: one swatch per value


def earlier_column(view: MaskView) -> str | None:
    """The tick of the "…" column standing for the cached positions before those drawn, "… (0–40)"
    (None when the drawn context starts at position 0)."""
    if not view.n_context or view.col_positions[0] <= 0:
        return None
    last = view.col_positions[0] - 1
    return f"… (0–{last})" if last > 0 else "… (0)"


def mask_figure(view: MaskView):
    """Plotly heatmap of a MaskView: one row per token verified, one column per token it could
    see, each labelled with its position id in brackets (`mask_ticks`), a "…" column first for
    the cached positions not drawn; the last cached context column is followed by a dotted line.
    The key is a legend of four swatches, one per value (a colour bar read as a scale)."""
    import plotly.graph_objects as go

    q, cols = view.z.shape
    scale = []
    for i, color in enumerate(MASK_COLORS):  # discrete colours for the values 0..3
        scale += [[i / 4, color], [(i + 1) / 4, color]]
    rows_cat = mask_ticks(view.row_labels, view.row_positions)
    cols_cat = column_ticks(view)
    z = view.z
    earlier = earlier_column(view)
    if earlier is not None:  # every row sees the earlier cache too
        cols_cat = [earlier] + cols_cat
        z = np.concatenate([np.ones((q, 1), z.dtype), z], axis=1)
        cols += 1
    # No per-cell hover text: with c = 64 that is ~4,500 strings and most of the figure's cost;
    # the key names the four values instead.
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols_cat,
            y=rows_cat,
            zmin=0,
            zmax=4,
            colorscale=scale,
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="row %{y}<br>column %{x}<extra></extra>",
        )
    )
    for trace in mask_key_traces(context_name(view)):
        fig.add_trace(trace)
    size = max(240, min(780, 80 + 18 * q))
    fig.update_layout(
        height=size,
        margin=dict(l=10, r=10, t=10, b=40),
        xaxis=mask_axis(
            side="top",
            tickangle=0 if cols <= 12 else -90,
            tickmode="array",
            tickvals=cols_cat,
            ticktext=shown_ticks(view, cols_cat),
        ),
        yaxis=mask_axis(autorange="reversed"),
        legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=11)),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    if view.n_context:
        fig.add_vline(x=view.n_context - 0.5 + (earlier is not None), line=dict(color="#374151", width=1.5, dash="dot"))
    return fig


def mask_axis(**more) -> dict:
    """A mask axis: categories, every one ticked (none skipped), at a readable size, never clipped."""
    return dict(type="category", tickfont=dict(size=TICK_PX), dtick=1, automargin=True, fixedrange=True, **more)


def mask_key_traces(context: str = MASK_NAMES[1]) -> list:
    """The mask figure's key: one legend-only square swatch per value (MASK_NAMES), the cached
    context's named with its positions (`context`)."""
    import plotly.graph_objects as go

    return [
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            marker=dict(symbol="square", size=13, color=colour, line=dict(color="#9ca3af", width=1)),
            hoverinfo="skip",
            showlegend=True,
        )
        for name, colour in zip((MASK_NAMES[0], context, *MASK_NAMES[2:]), MASK_COLORS)
    ]
