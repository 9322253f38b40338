"""Server-side SVG: the experiment DAG and line plots (loss curves), no JavaScript library.

The DAG is laid out in layers by longest path from the sources (a step sits one layer after
its deepest dependency); an edge that skips layers passes through a slot of its own in each
(a virtual node), so no edge is drawn through a step; slots inside a layer follow the mean slot
of what feeds them, which keeps chains straight and costs O(steps + edges + skipped layers): a
1,000-step experiment lays out in milliseconds. Layers run left to right when they fit the
page's width and top to bottom otherwise. Plots pick "nice" ticks and thin long series to at
most ~1,500 points per line, keeping the last point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from marin.browser.html import STATE_LABEL, esc

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 184, 40, 44, 14, 12
PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"]


MAX_DAG_WIDTH = 1380
"""Wider than this (the page's content width), the DAG is drawn top to bottom instead of left to right."""


@dataclass
class Layered:
    """A layered layout: each node's (layer, slot); long edges routed through slots of their own."""

    pos: dict[str, tuple[int, int]]
    """(layer, slot) of every node, real and virtual."""
    routes: dict[tuple[str, str], list[str]]
    """(dependency, step) -> the virtual nodes its edge passes, one per layer it skips."""
    layers: int
    slots: int


def layered(nodes: list[str], deps: dict[str, list[str]]) -> Layered:
    """Layers by longest path from the sources; an edge that skips layers gets a virtual node in each.

    Inside a layer, nodes (virtual ones too) are ordered by the mean slot of what feeds them, in one pass
    from the first layer, then each node takes the next free slot at or after its wanted one: a chain
    stays on one line, and since every edge crosses a layer only through its own slot, no edge is drawn
    through a node. O(nodes + edges + skipped layers).
    """
    known = set(nodes)
    layer: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(n: str) -> int:
        if n in layer:
            return layer[n]
        if n in visiting:  # a cycle in a malformed record: cut it
            return 0
        visiting.add(n)
        d = 0
        for p in deps.get(n, []):
            if p in known:
                d = max(d, depth(p) + 1)
        visiting.discard(n)
        layer[n] = d
        return d

    for n in nodes:
        depth(n)
    feeds: dict[str, list[str]] = {n: [] for n in nodes}
    routes: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        for p in dict.fromkeys(deps.get(n, [])):
            if p not in known or p == n or layer[p] >= layer[n]:
                continue
            chain, prev = [], p
            for k in range(layer[p] + 1, layer[n]):
                v = f"\0{p}\0{n}\0{k}"
                layer[v] = k
                feeds[v] = [prev]
                chain.append(v)
                prev = v
            feeds[n].append(prev)
            routes[(p, n)] = chain
    members: dict[int, list[str]] = {}
    for n in [*nodes, *(v for chain in routes.values() for v in chain)]:
        members.setdefault(layer[n], []).append(n)
    slot: dict[str, int] = {}
    for c in sorted(members):
        keyed = []
        for i, n in enumerate(members[c]):
            ps = [slot[p] for p in feeds.get(n, []) if p in slot]
            keyed.append((sum(ps) / len(ps) if ps else i, i, n))
        keyed.sort()
        taken: set[int] = set()
        for want, _, n in keyed:
            s = max(0, round(want))
            while s in taken:
                s += 1
            taken.add(s)
            slot[n] = s
    pos = {n: (layer[n], slot[n]) for n in slot}
    return Layered(
        pos=pos,
        routes=routes,
        layers=max(layer.values(), default=-1) + 1,
        slots=max(slot.values(), default=-1) + 1,
    )


def layout(nodes: list[str], deps: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """(column, row) per real node; `nodes` in record order, `deps` maps a node to nodes it waits on."""
    pos = layered(nodes, deps).pos
    return {n: pos[n] for n in nodes}


def dag_svg(steps: list[dict]) -> str:
    """steps: dicts with id, label, sub, state, href, deps, pseudo_deps.

    Left to right when the layers fit `MAX_DAG_WIDTH`, else top to bottom (layers as rows).
    """
    ids = [s["id"] for s in steps]
    deps = {s["id"]: list(s["deps"]) + list(s["pseudo_deps"]) for s in steps}
    lay = layered(ids, deps)
    if not ids:
        return ""
    across = PAD * 2 + lay.layers * NODE_W + (lay.layers - 1) * GAP_X <= MAX_DAG_WIDTH
    gap_layer, gap_slot = (GAP_X, GAP_Y) if across else (GAP_Y * 3, GAP_X // 2)
    if across:
        width = PAD * 2 + lay.layers * NODE_W + (lay.layers - 1) * gap_layer
        height = PAD * 2 + lay.slots * NODE_H + (lay.slots - 1) * gap_slot
    else:
        width = PAD * 2 + lay.slots * NODE_W + (lay.slots - 1) * gap_slot
        height = PAD * 2 + lay.layers * NODE_H + (lay.layers - 1) * gap_layer

    def xy(n: str) -> tuple[float, float]:
        c, r = lay.pos[n]
        if across:
            return PAD + c * (NODE_W + gap_layer), PAD + r * (NODE_H + gap_slot)
        return PAD + r * (NODE_W + gap_slot), PAD + c * (NODE_H + gap_layer)

    def out_in(n: str) -> tuple[tuple[float, float], tuple[float, float]]:
        """Where an edge leaves `n` and where one enters it."""
        x, y = xy(n)
        if across:
            return (x + NODE_W, y + NODE_H / 2), (x, y + NODE_H / 2)
        return (x + NODE_W / 2, y + NODE_H), (x + NODE_W / 2, y)

    def curve(a: tuple[float, float], b: tuple[float, float]) -> str:
        if across:
            mx = (a[0] + b[0]) / 2
            return f"C{mx:.1f},{a[1]:.1f} {mx:.1f},{b[1]:.1f} {b[0]:.1f},{b[1]:.1f}"
        my = (a[1] + b[1]) / 2
        return f"C{a[0]:.1f},{my:.1f} {b[0]:.1f},{my:.1f} {b[0]:.1f},{b[1]:.1f}"

    edges = []
    for s in steps:
        for kind, targets in (("dep", s["deps"]), ("pseudo", s["pseudo_deps"])):
            for d in targets:
                if (d, s["id"]) not in lay.routes:
                    continue
                start = out_in(d)[0]
                path = [f"M{start[0]:.1f},{start[1]:.1f}"]
                here = start
                for v in lay.routes[(d, s["id"])]:
                    enter, leave = out_in(v)[1], out_in(v)[0]
                    path += [curve(here, enter), f"L{leave[0]:.1f},{leave[1]:.1f}"]
                    here = leave
                end = out_in(s["id"])[1]
                end = (end[0] - 4, end[1]) if across else (end[0], end[1] - 4)
                path.append(curve(here, end))
                edges.append(f'<path class="edge {kind}" d="{" ".join(path)}" marker-end="url(#arr)"/>')
    nodes = []
    for s in steps:
        x, y = xy(s["id"])
        state = s["state"]
        cls = state.lower() if state in STATE_LABEL else "unknown"
        label = s["label"] if len(s["label"]) <= 24 else s["label"][:23] + "…"
        nodes.append(
            f'<a href="{esc(s["href"])}" class="node st-{cls}" data-step="{esc(s["label"])}">'
            f"<title>{esc(s['label'])} ({esc(STATE_LABEL.get(state, state))})</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="7"/>'
            f'<circle cx="{x + 13}" cy="{y + NODE_H / 2}" r="5"/>'
            f'<text x="{x + 25}" y="{y + 17}" class="nl">{esc(label)}</text>'
            f'<text x="{x + 25}" y="{y + 31}" class="ns">{esc(s["sub"])}</text></a>'
        )
    direction = "across" if across else "down"
    return (
        f'<svg class="dag {direction}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="experiment DAG">'
        '<defs><marker id="arr" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow"/></marker></defs>'
        + "".join(edges)
        + "".join(nodes)
        + "</svg>"
    )


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    start = math.ceil(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def fmt_tick(v: float, digits: int = 6) -> str:
    """A tick or hover value: 3 significant digits for very large or small numbers, else `digits`."""
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.{digits}g}"


def thin(points: list[tuple[float, float]], limit: int = 1500) -> list[tuple[float, float]]:
    if len(points) <= limit:
        return points
    k = math.ceil(len(points) / limit)
    out = points[::k]
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def line_plot(
    series: list[tuple[str, list[tuple[float, float]]]],
    x_label: str = "step",
    y_label: str = "",
    width: int = 720,
    height: int = 300,
    css_class: str = "plot",
) -> str:
    series = [(name, thin([(x, y) for x, y in pts if math.isfinite(x) and math.isfinite(y)])) for name, pts in series]
    series = [(n, p) for n, p in series if p]
    if not series:
        return '<div class="note">no finite values to plot</div>'
    xs = [x for _, p in series for x, _ in p]
    ys = [y for _, p in series for _, y in p]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - (abs(y0) * 0.05 or 0.5), y1 + (abs(y1) * 0.05 or 0.5)
    pad_y = (y1 - y0) * 0.05
    y0, y1 = y0 - pad_y, y1 + pad_y
    ml, mr, mt, mb = 64, 16, 28, 40
    pw, ph = width - ml - mr, height - mt - mb

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + ph - (y - y0) / (y1 - y0) * ph

    parts = [
        f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(y_label or "plot")}">',
        f'<rect class="bg" x="{ml}" y="{mt}" width="{pw}" height="{ph}"/>',
    ]
    for t in nice_ticks(y0, y1):
        if y0 <= t <= y1:
            parts.append(f'<line class="grid" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>')
            parts.append(f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{fmt_tick(t)}</text>')
    for t in nice_ticks(x0, x1, 6):
        if x0 <= t <= x1:
            parts.append(f'<line class="grid" y1="{mt}" y2="{mt + ph}" x1="{sx(t):.1f}" x2="{sx(t):.1f}"/>')
            parts.append(
                f'<text class="tick" x="{sx(t):.1f}" y="{mt + ph + 16}" text-anchor="middle">{fmt_tick(t)}</text>'
            )
    parts.append(f'<text class="axis" x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle">{esc(x_label)}</text>')
    if y_label:
        parts.append(f'<text class="axis" x="{ml}" y="{mt - 10}" text-anchor="start">{esc(y_label)}</text>')
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline class="line" data-series="{esc(name)}" fill="none" stroke="{color}" stroke-width="2" points="{d}"/>'
        )
        if len(pts) <= 40:
            parts.extend(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"><title>{esc(name)} @ {fmt_tick(x)}: {fmt_tick(y)}</title></circle>'
                for x, y in pts
            )
        lx = ml + pw - 8
        ly = mt + 14 + 16 * i
        parts.append(f'<text class="legend" x="{lx - 16}" y="{ly + 4}" text-anchor="end">{esc(name)}</text>')
        parts.append(f'<line x1="{lx - 12}" x2="{lx}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/>')
    parts.append("</svg>")
    return "".join(parts)
