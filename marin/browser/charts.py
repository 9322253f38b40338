"""Server-side SVG charts for research pages: lines, markers, bands and linked points, on linear or log axes.

`svg.line_plot` draws a loss curve; the research pages need more from one picture: evaluation points as
markers beside a training curve, a ladder's rungs with the fitted law and its interval, runs against
FLOPs on a log axis with the Pareto frontier, each point linking to its run. A `Chart` collects series of
those kinds and renders them in one pass, bands under lines under markers (so a linked marker is never
covered by a line's hover targets): the axes are fitted to everything drawn, log axes get ticks at
powers of ten, and every marker carries a `<title>` so the browser shows its values on hover, with no
JavaScript library. The legend goes under the plot (the SVG grows by its rows), never over what is drawn,
and names only series that drew something. `SeriesStyle` gives a page's series their colours and marker
shapes, so one series looks the same on every chart of the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from marin.browser.html import esc
from marin.browser.svg import PALETTE, fmt_tick, nice_ticks

MAX_HOVER_POINTS = 400
"""A line gets an invisible hover target per point up to this many points (thinned beyond)."""


def fmt_value(v: float) -> str:
    return fmt_tick(v, digits=5)


@dataclass
class Series:
    name: str
    kind: str
    """line | points | band (points holds (x, low, high)) | dashed."""
    points: list[tuple]
    hrefs: list[str | None] = field(default_factory=list)
    titles: list[str | None] = field(default_factory=list)
    css: str = ""
    color: str | None = None
    legend: bool = True
    shape: str = "circle"
    """A marker's shape (points series): one of SHAPES, so series that share a colour or a spot stay apart."""
    hollow: bool = False
    """Markers drawn as outlines (a comparison's second run), filled otherwise."""


SHAPES = ("circle", "square", "diamond", "triangle", "triangle-down", "hexagon")
"""Marker shapes, given out in this order to the evaluation sets of a page."""

DODGE_PX = 8.0
"""Markers of different series closer than this on one x are spread sideways by this much each, so a point
that lands on another stays visible (its hover title keeps the exact value)."""


class SeriesStyle:
    """One colour and one marker shape per series key, the same on every chart of a page (and on both sides
    of a comparison): keys get PALETTE's colours and SHAPES in the order they are first named, so naming
    every key of the page up front makes the assignment independent of which chart draws first."""

    def __init__(self, keys=()) -> None:
        self.colors: dict[str, str] = {}
        self.shapes: dict[str, str] = {}
        for key in keys:
            self.color(key)

    def color(self, key: str) -> str:
        if key not in self.colors:
            self.colors[key] = PALETTE[len(self.colors) % len(PALETTE)]
            self.shapes[key] = SHAPES[len(self.shapes) % len(SHAPES)]
        return self.colors[key]

    def shape(self, key: str) -> str:
        self.color(key)
        return self.shapes[key]


def marker_svg(shape: str, cx: float, cy: float, r: float, attrs: str, title: str) -> str:
    """One marker: a circle, or a path of the given shape of about the same area, with `attrs` and a title."""
    if shape == "circle":
        return f'<circle {attrs} cx="{cx:.1f}" cy="{cy:.1f}" r="{r}"><title>{title}</title></circle>'
    if shape == "square":
        a = r * 0.9
        pts = [(cx - a, cy - a), (cx + a, cy - a), (cx + a, cy + a), (cx - a, cy + a)]
    elif shape == "diamond":
        a = r * 1.25
        pts = [(cx, cy - a), (cx + a, cy), (cx, cy + a), (cx - a, cy)]
    elif shape in ("triangle", "triangle-down"):
        a, sign = r * 1.3, (1 if shape == "triangle" else -1)
        pts = [(cx, cy - sign * a), (cx + a * 0.95, cy + sign * a * 0.65), (cx - a * 0.95, cy + sign * a * 0.65)]
    else:
        a = r * 1.1
        pts = [(cx + a * math.cos(math.pi / 3 * k), cy + a * math.sin(math.pi / 3 * k)) for k in range(6)]
    d = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in pts) + " Z"
    return f'<path {attrs} data-cx="{cx:.1f}" data-cy="{cy:.1f}" d="{d}"><title>{title}</title></path>'


