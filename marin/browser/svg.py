"""Server-side SVG: the experiment DAG and line plots (loss curves), no JavaScript library.

The DAG is laid out by Graphviz's `dot` (Debian's `graphviz`, installed by
`make browser-deps`): layered ranks, few crossings, splines routed around the nodes. Both
orientations are laid out and the one that fits the page's DAG box at the larger scale is drawn,
each node as wide as its label, labels made distinct (`distinct_labels`). Where `dot` is missing (or
fails, or the DAG is too large for it to be quick) the page is still served, laid out by this
module's own layering:

The fallback DAG is laid out in layers by longest path from the sources (a step sits one layer after
its deepest dependency); an edge that skips layers passes through a slot of its own in each
(a virtual node), so no edge is drawn through a step; slots inside a layer follow the mean slot
of what feeds them, which keeps chains straight and costs O(steps + edges + skipped layers): a
1,000-step experiment lays out in milliseconds. Layers run left to right when they fit the
page's width and top to bottom otherwise. Plots pick "nice" ticks and thin long series to at
most ~1,500 points per line, keeping the last point.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import subprocess
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


DAG_BOX_W, DAG_BOX_H = 1340, 540
"""The experiment page's DAG box at a 1,400 px window: the orientation that fits it at the larger scale is drawn.
The height is fitted here (scaled down to MIN_DAG_SCALE); the width by the page (CSS `max-width: 100%`, never
below MIN_DAG_SCALE), so a wide window draws a wide DAG at full size."""
MIN_DAG_SCALE = 0.7
"""Below this the text gets too small to read: a larger DAG is drawn at this scale and the box scrolls."""
DOT_MAX_NODES = 600
"""Larger DAGs are laid out by `layered` (milliseconds) instead of Graphviz (seconds)."""
DOT_TIMEOUT_S = 15.0
MAX_LABEL = 44
"""A node's label longer than this (after common-prefix elision) is cut in the middle."""
LABEL_CHAR_W, SUB_CHAR_W = 7.9, 6.4
"""Estimated widths of a character of a node's name (12.5 px bold) and of its hash line (10.5 px mono)."""


@dataclass
class Placed:
    """A drawn DAG's geometry in pixels: node boxes (top-left x, y, w, h) and edges as cubic Béziers."""

    boxes: dict[str, tuple[float, float, float, float]]
    edges: dict[tuple[str, str], list[tuple[float, float]]]
    """(dependency, step) -> p0, then three points per cubic segment (SVG's M p0 C p1 p2 p3 ...)."""
    width: float
    height: float
    direction: str
    """'across' (left to right) or 'down' (top to bottom)."""
    engine: str
    """'dot' (Graphviz) or 'layered' (this module's own, when dot is missing or the DAG is large)."""


def _cut_to_separator(prefix: str) -> str:
    """`prefix` shortened to end just after its last '/', '-', '_' or '.', so elision never splits a word."""
    i = max(prefix.rfind(c) for c in "/-_.")
    return prefix[: i + 1] if i >= 0 else ""


