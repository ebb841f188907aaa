"""Where the draft tree's labels sit (`place_texts`): each node's label above it, or below it
where its row's neighbours take turns (centred, or shifted left or right where an edge would
cross it), where no edge, node or other label is, on a phone's plot and a laptop's. (A drafted
node's row number is written inside its node, so it needs no place.) Pure geometry in pixels,
as Plotly offsets a scatter point's text; no Plotly here.

Plotly puts a point's text `textposition` away from its marker by r = size / 2 / 0.8 + 1 px
(sideways for "left"/"right", up or down for "top"/"bottom"), its baseline 0.75 of the font
size below that for "bottom", 0.25 above it for "top" and 0.25 below the centre for "middle"
(plotly.js's textPointPosition)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The plot's sizes in px (wide, high) where a set of labels is drawn, unless a scene names its own
# (`Scene.scales`: the figure gives each set of labels the widths it shows at, at its plot's height).
SCALES = ((300.0, 300.0), (480.0, 300.0), (560.0, 400.0))

LABEL_PLACES = ("top center", "top right", "top left")  # a label stays above its node, or below it:
UNDER_PLACES = ("bottom center", "bottom right", "bottom left")  # where its row's neighbours take turns
CLEAR_PX = 1.0  # a text's halo: a line this close to a text's box crosses it
TEXT_GAP_PX = 3.0  # two texts closer than this read as one ("d" and "an…" as "dan…")
TEXT_WEIGHT = 4  # a text on another text (or cut by the plot's edge) costs as much as four edges through it


@dataclass(frozen=True)
class Texts:
    """Where each label goes: per node its textposition, and the overlaps that remain, weighted
    (0 when every label is clear on every scale)."""

    label_places: tuple[str, ...]
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
    """The tree in data units: nodes (x, y, marker px), edges, labels' widths in px (0: none)
    and the side each label takes; x runs from -0.4 to
    `columns` - 0.4, y over `y_range`."""

    xy: Sequence[tuple[float, float]]
    sizes: Sequence[float]
    edges: Sequence[tuple[tuple[float, float], tuple[float, float]]]
    label_px: Sequence[float]
    columns: float
    y_range: tuple[float, float]
    label_font: float = 12.0
    fixed: Sequence[
        tuple[float, float, float]
    ] = ()  # other labels, centred above (x, y, width px): the star's, the folds'
    # per node: its label's side, "top" or "bottom", or "" for either (above unless below clears
    # more); none given: every one above
    label_sides: Sequence[str] = ()
    scales: Sequence[tuple[float, float]] = SCALES  # the plot sizes in px every label is clear at

    def px(self, scale: tuple[float, float], x: float, y: float) -> tuple[float, float]:
        w, h = scale
        lo, hi = self.y_range
        return ((x + 0.4) * w / self.columns, (hi - y) * h / (hi - lo))


def _label_box(scene: Scene, scale, k: int, place: str) -> Box:
    cx, cy = scene.px(scale, *scene.xy[k])
    return text_box(place, cx, cy, scene.sizes[k], scene.label_px[k], scene.label_font)


def _in_px(scene: Scene, scale) -> tuple[list, list]:
    """The edges' ends and the nodes' boxes in px at `scale`."""
    edges = [(scene.px(scale, *p), scene.px(scale, *q)) for p, q in scene.edges]
    nodes = []
    for (x, y), s in zip(scene.xy, scene.sizes):
        cx, cy = scene.px(scale, x, y)
        nodes.append((cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2))
    return edges, nodes


def _hits(scale, drawn: tuple[list, list], box: Box, own: int, taken: list[Box]) -> int:
    """How many things the box meets: edges, nodes, texts placed, the plot's edges."""
    w, h = scale
    edges, nodes = drawn
    hits = sum(segment_meets(box, p, q) for p, q in edges)  # a line under a haloed text still reads
    hits += TEXT_WEIGHT * sum(boxes_meet(box, t, TEXT_GAP_PX) for t in taken)  # two texts on each other do not
    hits += TEXT_WEIGHT * int(box[0] < 0 or box[1] < 0 or box[2] > w or box[3] > h)
    return hits + 2 * sum(boxes_meet(box, b) for k, b in enumerate(nodes) if k != own)


def place_texts(scene: Scene) -> Texts:
    """Each label centred unless a shift clears more (edges, nodes and every other label, those
    not placed yet as centred: a shift never pushes a neighbour along), over every scale."""
    n = len(scene.xy)
    drawn = {s: _in_px(scene, s) for s in scene.scales}
    taken: dict[tuple[float, float], list[Box]] = {s: [] for s in scene.scales}
    for s in scene.scales:
        for x, y, width in scene.fixed:
            cx, cy = scene.px(s, x, y)
            taken[s].append(text_box("top center", cx, cy, 14.0, width, scene.label_font))
    said = [k for k in range(n) if scene.label_px[k]]
    sides = list(scene.label_sides) + ["top"] * (n - len(scene.label_sides))
    labels = [UNDER_PLACES[0] if sides[k] == "bottom" else LABEL_PLACES[0] for k in range(n)]
    now = {s: {k: _label_box(scene, s, k, labels[k]) for k in said} for s in scene.scales}
    overlaps = 0
    for k in sorted(said, key=lambda k: (-scene.xy[k][1], scene.xy[k][0])):
        scores = []
        places = {"top": LABEL_PLACES, "bottom": UNDER_PLACES}.get(sides[k], LABEL_PLACES + UNDER_PLACES)
        for p in places:
            score = 0
            for s in scene.scales:
                others = taken[s] + [b for j, b in now[s].items() if j != k]
                score += _hits(s, drawn[s], _label_box(scene, s, k, p), k, others)
            scores.append(score)
        best = min(range(len(places)), key=lambda i: (scores[i], i))
        labels[k] = places[best]
        overlaps += scores[best]
        for s in scene.scales:
            now[s][k] = _label_box(scene, s, k, labels[k])
    return Texts(tuple(labels), overlaps)
