"""How many characters each label of the draft tree may have (`label_room`) and which side of
its node it takes (`label_sides`), reckoned for a plot width and a type size (`Fit`): the figure
writes its labels twice, cut for a phone's plot (`PHONE`) and, larger and longer, for a laptop's
(`WIDE`); the page shows one set or the other by the plot's own width (assets/app.css).
`rest_core.ui.tree_places` then sets each text where nothing else is. Pure arithmetic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CHAR_PX = 7.4  # about a character's width at 12 px type


@dataclass(frozen=True)
class Fit:
    """One set of labels: cut to fit a plot `plot_px` wide, in `font` px type, at most `most`
    characters; `widths`: the plot widths the set is shown at (its labels are placed clear at each)."""

    plot_px: float
    font: float
    most: int
    widths: tuple[float, ...]

    @property
    def char_px(self) -> float:
        return CHAR_PX * self.font / 12


FIGURE_MARGIN_PX = 20  # the figure's left and right margins together: its width is the plot's and these
WIDE_PLOT_PX = 430  # from this plot width on (a laptop's Chat or Step-through column) the wide labels show
# the phone's: the plot on a 390 px phone, up to the wide set's; the wide: up to a 1400 px page's column
PHONE = Fit(plot_px=300, font=12, most=10, widths=(300.0, WIDE_PLOT_PX - 1.0))
WIDE = Fit(plot_px=WIDE_PLOT_PX, font=14, most=14, widths=(float(WIDE_PLOT_PX), 680.0))
WIDE_FIGURE_PX = WIDE_PLOT_PX + FIGURE_MARGIN_PX  # the figure's width where the page switches sets
PHONE_PLOT_PX = PHONE.plot_px  # the plot's width on a 390 px phone


def label_chars(columns: float, fit: Fit = PHONE) -> int:
    """How many characters a node's label may have to fit `fit`'s plot, centred above its node
    within its column."""
    room = fit.plot_px / max(columns, 1.0) - 4
    return int(max(2, min(8, room // fit.char_px)))


def label_sides(
    xs: Sequence[float],
    ys: Sequence[float],
    columns: float,
    wants: Sequence[int],
    movable: int | None = None,
    down: Sequence[int] = (),
    fit: Fit = PHONE,
) -> list[bool]:
    """Which labels sit below their node (True) rather than above it: along a row of neighbours
    (the same y, one column apart) whose whole labels would meet on `fit`'s plot, they take turns
    above and below, so that each has about two columns of room (a deep chain's words); each run
    starts on the side that sets fewer labels just over another label in the row below or on
    an edge going down (`down`: the labels whose node has one). Only the first `movable` labels
    may move (the star's and the folds' stay above)."""
    col_px = fit.plot_px / max(columns, 1.0)
    n = len(xs) if movable is None else movable
    at = {(xs[i], ys[i]): i for i in range(n)}
    runs: list[list[int]] = []
    for i in sorted(range(n), key=lambda i: (ys[i], xs[i])):  # each row left to right
        j = at.get((xs[i] - 1, ys[i]))
        if (
            j is not None
            and runs
            and runs[-1][-1] == j
            and (min(fit.most, wants[i]) + min(fit.most, wants[j])) / 2 * fit.char_px > col_px - 4
        ):
            runs[-1].append(i)
        else:
            runs.append([i])
    below = [False] * len(xs)
    for run in (r for r in runs if len(r) > 1):

        def over(i: int, run: list[int] = run) -> bool:  # a label below i would meet one in the row under it
            return i in down or any(
                m not in run and wants[m] and 0 < ys[i] - ys[m] <= 1 and abs(xs[m] - xs[i]) <= 1 for m in range(len(xs))
            )

        turn = min((0, 1), key=lambda t: sum(over(i) for r, i in enumerate(run) if (r + t) % 2))
        for r, i in enumerate(run):
            below[i] = (r + turn) % 2 == 1
    return below


def label_room(
    xs: Sequence[float],
    ys: Sequence[float],
    columns: float,
    wants: Sequence[int],
    least: Sequence[int] = (),
    below: Sequence[bool] = (),
    fit: Fit = PHONE,
    row_px: float | None = None,
) -> list[int]:
    """How many characters each label at (x, y) may have on `fit`'s plot, centred above its point
    (or below it where `below` says): each wants its whole text (`wants`, at most `fit.most`),
    within the plot's edges; while two labels one over the other meet (`overlap`: in one band,
    above a row and below the next, unless the rows are `row_px` apart and that leaves them room;
    their halves wider than the gap, `fit.char_px` a character), the one in the most meetings,
    the longer on a tie, loses a character, down to 2 (or `least`)."""
    col_px = fit.plot_px / max(columns, 1.0)
    chars = fit.char_px
    w = [min(fit.most, n) for n in wants]
    floor = [min(max(2, m), n) for m, n in zip(least or [2] * len(xs), w)]
    for i, x in enumerate(xs):  # the plot's edges: x runs from -0.4 to columns - 0.4
        edge = 2 * min(x + 0.4, columns - 0.4 - x) * col_px - 4
        w[i] = max(floor[i], min(w[i], int(edge // chars)))
    under = [i < len(below) and below[i] for i in range(len(xs))]
    pairs = [
        (i, j, abs(xs[j] - xs[i]) * col_px - 4)
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if overlap(ys[i], under[i], ys[j], under[j], fit.font, row_px)
    ]
    while True:  # shrink the label in the most meetings, the longest first, one character at a time
        meets = [0] * len(w)
        for i, j, gap in pairs:
            if (w[i] + w[j]) / 2 * chars > gap:
                meets[i] += w[i] > floor[i]
                meets[j] += w[j] > floor[j]
        k = max(range(len(w)), key=lambda m: (meets[m], w[m]), default=-1)
        if k < 0 or not meets[k]:
            break
        w[k] -= 1
    return w


NODE_GAP_PX = (
    6.0,
    10.4,
)  # px from a node's centre to its label, as Plotly sets it: the smallest node's, a drafted one's
TEXT_GAP_PX = 3.0  # two texts closer than this read as one


def overlap(y1: float, below1: bool, y2: float, below2: bool, font: float, row_px: float | None) -> bool:
    """Whether two labels (of nodes in rows y1 and y2, each above its node or below it) may lie one
    over the other. Without `row_px`, when they share a band (a label over a row or under the
    one above it: the bands half a row off the rows); with it, when their heights in px meet, for
    any node size (`NODE_GAP_PX`)."""
    if row_px is None:
        band1, band2 = y1 + (-0.5 if below1 else 0.5), y2 + (-0.5 if below2 else 0.5)
        return abs(band2 - band1) < 1

    def span(y: float, under: bool) -> tuple[float, float]:  # px, upwards
        near, far = NODE_GAP_PX
        if under:
            return y * row_px - far - 0.95 * font, y * row_px - near - 0.03 * font
        return y * row_px + near + 0.05 * font, y * row_px + far + 0.97 * font

    (a0, a1), (b0, b1) = span(y1, below1), span(y2, below2)
    return a0 < b1 + TEXT_GAP_PX and b0 < a1 + TEXT_GAP_PX
