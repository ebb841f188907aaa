"""Where the draft tree's texts sit (`place_texts`): each node's label above it, or below it
where its row's neighbours take turns (centred, or shifted left or right where an edge would
cross it), and each drafted node's row number at a corner of its node, or straight above or
below it (past its neighbours' labels where they crowd), where no edge, label, node or other
number is, on a phone's plot and a laptop's. Pure geometry in pixels, as Plotly offsets a scatter point's text; no Plotly here.

Plotly puts a point's text `textposition` away from its marker by r = size / 2 / 0.8 + 1 px
(sideways for "left"/"right", up or down for "top"/"bottom"), its baseline 0.75 of the font
size below that for "bottom", 0.25 above it for "top" and 0.25 below the centre for "middle"
(plotly.js's textPointPosition)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The plot's size in px (wide, high) where the tree is drawn: a 390 px phone's, the Chat view's
# column on a laptop and the step-through's (its key in two columns leaves the plot taller).
SCALES = ((300.0, 300.0), (480.0, 300.0), (560.0, 400.0))

LABEL_PLACES = ("top center", "top right", "top left")  # a label stays above its node, or below it:
UNDER_PLACES = ("bottom center", "bottom right", "bottom left")  # where its row's neighbours take turns
# a row number at a corner of its node, below right first (as a subscript; the label is above), beside it last
NUMBER_PLACES = ("bottom right", "bottom left", "top right", "top left", "middle right", "middle left")
LEFT_FIRST = ("bottom left", "bottom right", "top left", "top right", "middle left", "middle right")
# then straight under or over its node: near it, or past its neighbours' labels (`far_size`)
CENTRED = (("bottom center", False), ("top center", False), ("bottom center", True), ("top center", True))
DIGIT_PX = 6.8  # a bold digit's width at the numbers' 11 px
CLEAR_PX = 1.0  # a text's halo: a line this close to a text's box crosses it
TEXT_GAP_PX = 3.0  # two texts closer than this read as one ("d" and "an…" as "dan…")
TEXT_WEIGHT = 4  # a text on another text (or cut by the plot's edge) costs as much as four edges through it


@dataclass(frozen=True)
class Texts:
    """Where each text goes: per node its label's textposition, per node its number's (\"\" with
    none), the number's marker size (its offset from the node), and the overlaps that remain,
    weighted (0 when every text is clear on every scale)."""

    label_places: tuple[str, ...]
    number_places: tuple[str, ...]
    number_sizes: tuple[float, ...]
    overlaps: int


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in px, y downwards


def text_box(place: str, cx: float, cy: float, size: float, width: float, font: float) -> Box:
    """The box a text of `width` px at `font` px takes at `place` from a marker of `size` px at (cx, cy)."""
    r = size / 2 / 0.8 + 1 if size else 0.0
    if "left" in place:
        x0, x1 = cx - r - width, cx - r
    elif "right" in place:
        x0, x1 = cx + r, cx + r + width
    else:
        x0, x1 = cx - width / 2, cx + width / 2
    if "top" in place:
        y0, y1 = cy - r - 0.97 * font, cy - r - 0.05 * font
    elif "bottom" in place:
        y0, y1 = cy + r + 0.03 * font, cy + r + 0.95 * font
    else:
        y0, y1 = cy - 0.47 * font, cy + 0.45 * font
    return (x0, y0, x1, y1)


def boxes_meet(a: Box, b: Box, pad: float = CLEAR_PX) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def segment_meets(box: Box, p: tuple[float, float], q: tuple[float, float], pad: float = CLEAR_PX) -> bool:
    """Whether the segment p-q runs through the box grown by `pad` (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad
    if max(p[0], q[0]) < x0 or min(p[0], q[0]) > x1 or max(p[1], q[1]) < y0 or min(p[1], q[1]) > y1:
        return False  # both ends on one side of it
    dx, dy = q[0] - p[0], q[1] - p[1]
    lo, hi = 0.0, 1.0
    for d, a, b in ((dx, p[0] - x0, x1 - p[0]), (dy, p[1] - y0, y1 - p[1])):
        for step, room in ((-d, a), (d, b)):
            if step == 0:
                if room < 0:
                    return False
            else:
                t = room / step
                if step < 0:
                    lo = max(lo, t)
                else:
                    hi = min(hi, t)
    return lo <= hi


@dataclass(frozen=True)
class Scene:
    """The tree in data units: nodes (x, y, marker px), edges, labels' widths in px (0: none),
    the side each label takes and the row numbers (0: none); x runs from -0.4 to
    `columns` - 0.4, y over `y_range`."""

    xy: Sequence[tuple[float, float]]
    sizes: Sequence[float]
    edges: Sequence[tuple[tuple[float, float], tuple[float, float]]]
    label_px: Sequence[float]
    numbers: Sequence[int]
    columns: float
    y_range: tuple[float, float]
    label_font: float = 12.0
    number_font: float = 11.0
    fixed: Sequence[
        tuple[float, float, float]
    ] = ()  # other labels, centred above (x, y, width px): the star's, the folds'
    # per node: its label's side, "top" or "bottom", or "" for either (above unless below clears
    # more); none given: every one above
    label_sides: Sequence[str] = ()

    def px(self, scale: tuple[float, float], x: float, y: float) -> tuple[float, float]:
        w, h = scale
        lo, hi = self.y_range
        return ((x + 0.4) * w / self.columns, (hi - y) * h / (hi - lo))


def number_size(place: str, size: float) -> float:
    """The invisible marker that offsets a number: at a corner its text clears the node with a
    smaller one (the offset applies both ways), beside it the node's size plus 2 px."""
    return 0.8 * size if place != "middle left" and place != "middle right" else size + 2


def far_size(scene: Scene) -> float:
    """The invisible marker that sets a number straight above or below its node past the labels
    its neighbours have on that side: their offset from the biggest labelled node, their
    height and the gap two texts keep."""
    biggest = max((s for s, w in zip(scene.sizes, scene.label_px) if w), default=max(scene.sizes, default=8.0))
    r = biggest / 2 / 0.8 + 1 + scene.label_font + TEXT_GAP_PX + CLEAR_PX
    return (r - 1) * 1.6


def _label_box(scene: Scene, scale, k: int, place: str) -> Box:
    cx, cy = scene.px(scale, *scene.xy[k])
    return text_box(place, cx, cy, scene.sizes[k], scene.label_px[k], scene.label_font)


def _number_box(scene: Scene, scale, k: int, place: str, size: float) -> Box:
    cx, cy = scene.px(scale, *scene.xy[k])
    width = DIGIT_PX * len(str(scene.numbers[k]))
    return text_box(place, cx, cy, size, width, scene.number_font)


def _in_px(scene: Scene, scale) -> tuple[list, list]:
    """The edges' ends and the nodes' boxes in px at `scale`."""
    edges = [(scene.px(scale, *p), scene.px(scale, *q)) for p, q in scene.edges]
    nodes = []
    for (x, y), s in zip(scene.xy, scene.sizes):
        cx, cy = scene.px(scale, x, y)
        nodes.append((cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2))
    return edges, nodes


def _hits(scale, drawn: tuple[list, list], box: Box, own: int, taken: list[Box], near: bool) -> int:
    """How many things the box meets: edges, nodes, texts placed, the plot's edges; with
    `near`, also whether another node is nearer the box than its own (the number would read as
    that node's)."""
    w, h = scale
    edges, nodes = drawn
    hits = sum(segment_meets(box, p, q) for p, q in edges)  # a line under a haloed text still reads
    hits += TEXT_WEIGHT * sum(boxes_meet(box, t, TEXT_GAP_PX) for t in taken)  # two texts on each other do not
    hits += TEXT_WEIGHT * int(box[0] < 0 or box[1] < 0 or box[2] > w or box[3] > h)
    hits += 2 * sum(boxes_meet(box, b) for k, b in enumerate(nodes) if k != own)
    if near and nodes:
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        dist = [((b[0] + b[2]) / 2 - cx) ** 2 + ((b[1] + b[3]) / 2 - cy) ** 2 for b in nodes]
        hits += min(dist) < dist[own]
    return hits


def place_texts(scene: Scene) -> Texts:
    """Labels first, each centred unless a shift clears more (edges, nodes and every other
    label, those not placed yet as centred: a shift never pushes a neighbour along), then the
    numbers, each at its first corner with the fewest overlaps over every scale."""
    n = len(scene.xy)
    drawn = {s: _in_px(scene, s) for s in SCALES}
    taken: dict[tuple[float, float], list[Box]] = {s: [] for s in SCALES}
    for s in SCALES:
        for x, y, width in scene.fixed:
            cx, cy = scene.px(s, x, y)
            taken[s].append(text_box("top center", cx, cy, 14.0, width, scene.label_font))
    said = [k for k in range(n) if scene.label_px[k]]
    sides = list(scene.label_sides) + ["top"] * (n - len(scene.label_sides))
    labels = [UNDER_PLACES[0] if sides[k] == "bottom" else LABEL_PLACES[0] for k in range(n)]
    now = {s: {k: _label_box(scene, s, k, labels[k]) for k in said} for s in SCALES}
    overlaps = 0
    for k in sorted(said, key=lambda k: (-scene.xy[k][1], scene.xy[k][0])):
        scores = []
        places = {"top": LABEL_PLACES, "bottom": UNDER_PLACES}.get(sides[k], LABEL_PLACES + UNDER_PLACES)
        for p in places:
            score = 0
            for s in SCALES:
                others = taken[s] + [b for j, b in now[s].items() if j != k]
                score += _hits(s, drawn[s], _label_box(scene, s, k, p), k, others, False)
            scores.append(score)
        best = min(range(len(places)), key=lambda i: (scores[i], i))
        labels[k] = places[best]
        overlaps += scores[best]
        for s in SCALES:
            now[s][k] = _label_box(scene, s, k, labels[k])
    for s in SCALES:
        taken[s] += list(now[s].values())
    # the numbers: subscripts first; where a chain's last node must take the gap before it,
    # the whole chain's numbers below left reads better than one number on an edge
    tries = [_numbers(scene, drawn, taken, NUMBER_PLACES), _numbers(scene, drawn, taken, LEFT_FIRST)]
    numbers, sizes, score = min(tries, key=lambda t: t[2])
    return Texts(tuple(labels), numbers, sizes, overlaps + score)


def _numbers(scene: Scene, drawn: dict, taken: dict, places: tuple[str, ...]) -> tuple[tuple, tuple, int]:
    """Each row number at its first place in `places` (then CENTRED's) with the fewest overlaps
    (its number's box added to those the next ones avoid): (places, marker sizes, overlaps)."""
    n = len(scene.xy)
    taken = {s: list(b) for s, b in taken.items()}
    numbers = [""] * n
    sizes = [0.0] * n
    total = 0
    far = far_size(scene)
    for k in range(n):
        if not scene.numbers[k]:
            continue
        tries = [(p, number_size(p, scene.sizes[k])) for p in places]
        tries += [(p, far if away else number_size(p, scene.sizes[k])) for p, away in CENTRED]
        scores = [
            sum(_hits(s, drawn[s], _number_box(scene, s, k, p, size), k, taken[s], True) for s in SCALES)
            for p, size in tries
        ]
        best = min(range(len(tries)), key=lambda i: (scores[i], i))
        numbers[k], sizes[k] = tries[best]
        total += scores[best]
        for s in SCALES:
            taken[s].append(_number_box(scene, s, k, numbers[k], sizes[k]))
    return tuple(numbers), tuple(sizes), total
