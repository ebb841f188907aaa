"""The draft tree's labels, written twice (`label_set`): cut for a phone's plot and, larger and
longer, for a laptop's (`tree_labels.PHONE`, `WIDE`), each set placed clear of the tree at the
plot widths it shows at (`tree_places`). The nodes' own traces carry the phone's labels; the
figure's last trace (`wide_trace`) carries the wide ones, after the row numbers' trace. The page's
CSS (assets/app.css) shows one set or the other by the figure's width: on a narrow one it hides
the last trace; on a wide one the text of every trace but the last two. (Plotly draws a figure's
traces in order, one group each; Gradio drops the traces' uids, so the order is what it can key on.)"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rest_core.ui.style import plot_esc, token_text, visible
from rest_core.ui.tree_key import END_MARK
from rest_core.ui.tree_labels import Fit, label_chars, label_room, label_sides
from rest_core.ui.tree_places import Scene, Texts, place_texts

# `d` below: the figure being drawn (`rest_core.ui.trie_view._TrieDrawing`, which imports this module)

WIDE_LABELS = "labels on a wide plot"  # that trace's name
LABEL_POSITION = "top center"  # a fold's label, above its dot
LABEL_HALO = (
    "-1px -1px 0 #fff, 1px -1px 0 #fff, -1px 1px 0 #fff, 1px 1px 0 #fff, "
    "-2px 0 0 #fff, 2px 0 0 #fff, 0 -2px 0 #fff, 0 2px 0 #fff, 0 0 4px #fff"
)  # a line under a label never hides it


def punctuation(text: str) -> str:
    """A label of one or two punctuation marks (",", ".", "),") in quotes, “,”, so that it reads as a token
    and not as a stray mark; spaces (·), newlines (↵) and named tokens stay as they are."""
    if text and len(text) <= 2 and not any(ch.isalnum() or ch in "·↵⇥⟨⟩∅…" for ch in text):
        return f"“{text}”"
    return text


@dataclass(frozen=True)
class LabelSet:
    """One set of the tree's labels, cut and placed for `fit`: per node its text (escaped for
    Plotly; drawn where the node is `said`), the star's, each fold's, and where each sits."""

    fit: Fit
    labels: list[str]
    below: dict[int, bool]  # per drawn label's node: whether it takes turns below its row
    star: str
    folds: list[str]
    texts: Texts = Texts((), 0)  # per node, then the root and the star: its textposition (`placed`)


def any_below(d: Any, full: list[str], fit: Fit) -> bool:
    """Whether any label of `fit`'s set takes turns under its row (`label_sides`): the figure sets
    its rows further apart then."""
    return any(_sides(d, full, fit)[-1])


def _sides(d: Any, full: list[str], fit: Fit) -> tuple:
    """(said, xs, ys, wants, least, more, star, below): the drawn labels' nodes (then the star and
    the folds), where they are, their whole lengths, their least ones, and which go under."""
    view = d.view
    said = [int(k) for k in np.flatnonzero(d.said)]
    star = punctuation(visible(token_text(d.tokenizer, view.model_token), 99)) if view.model_token is not None else ""
    more = [f"+{len(f[3])} more" for f in view.folds]
    xs = [float(view.x[k]) for k in said] + [view.star_x] + [f[1] for f in view.folds]
    ys = [float(view.y[k]) for k in said] + [view.star_y if star else 1e9] + [f[2] for f in view.folds]
    wants = [len(full[k]) for k in said] + [len(star)] + [len(m) for m in more]
    least = [len(END_MARK) if full[k] == END_MARK else 3 for k in said] + [3] + [len(m) - 5 for m in more]
    down = [i for i, k in enumerate(said) if goes_down(d, k)]
    below = label_sides(xs, ys, d.columns, wants, len(said), down, fit)[: len(said)]
    return said, xs, ys, wants, least, more, star, below


def label_set(d: Any, full: list[str], fit: Fit, row_px: float) -> LabelSet:
    """Each drawn label's characters (`said`), taking turns above and below along a crowded row
    (`label_sides`): at least two and "…" where cut, never none; the star's and the folds'
    after them, with rows `row_px` apart. Not placed yet (`placed`)."""
    said, xs, ys, wants, least, more, star, below = _sides(d, full, fit)
    room = label_room(xs, ys, d.columns, wants, least, below, fit, row_px)
    cap = dict(zip(said, room))
    chars = label_chars(d.columns)  # a retrieved-only node's label, for hover and tests
    labels = [plot_esc(f if f == END_MARK else visible(f, cap.get(k, chars))) for k, f in enumerate(full)]
    folds = [m if len(m) <= n else m.split()[0] for m, n in zip(more, room[len(said) + 1 :])]
    sides = dict(zip(said, below))
    star_text = plot_esc(visible(star, room[len(said)])) if star else ""
    return LabelSet(fit, labels, sides, star_text, folds)


def placed(d: Any, labels: LabelSet, plot_h: float) -> LabelSet:
    """The set with each label placed clear at its widths, on a plot `plot_h` px high (`place_texts`)."""
    scene = _scene(d, labels.labels, labels.below, labels.star, labels.fit, plot_h)
    return replace(labels, texts=place_texts(scene))


def goes_down(d: Any, k: int) -> bool:
    """Whether an edge runs below node k: to a child in a lower row, the star's dashed one, or
    its own from a lower parent (the root, under a deep chain's first node)."""
    view = d.view
    if d.parent_xy(int(view.parent_pos[k]))[1] < view.y[k]:
        return True
    kids = [c for c in range(len(view.nodes)) if view.parent_pos[c] == k]
    star = view.model_token is not None and view.model_parent_pos == k and view.star_y < view.y[k]
    return star or any(view.y[c] < view.y[k] for c in kids)


def _scene(d: Any, labels: list[str], below: dict[int, bool], star: str, fit: Fit, plot_h: float) -> Scene:
    """The tree as `tree_places` reads it: the nodes, then the root and the star; every edge;
    each drawn label's width at `fit`'s type."""
    view = d.view
    n = len(view.nodes)
    xy = [(float(view.x[k]), float(view.y[k])) for k in range(n)] + [(0.0, d.root_y)]
    sizes = [float(s) for s in d.sizes] + [12.0]
    edges = [(d.parent_xy(int(view.parent_pos[k])), xy[k]) for k in range(n)]
    edges += [(d.parent_xy(p), (fx, fy)) for p, fx, fy, _ in view.folds]
    fixed = [(fx, fy, len(f"+{len(held)}") * fit.char_px) for _, fx, fy, held in view.folds]
    if view.model_token is not None:
        xy.append((view.star_x, view.star_y))
        sizes.append(14.0)
        edges.append((d.parent_xy(view.model_parent_pos), xy[-1]))
    shown = [len(html.unescape(lab)) * fit.char_px if said else 0.0 for said, lab in zip(d.said, labels)]
    return Scene(
        xy=xy,
        sizes=sizes,
        edges=edges,
        label_px=shown + [0.0] + ([len(html.unescape(star)) * fit.char_px] if len(xy) > n + 1 else []),
        columns=d.columns,
        y_range=d.y_range(),
        label_font=fit.font,
        fixed=fixed,
        # the star's label may go under it, clear of its row's labels above (`label_sides`)
        label_sides=[("bottom" if below.get(k) else "top") for k in range(n)] + ["top", ""],
        scales=tuple((w, plot_h) for w in fit.widths),
    )


def wide_trace(d: Any, colours: list[str]) -> dict:
    """The wide set's labels (`d.wide`) in one trace: each drawn node's (in `colours`, its
    mark's text colour), the star's and each fold's, on transparent markers of their nodes'
    sizes, so Plotly sets them as far from their points as the phone's."""
    view, wide = d.view, d.wide
    said = [int(k) for k in np.flatnonzero(d.said)]
    xs = [float(view.x[k]) for k in said]
    ys = [float(view.y[k]) for k in said]
    sizes = [float(d.sizes[k]) for k in said]
    texts = [wide.labels[k] for k in said]
    places = [wide.texts.label_places[k] for k in said]
    colour = [colours[k] for k in said]
    if view.model_token is not None:
        xs, ys, sizes = xs + [view.star_x], ys + [view.star_y], sizes + [14.0]
        texts, places = texts + [wide.star], places + [wide.texts.label_places[len(view.nodes) + 1]]
        colour.append(d.star_colour)
    for (_, fx, fy, _), text in zip(view.folds, wide.folds):
        xs, ys, sizes = xs + [fx], ys + [fy], sizes + [5.0]
        texts, places, colour = texts + [text], places + [LABEL_POSITION], colour + ["#4b5563"]
    return dict(
        type="scatter",
        x=xs,
        y=ys,
        mode="markers+text",
        text=texts,
        textposition=places,
        textfont=dict(size=wide.fit.font, color=colour, shadow=LABEL_HALO),
        marker=dict(size=sizes, color="rgba(0,0,0,0)"),
        hoverinfo="skip",
        name=WIDE_LABELS,
        showlegend=False,
    )