def dodge(markers: list[tuple[object, float, float]]) -> dict[object, float]:
    """Sideways offsets for markers (id, x in px, y in px) that would cover each other at one x: each cluster of
    markers closer than DODGE_PX in y is spread around its x, DODGE_PX apart, in the order given."""
    by_x: dict[float, list[tuple[int, object, float]]] = {}
    for order, (key, x, y) in enumerate(markers):
        by_x.setdefault(round(x, 1), []).append((order, key, y))
    out: dict[object, float] = {}
    for group in by_x.values():
        group.sort(key=lambda item: item[2])
        clusters: list[list[tuple[int, object, float]]] = []
        for item in group:
            if clusters and item[2] - clusters[-1][-1][2] < DODGE_PX:
                clusters[-1].append(item)
            else:
                clusters.append([item])
        for cluster in clusters:
            if len(cluster) > 1:
                for rank, (_, key, _) in enumerate(sorted(cluster, key=lambda item: item[0])):
                    out[key] = (rank - (len(cluster) - 1) / 2) * DODGE_PX
    return out


@dataclass
class Chart:
    """A chart under construction; `render()` returns the `<svg>`."""

    x_label: str = "step"
    y_label: str = ""
    log_x: bool = False
    log_y: bool = False
    width: int = 1280
    """In SVG units: the page draws the chart at its own width (CSS), so this sets the text's relative size."""
    height: int = 320
    css_class: str = "plot"
    spread_markers: bool = True
    """Spread markers that cover each other at one x sideways (`dodge`); off where a marker must sit exactly on
    a line's end (a forecast at the end of its fitted law)."""
    series: list[Series] = field(default_factory=list)

    def line(
        self, name: str, points, dashed: bool = False, css: str = "", color: str | None = None, legend: bool = True
    ) -> Chart:
        kind = "dashed" if dashed else "line"
        self.series.append(Series(name, kind, self._finite(points), css=css, color=color, legend=legend))
        return self

    def points(
        self,
        name: str,
        points,
        hrefs=None,
        titles=None,
        css: str = "",
        color: str | None = None,
        legend: bool = True,
        shape: str = "circle",
        hollow: bool = False,
    ) -> Chart:
        kept = [(i, p) for i, p in enumerate(points) if self._ok(p[0], p[1])]
        self.series.append(
            Series(
                name,
                "points",
                [p for _, p in kept],
                [hrefs[i] for i, _ in kept] if hrefs else [],
                [titles[i] for i, _ in kept] if titles else [],
                css=css,
                color=color,
                legend=legend,
                shape=shape,
                hollow=hollow,
            )
        )
        return self

    def band(self, name: str, triples, css: str = "", color: str | None = None) -> Chart:
        kept = [(x, lo, hi) for x, lo, hi in triples if self._ok(x, lo) and self._ok(x, hi)]
        self.series.append(Series(name, "band", kept, css=css, color=color))
        return self

    def _ok(self, x, y) -> bool:
        if not (isinstance(x, int | float) and isinstance(y, int | float)):
            return False
        if not (math.isfinite(x) and math.isfinite(y)):
            return False
        return (x > 0 or not self.log_x) and (y > 0 or not self.log_y)

    def _finite(self, points) -> list[tuple]:
        return [(x, y) for x, y in points if self._ok(x, y)]

    def render(self) -> str:
        xs, ys = [], []
        for s in self.series:
            for p in s.points:
                xs.append(p[0])
                ys.extend(p[1:])
        if not xs:
            return '<div class="note">no finite values to plot</div>'
        fx = math.log10 if self.log_x else float
        fy = math.log10 if self.log_y else float
        x0, x1 = fx(min(xs)), fx(max(xs))
        y0, y1 = fy(min(ys)), fy(max(ys))
        if x1 - x0 <= 1e-9 * max(abs(x0), abs(x1)):
            x0, x1 = x0 - 0.5, x1 + 0.5
        if y1 - y0 <= 1e-9 * max(abs(y0), abs(y1)):  # flat (a constant learning rate, up to float noise)
            y0, y1 = y0 - (abs(y0) * 0.05 or 0.5), y1 + (abs(y1) * 0.05 or 0.5)
        px, py = (x1 - x0) * 0.04, (y1 - y0) * 0.06
        x0, x1, y0, y1 = x0 - px, x1 + px, y0 - py, y1 + py
        ml, mr, mt, mb = 70, 16, 28, 42
        pw, ph = self.width - ml - mr, self.height - mt - mb

        def sx(x: float) -> float:
            return ml + (fx(x) - x0) / (x1 - x0) * pw

        def sy(y: float) -> float:
            return mt + ph - (fy(y) - y0) / (y1 - y0) * ph

        parts = [
            "",  # the <svg> tag, once the legend's height is known
            f'<rect class="bg" x="{ml}" y="{mt}" width="{pw}" height="{ph}"/>',
        ]
        for t in _ticks(y0, y1, self.log_y, 5):
            parts.append(f'<line class="grid" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>')
            parts.append(f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{fmt_value(t)}</text>')
        if self.log_x:
            for t in _minor_ticks(x0, x1):
                parts.append(f'<line class="grid minor" y1="{mt}" y2="{mt + ph}" x1="{sx(t):.1f}" x2="{sx(t):.1f}"/>')
        if self.log_y:
            for t in _minor_ticks(y0, y1):
                parts.append(f'<line class="grid minor" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>')
        for t in _ticks(x0, x1, self.log_x, 6):
            parts.append(f'<line class="grid" y1="{mt}" y2="{mt + ph}" x1="{sx(t):.1f}" x2="{sx(t):.1f}"/>')
            parts.append(
                f'<text class="tick" x="{sx(t):.1f}" y="{mt + ph + 16}" text-anchor="middle">{fmt_value(t)}</text>'
            )
        x_label = self.x_label + (" (log)" if self.log_x else "")
        parts.append(
            f'<text class="axis" x="{ml + pw / 2}" y="{self.height - 6}" text-anchor="middle">{esc(x_label)}</text>'
        )
        if self.y_label:
            parts.append(f'<text class="axis" x="{ml}" y="{mt - 10}" text-anchor="start">{esc(self.y_label)}</text>')
        legend = []
        layer = {"band": 0, "line": 1, "dashed": 1, "points": 2}
        drawn = sorted(enumerate(self.series), key=lambda item: layer.get(item[1].kind, 1))
        offsets = (
            {}
            if not self.spread_markers
            else dodge(
                [
                    ((i, j), sx(p[0]), sy(p[1]))
                    for i, s in enumerate(self.series)
                    if s.kind == "points"
                    for j, p in enumerate(s.points)
                ]
            )
        )
        for i, s in drawn:
            color = s.color or PALETTE[i % len(PALETTE)]
            name = esc(s.name)
            if s.kind == "band" and s.points:
                upper = " ".join(f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in s.points)
                lower = " ".join(f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(s.points))
                parts.append(
                    f'<polygon class="band {esc(s.css)}" data-series="{name}" fill="{color}" fill-opacity="0.15" '
                    f'stroke="none" points="{upper} {lower}"><title>{name}</title></polygon>'
                )
            elif s.kind in ("line", "dashed") and s.points:
                d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
                dash = ' stroke-dasharray="6 4"' if s.kind == "dashed" else ""
                parts.append(
                    f'<polyline class="line {esc(s.css)}" data-series="{name}" fill="none" stroke="{color}" '
                    f'stroke-width="2"{dash} points="{d}"/>'
                )
                step = max(1, math.ceil(len(s.points) / MAX_HOVER_POINTS))
                hover = s.points[::step]
                parts.append(f'<g class="hover" data-series="{name}">')
                parts.extend(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{color}" fill-opacity="0">'
                    f"<title>{name} @ {fmt_value(x)}: {fmt_value(y)}</title></circle>"
                    for x, y in hover
                )
                parts.append("</g>")
            elif s.kind == "points":
                for j, (x, y) in enumerate(s.points):
                    title = s.titles[j] if j < len(s.titles) and s.titles[j] else f"{s.name} @ {fmt_value(x)}"
                    title = f"{title}: {fmt_value(y)}"
                    attrs = f'class="marker {esc(s.css)}" data-series="{name}" ' + _paint(s, color)
                    dot = marker_svg(s.shape, sx(x) + offsets.get((i, j), 0.0), sy(y), 4.5, attrs, esc(title))
                    href = s.hrefs[j] if j < len(s.hrefs) else None
                    parts.append(f'<a href="{esc(href)}">{dot}</a>' if href else dot)
            if s.legend and s.points:
                legend.append((name, len(s.name), s, color))
        x, row = ml, 0
        for name, chars, s, color in legend:
            wide = 22 + 6.5 * chars + 18
            if x > ml and x + wide > self.width - mr:
                x, row = ml, row + 1
            ly = self.height + 12 + 18 * row
            if s.kind == "points":
                swatch = marker_svg(s.shape, x + 6, ly, 4, 'class="swatch" ' + _paint(s, color), name)
            else:
                dash = ' stroke-dasharray="5 3"' if s.kind == "dashed" else ""
                swatch = f'<line x1="{x}" x2="{x + 14}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/>'
            parts.append(
                f'<g class="legend-item">{swatch}<text class="legend" x="{x + 20}" y="{ly + 4}" '
                f'text-anchor="start">{name}</text></g>'
            )
            x += wide
        height = self.height + 22 + 18 * (row + 1) if legend else self.height
        parts[0] = (
            f'<svg class="{esc(self.css_class)}" xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
            f'height="{height}" viewBox="0 0 {self.width} {height}" role="img" '
            f'aria-label="{esc(self.y_label or "chart")}">'
        )
        parts.append("</svg>")
        return "".join(parts)


def _ticks(lo: float, hi: float, log: bool, n: int) -> list[float]:
    """Tick values (in data units) for an axis spanning lo..hi in its drawn units (log10 when `log`)."""
    if not log:
        return [t for t in nice_ticks(lo, hi, n) if lo <= t <= hi]
    first, last = math.ceil(lo), math.floor(hi)
    if last - first >= 1:
        every = max(1, math.ceil((last - first + 1) / max(n, 8)))
        return [10.0**e for e in range(first, last + 1, every)]
    low, high = 10.0**lo, 10.0**hi  # within a decade: round values (3.5, 4, 4.5), not powers (4.4668)
    return [t for t in nice_ticks(low, high, n) if t > 0 and low <= t <= high]


def _paint(s: Series, color: str) -> str:
    if s.hollow:
        return f'fill="#fff" stroke="{color}" stroke-width="1.8"'
    return f'fill="{color}" stroke="#fff" stroke-width="1"'


def _minor_ticks(lo: float, hi: float) -> list[float]:
    """A log axis's unlabelled grid at 2..9 times each power of ten (lo..hi in log10), where the axis spans at
    most 8 decades (beyond, the lines would crowd)."""
    if hi - lo > 8 or hi - lo < 0.3:
        return []
    return [
        m * 10.0**e
        for e in range(math.floor(lo), math.ceil(hi) + 1)
        for m in range(2, 10)
        if lo <= math.log10(m * 10.0**e) <= hi
    ]


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats (lower or equal x and lower y), in increasing x."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best = [], math.inf
    for i in order:
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front


def ema(points: list[tuple[float, float]], weight: float) -> list[tuple[float, float]]:
    """Exponential moving average with bias correction (TensorBoard's smoothing); weight 0 returns the input."""
    if weight <= 0 or len(points) < 2:
        return list(points)
    out, avg, norm = [], 0.0, 0.0
    for x, y in points:
        avg = weight * avg + (1 - weight) * y
        norm = weight * norm + (1 - weight)
        out.append((x, avg / norm))
    return out
