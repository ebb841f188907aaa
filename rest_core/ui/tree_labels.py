"""How many characters each label of the draft tree may have (`label_room`) and which side of
its node it takes (`label_sides`), reckoned on a phone's plot, where the columns are narrowest;
`rest_core.ui.tree_places` then sets each text where nothing else is. Pure arithmetic."""

from __future__ import annotations

from collections.abc import Sequence

PHONE_PLOT_PX = 300  # the plot's width on a 390 px phone: labels are cut to fit a column there

CHAR_PX = 7.4  # about a character's width at LABEL_PX


def label_chars(columns: float) -> int:
    """How many characters a node's label may have to fit on a phone (about CHAR_PX a character
    at the labels' LABEL_PX), centred above its node within its column."""
    room = PHONE_PLOT_PX / max(columns, 1.0) - 4
    return int(max(2, min(8, room // CHAR_PX)))


def label_sides(
    xs: Sequence[float],
    ys: Sequence[float],
    columns: float,
    wants: Sequence[int],
    movable: int | None = None,
    down: Sequence[int] = (),
) -> list[bool]:
    """Which labels sit below their node (True) rather than above it: along a row of neighbours
    (the same y, one column apart) whose whole labels would meet on a phone, they take turns
    above and below, so that each has about two columns of room (a deep chain's words); each run
    starts on the side that sets fewer labels just over another label in the row below or on
    an edge going down (`down`: the labels whose node has one). Only the first `movable` labels
    may move (the star's and the folds' stay above)."""
    col_px = PHONE_PLOT_PX / max(columns, 1.0)
    n = len(xs) if movable is None else movable
    at = {(xs[i], ys[i]): i for i in range(n)}
    runs: list[list[int]] = []
    for i in sorted(range(n), key=lambda i: (ys[i], xs[i])):  # each row left to right
        j = at.get((xs[i] - 1, ys[i]))
        if (
            j is not None
            and runs
            and runs[-1][-1] == j
            and (min(10, wants[i]) + min(10, wants[j])) / 2 * CHAR_PX > col_px - 4
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
) -> list[int]:
    """How many characters each label at (x, y) may have on a phone, centred above its point (or
    below it where `below` says): each wants its whole text (`wants`, at most 10), within the
    plot's edges; while two labels in one band meet (above a row and below the next, their
    halves wider than the gap, CHAR_PX a character), the one in the most meetings, the longer on
    a tie, loses a character, down to 2 (or `least`)."""
    col_px = PHONE_PLOT_PX / max(columns, 1.0)
    w = [min(10, n) for n in wants]
    floor = [min(max(2, m), n) for m, n in zip(least or [2] * len(xs), w)]
    for i, x in enumerate(xs):  # the plot's edges: x runs from -0.4 to columns - 0.4
        edge = 2 * min(x + 0.4, columns - 0.4 - x) * col_px - 4
        w[i] = max(floor[i], min(w[i], int(edge // CHAR_PX)))
    band = [y - 0.5 if i < len(below) and below[i] else y + 0.5 for i, y in enumerate(ys)]
    pairs = [
        (i, j, abs(xs[j] - xs[i]) * col_px - 4)
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if abs(band[j] - band[i]) < 1
    ]
    while True:  # shrink the label in the most meetings, the longest first, one character at a time
        meets = [0] * len(w)
        for i, j, gap in pairs:
            if (w[i] + w[j]) / 2 * CHAR_PX > gap:
                meets[i] += w[i] > floor[i]
                meets[j] += w[j] > floor[j]
        k = max(range(len(w)), key=lambda m: (meets[m], w[m]), default=-1)
        if k < 0 or not meets[k]:
            break
        w[k] -= 1
    return w