def distinct_labels(names: list[str], hashes: list[str]) -> list[str]:
    """Labels that tell the nodes apart and fit a box: the shared prefix of long names of one group (same
    first folder) elided to '…', a name given twice suffixed with its hash, an overlong rest cut in the
    middle. Full names stay in each node's tooltip."""
    labels = list(names)
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(n.split("/", 1)[0], []).append(i)
    for head, members in groups.items():
        distinct = sorted({names[i] for i in members})
        if len(distinct) < 2 or max(len(n) for n in distinct) <= MAX_LABEL - 12:
            continue
        common = _cut_to_separator(os.path.commonprefix(distinct))
        lead = head + "/" if "/" in distinct[0] else ""
        if len(common) - len(lead) >= 8:
            for i in members:
                labels[i] = lead + "…" + names[i][len(common) :]
    for i, label in enumerate(labels):
        if len(label) > MAX_LABEL:
            keep = MAX_LABEL - 1
            labels[i] = label[: keep // 2] + "…" + label[-(keep - keep // 2) :]
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [f"{label} @{h}" if seen[label] > 1 and h else label for label, h in zip(labels, hashes, strict=True)]


def node_width(label: str, sub: str) -> int:
    return int(34 + max(len(label) * LABEL_CHAR_W, len(sub) * SUB_CHAR_W, 80))


def dot_available() -> bool:
    return shutil.which("dot") is not None


@functools.lru_cache(maxsize=64)
def dot_layout(ids: tuple[str, ...], edges: tuple[tuple[str, str], ...], widths: tuple[int, ...], rankdir: str):
    """Graphviz `dot`'s layout (its `-Tplain` output) as a `Placed`, or None when dot is missing or fails."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    index = {n: i for i, n in enumerate(ids)}
    lines = [
        f"digraph G {{ graph [rankdir={rankdir}, nodesep=0.22, ranksep=0.42, splines=spline, margin=0];",
        'node [shape=box, fixedsize=true, label=""]; edge [arrowhead=none];',
    ]
    lines += [f"n{i} [width={w / 72:.3f}, height={NODE_H / 72:.3f}];" for i, w in enumerate(widths)]
    lines += [f"n{index[a]} -> n{index[b]};" for a, b in edges]
    lines.append("}")
    try:
        out = subprocess.run(
            [exe, "-Tplain"], input="\n".join(lines), capture_output=True, text=True, timeout=DOT_TIMEOUT_S, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    boxes: dict[str, tuple[float, float, float, float]] = {}
    routes: dict[tuple[str, str], list[tuple[float, float]]] = {}
    height = 0.0
    width = 0.0
    for line in out.splitlines():
        f = line.split()
        if f[:1] == ["graph"]:
            width, height = float(f[2]) * 72, float(f[3]) * 72
        elif f[:1] == ["node"]:
            n = ids[int(f[1][1:])]
            cx, cy, w, h = (float(v) * 72 for v in f[2:6])
            boxes[n] = (PAD + cx - w / 2, PAD + height - cy - h / 2, w, h)
        elif f[:1] == ["edge"]:
            k = int(f[3])
            pts = [(PAD + float(f[4 + 2 * j]) * 72, PAD + height - float(f[5 + 2 * j]) * 72) for j in range(k)]
            routes[(ids[int(f[1][1:])], ids[int(f[2][1:])])] = pts
    if len(boxes) != len(ids):
        return None
    return Placed(boxes, routes, width + 2 * PAD, height + 2 * PAD, "across" if rankdir == "LR" else "down", "dot")


def _layered_placed(ids: list[str], deps: dict[str, list[str]], node_w: int) -> Placed:
    """`layered` as pixels: left to right when the layers fit MAX_DAG_WIDTH, else top to bottom."""
    lay = layered(ids, deps)
    across = PAD * 2 + lay.layers * node_w + (lay.layers - 1) * GAP_X <= MAX_DAG_WIDTH
    gap_layer, gap_slot = (GAP_X, GAP_Y) if across else (GAP_Y * 3, GAP_X // 2)
    if across:
        width = PAD * 2 + lay.layers * node_w + (lay.layers - 1) * gap_layer
        height = PAD * 2 + lay.slots * NODE_H + (lay.slots - 1) * gap_slot
    else:
        width = PAD * 2 + lay.slots * node_w + (lay.slots - 1) * gap_slot
        height = PAD * 2 + lay.layers * NODE_H + (lay.layers - 1) * gap_layer

    def xy(n: str) -> tuple[float, float]:
        c, r = lay.pos[n]
        if across:
            return PAD + c * (node_w + gap_layer), PAD + r * (NODE_H + gap_slot)
        return PAD + r * (node_w + gap_slot), PAD + c * (NODE_H + gap_layer)

    def out_in(n: str) -> tuple[tuple[float, float], tuple[float, float]]:
        x, y = xy(n)
        if across:
            return (x + node_w, y + NODE_H / 2), (x, y + NODE_H / 2)
        return (x + node_w / 2, y + NODE_H), (x + node_w / 2, y)

    def curve(a: tuple[float, float], b: tuple[float, float]) -> list[tuple[float, float]]:
        if across:
            mx = (a[0] + b[0]) / 2
            return [(mx, a[1]), (mx, b[1]), b]
        my = (a[1] + b[1]) / 2
        return [(a[0], my), (b[0], my), b]

    edges = {}
    for (d, n), chain in lay.routes.items():
        here = out_in(d)[0]
        pts = [here]
        for v in chain:
            enter, leave = out_in(v)[1], out_in(v)[0]
            pts += curve(here, enter) + [enter, leave, leave]
            here = leave
        pts += curve(here, out_in(n)[1])
        edges[(d, n)] = pts
    boxes = {n: (*xy(n), node_w, NODE_H) for n in ids}
    return Placed(boxes, edges, width, height, "across" if across else "down", "layered")


def place_dag(ids: list[str], deps: dict[str, list[str]], widths: list[int]) -> Placed:
    """Graphviz `dot` left to right or top to bottom, whichever fits the DAG box at the larger scale;
    this module's `layered` when dot is missing, fails, or the DAG has more than DOT_MAX_NODES steps."""
    known = set(ids)
    edges = tuple(dict.fromkeys((d, n) for n in ids for d in deps.get(n, []) if d in known and d != n))
    tried = []
    if len(ids) <= DOT_MAX_NODES:
        for rankdir in ("LR", "TB"):
            placed = dot_layout(tuple(ids), edges, tuple(widths), rankdir)
            if placed is not None:
                tried.append(placed)
    if not tried:
        return _layered_placed(ids, deps, max(widths, default=NODE_W))
    return max(tried, key=lambda p: (min(1.0, DAG_BOX_W / p.width, DAG_BOX_H / p.height), p.direction == "across"))


def _pt(p: tuple[float, float]) -> str:
    return f"{p[0]:.1f},{p[1]:.1f}"


def dag_svg(steps: list[dict]) -> str:
    """steps: dicts with id, label, sub, state, href, deps, pseudo_deps (and optionally hash).

    Laid out by `place_dag`, scaled to fit the DAG box when that keeps the text readable.
    """
    if not steps:
        return ""
    ids = [s["id"] for s in steps]
    deps = {s["id"]: list(s["deps"]) + list(s["pseudo_deps"]) for s in steps}
    labels = distinct_labels([s["label"] for s in steps], [s.get("hash") or "" for s in steps])
    widths = [node_width(label, s["sub"]) for label, s in zip(labels, steps, strict=True)]
    placed = place_dag(ids, deps, widths)
    scale = max(MIN_DAG_SCALE, min(1.0, DAG_BOX_H / placed.height))
    edges = []
    for s in steps:
        for kind, targets in (("dep", s["deps"]), ("pseudo", s["pseudo_deps"])):
            for d in dict.fromkeys(targets):
                pts = placed.edges.get((d, s["id"]))
                if not pts:
                    continue
                d_attr = f"M{_pt(pts[0])} " + " ".join(
                    "C" + " ".join(_pt(p) for p in pts[i : i + 3]) for i in range(1, len(pts) - 2, 3)
                )
                edges.append(f'<path class="edge {kind}" d="{d_attr}" marker-end="url(#arr)"/>')
    nodes = []
    for s, label in zip(steps, labels, strict=True):
        x, y, w, h = placed.boxes[s["id"]]
        state = s["state"]
        cls = state.lower() if state in STATE_LABEL else "unknown"
        nodes.append(
            f'<a href="{esc(s["href"])}" class="node st-{cls}" data-step="{esc(s["label"])}">'
            f"<title>{esc(s['label'])} ({esc(STATE_LABEL.get(state, state))})</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{round(w)}" height="{round(h)}" rx="7"/>'
            f'<circle cx="{x + 13:.1f}" cy="{y + h / 2:.1f}" r="5"/>'
            f'<text x="{x + 25:.1f}" y="{y + 17:.1f}" class="nl">{esc(label)}</text>'
            f'<text x="{x + 25:.1f}" y="{y + 31:.1f}" class="ns">{esc(s["sub"])}</text></a>'
        )
    vw, vh = math.ceil(placed.width), math.ceil(placed.height)
    return (
        f'<svg class="dag {placed.direction}" data-engine="{placed.engine}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{math.floor(vw * scale)}" height="{math.floor(vh * scale)}" '
        f'style="max-width: 100%; min-width: {math.floor(vw * MIN_DAG_SCALE)}px; height: auto" '
        f'viewBox="0 0 {vw} {vh}" role="img" aria-label="experiment DAG">'
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
    count = math.floor((hi - start) / step + 1e-9) + 1
    if not 0 < count <= 1000:  # a span below float resolution (start + step == start) has no ticks to draw
        return []
    return list(dict.fromkeys(round(start + k * step, 12) for k in range(count)))


def fmt_tick(v: float, digits: int = 6) -> str:
    """A tick or hover value: 3 significant digits for very large or small numbers, else `digits`."""
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return compact_exponent(f"{v:.3g}")
    return compact_exponent(f"{v:.{digits}g}")


def compact_exponent(text: str) -> str:
    """`1e+09` as `1e9`, `2.5e-05` as `2.5e-5`: how a researcher writes a power of ten on an axis."""
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


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
