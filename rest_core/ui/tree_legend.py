"""The draft tree's key, as the figure draws it (`key_entries`, `key_traces`): only the marks this
step's figure draws, each in a word or two (`tree_key.KEY_WORDS`), then the colour of each source
drawn and what the numbers inside the nodes are; a short horizontal key under the plot
(`KEY_LAYOUT`) whose rows on a phone the figure's height counts (`key_rows`). The fold under the
figure (`tree_key.TREE_LEGEND`) says every mark at length, drawn or not."""

from __future__ import annotations

import re
from typing import Any

from rest_core.sources import SEVERAL, origin
from rest_core.ui.style import ACCEPTED_COLOR, GREY, MODEL_COLOR, SEVERAL_NAME, plot_esc, several
from rest_core.ui.tree_key import OFF_PATH, REJECTED, TREE_MARKS, UNCHECKED, key_name
from rest_core.ui.tree_labels import PHONE

# `d` below: the figure being drawn (`rest_core.ui.trie_view._TrieDrawing`, which imports this module)


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

# Each mark's sample in the key, in neutral grey (a node's fill is its source's colour).
KEY_LOOK: dict[str, dict[str, Any]] = {
    "root": dict(symbol="square", size=11, color="#374151"),
    "accepted": dict(color="#e5e7eb", line=dict(color=ACCEPTED_COLOR, width=3)),
    REJECTED: dict(color=faded(GREY, REJECTED_ALPHA), line=dict(color=REJECTED_RING, width=RING_WIDTH)),
    OFF_PATH: OFF_LOOK,
    UNCHECKED: dict(color="white", line=dict(color=GREY, width=2.5)),
    "retrieved only": dict(color="white", line=dict(color=GREY, width=1.2)),
    "model's own token": dict(symbol="star", size=14, color=MODEL_COLOR),
}
ROW_KEY = "1, 2, …: its row"  # the key's line for the numbers inside the drafted nodes (the fold: which row)


def key_text(name: str) -> str:
    """A key line as Plotly writes it: the numbers' line shows its numbers bold, as drawn."""
    if name == ROW_KEY:
        head, rest = name.split(":", 1)
        return f"<b>{plot_esc(head)}</b>:{plot_esc(rest)}"
    return plot_esc(name)


def key_entries(d: Any) -> list[tuple[str, dict[str, Any]]]:
    """(words, marker) of each entry of the key: the marks of TREE_MARKS this figure draws, then
    the colour of each source whose nodes are drawn, by the source's name as the page's colour key
    says it, then the numbers' entry where any is drawn."""
    view = d.view
    drawn = {
        "root": True,
        "accepted": bool(view.accepted.any()),
        REJECTED: bool(d.mask(REJECTED).any()),
        OFF_PATH: bool(d.mask(OFF_PATH).any()),
        UNCHECKED: bool(d.mask(UNCHECKED).any()),
        "retrieved only": bool(d.mask("retrieved only").any()),
        "model's own token": view.model_token is not None,
    }
    marks = [(key_name(name), KEY_LOOK[name]) for _, name, _, _ in TREE_MARKS if drawn[name]]
    sources = {int(m) for m in d.srcs if m}  # the source masks of the drawn nodes
    colours = [(name, origin(bit).color) for bit, name in d.names.items() if any(m & bit for m in sources)]
    if any(several(m) for m in sources):  # a node more than one source reached
        colours.append((SEVERAL_NAME, SEVERAL[1]))
    marks += [(name, dict(color=colour)) for name, colour in colours]
    if any(d.row_no):  # the numbers inside the nodes, read without a hover (a phone has none)
        marks.append((ROW_KEY, dict(color="rgba(0,0,0,0)")))
    return marks


def key_traces(entries: list[tuple[str, dict[str, Any]]]) -> list[dict]:
    """The key's legend-only traces, one per entry."""
    return [
        dict(type="scatter", x=[None], y=[None], mode="markers", name=key_text(name), hoverinfo="skip",
             marker={"size": 13, **marker}, showlegend=True)
        for name, marker in entries
    ]  # fmt: skip


KEY_FONT = 11  # px: the key's type
KEY_CHAR_PX = 6.2  # px a character of it takes, about (Arial 5.5, DejaVu Sans 6.4: the rows are not undercounted)
KEY_ROW_PX = 19  # px a row of the key takes: Plotly's item, max(1.3 lines, 16) + 3
KEY_PAD_PX = 10  # px between the plot and the key, and under it
ITEM_PX, ITEM_GAP_PX = 40, 5  # Plotly's legend item: symbol and gaps before its text; between items
# A short key right under the plot, from its left edge: in one row where it fits, else in columns
# of its widest entry (Plotly's horizontal legend), two on a phone, three or four on a laptop.
KEY_LAYOUT: dict[str, Any] = dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=KEY_FONT), itemwidth=30)


def key_rows(entries: list[tuple[str, dict[str, Any]]], plot_px: float = PHONE.plot_px) -> int:
    """How many rows the key takes on a plot `plot_px` wide (a phone's: the figure's height counts
    them, and a wider figure, whose key takes fewer, gives its plot the rest), as Plotly lays a
    horizontal legend out: one row where every entry fits, else columns as wide as the widest."""
    widths = [ITEM_PX + KEY_CHAR_PX * len(re.sub(r"<[^>]+>", "", key_text(name))) for name, _ in entries]
    if not widths:
        return 0
    if sum(widths) + ITEM_GAP_PX * (len(widths) - 1) < plot_px:
        return 1
    column = max(widths) + ITEM_GAP_PX
    per_row = 1
    while column * (per_row + 1) - ITEM_GAP_PX < plot_px:
        per_row += 1
    return -(-len(widths) // per_row)


def key_px(entries: list[tuple[str, dict[str, Any]]]) -> float:
    """The key's height on a phone, with its gaps."""
    return KEY_ROW_PX * key_rows(entries) + KEY_PAD_PX
