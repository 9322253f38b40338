"""Small HTML building blocks: escaping, the page shell, tables, JSON trees, formatting.

Pages are built from Python strings rather than a template engine so that every value
passes through `esc` at one visible place and the browser has no dependency beyond
starlette. URLs for pages are built here too (`url_step`, `url_file`, ...), so the routes
and the links cannot drift apart.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any
from urllib.parse import quote, urlencode

from marin.storage.layout import State

STATE_LABEL = {
    State.SUCCESS: "success",
    State.RUNNING: "running",
    State.FAILED: "failed",
    State.DEP_FAILED: "dep failed",
    "NOT_STARTED": "not started",
}


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def q(path: str) -> str:
    return quote(path, safe="/")


def url_exp(root: int, rel: str) -> str:
    return f"/exp/{root}/{q(rel)}"


def url_step(root: int, rel: str, exp: str | None = None) -> str:
    return f"/step/{root}/{q(rel)}" + (f"?{urlencode({'exp': exp})}" if exp else "")


def url_file(root: int, rel: str, **params: Any) -> str:
    params = {k: v for k, v in params.items() if v is not None}
    return f"/file/{root}/{q(rel)}" + (f"?{urlencode(params)}" if params else "")


def url_raw(root: int, rel: str) -> str:
    return f"/raw/{root}/{q(rel)}"


def url_tree(root: int, rel: str) -> str:
    return f"/tree/{root}/{q(rel)}"


def state_badge(state: str, extra: str = "") -> str:
    cls = state.lower() if state in STATE_LABEL else "unknown"
    return f'<span class="badge st-{cls}">{esc(STATE_LABEL.get(state, state))}{esc(extra)}</span>'


def error_box(message: str) -> str:
    return f'<div class="error" role="alert"><b>Error:</b> {esc(message)}</div>'


def note(message: str) -> str:
    return f'<div class="note">{esc(message)}</div>'


def fmt_size(n: Any) -> str:
    if not isinstance(n, int | float):
        return "—"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_duration(s: Any) -> str:
    if not isinstance(s, int | float):
        return "—"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"


def fmt_num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return esc(v)
    if isinstance(v, int):
        return f"{v:,}"
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
        return f"{v:.4g}"
    return f"{v:.4f}".rstrip("0").rstrip(".")


def fmt_time(value: Any) -> str:
    """An ISO string or unix seconds, shown as UTC to the minute (full value in the title)."""
    if isinstance(value, int | float):
        t = dt.datetime.fromtimestamp(value, tz=dt.UTC)
        return f'<time title="{esc(t.isoformat())}">{t:%Y-%m-%d %H:%M:%S}</time>'
    if isinstance(value, str) and value:
        short = value.replace("T", " ").removesuffix("Z")[:19]
        return f'<time title="{esc(value)}">{esc(short)}</time>'
    return "—"


def table(headers: list[str], rows: list[list[str]], cls: str = "", sortable: bool = True, tid: str = "") -> str:
    """Rows are lists of already-escaped HTML cells; a cell may be (html, sort_value)."""
    th = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for c in row:
            if isinstance(c, tuple):
                cells.append(f'<td data-v="{esc(c[1])}">{c[0]}</td>')
            else:
                cells.append(f"<td>{c}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    attrs = f' class="{cls}{" sortable" if sortable else ""}"' + (f' id="{tid}"' if tid else "")
    return f"<table{attrs}><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def kv_table(items: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in items)
    return f'<table class="kv">{rows}</table>'


def json_tree(value: Any, open_depth: int = 1, _depth: int = 0, _key: str | None = None) -> str:
    """Collapsible JSON: objects and lists as <details>, open down to `open_depth`."""
    label = f'<span class="k">{esc(_key)}</span>: ' if _key is not None else ""
    inline = _inline(value)
    if inline is not None:
        return f'<span class="leaf inline">{label}{inline}</span>'
    if isinstance(value, dict) and value:
        inner = "".join(f"<li>{json_tree(v, open_depth, _depth + 1, str(k))}</li>" for k, v in value.items())
        opened = " open" if _depth < open_depth else ""
        return (
            f'<details class="jt"{opened}><summary>{label}<span class="t">{{{len(value)}}}</span></summary>'
            f"<ul>{inner}</ul></details>"
        )
    if isinstance(value, list) and value:
        inner = "".join(f"<li>{json_tree(v, open_depth, _depth + 1, str(i))}</li>" for i, v in enumerate(value))
        opened = " open" if _depth < open_depth else ""
        return (
            f'<details class="jt"{opened}><summary>{label}<span class="t">[{len(value)}]</span></summary>'
            f"<ul>{inner}</ul></details>"
        )
    return f'<span class="leaf">{label}{json_scalar(value)}</span>'


INLINE_MAX_ITEMS, INLINE_MAX_CHARS = 8, 90
"""A dict or list of at most this many scalars, this short when written out, is shown on one line, open."""


def _inline(value: Any) -> str | None:
    """`{code: 0.3, web: 0.7}` for a small dict (or list) of scalars, so a mixture's weights read at a glance
    instead of hiding behind a collapsed `{2}`; None for anything larger or nested."""
    if isinstance(value, dict) and value:
        items = list(value.items())
    elif isinstance(value, list) and value:
        items = [(None, v) for v in value]
    else:
        return None
    if len(items) > INLINE_MAX_ITEMS or any(isinstance(v, dict | list) for _, v in items):
        return None
    text = ", ".join(f"{k}: {json.dumps(v)}" if k is not None else json.dumps(v) for k, v in items)
    if len(text) > INLINE_MAX_CHARS:
        return None
    inner = ", ".join(
        (f'<span class="k">{esc(k)}</span>: ' if k is not None else "") + json_scalar(v) for k, v in items
    )
    return f"{{{inner}}}" if isinstance(value, dict) else f"[{inner}]"


def json_scalar(v: Any) -> str:
    if isinstance(v, str):
        return f'<span class="s">{esc(json.dumps(v, ensure_ascii=False))}</span>'
    if v is None or isinstance(v, bool):
        return f'<span class="b">{esc(json.dumps(v))}</span>'
    if isinstance(v, int | float):
        return f'<span class="n">{esc(v)}</span>'
    return f'<span class="s">{esc(json.dumps(v, ensure_ascii=False))}</span>'


def flatten(value: Any, prefix: str = "", out: dict | None = None) -> dict[str, Any]:
    """Nested dicts as {"a.b.c": leaf}; lists are leaves."""
    out = {} if out is None else out
    if isinstance(value, dict) and value:
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix or "(value)"] = value
    return out


def page(title: str, body: str, crumbs: list[tuple[str, str | None]] | None = None, refresh: bool = False) -> str:
    nav = ""
    if crumbs:
        parts = []
        for label, href in crumbs:
            parts.append(f'<a href="{esc(href)}">{esc(label)}</a>' if href else f"<span>{esc(label)}</span>")
        nav = '<nav class="crumbs">' + '<span class="sep">/</span>'.join(parts) + "</nav>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} · marin</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
</head><body>
<header class="top"><a class="brand" href="/">marin<span>browse</span></a>{nav}<nav class="views">\
<a href="/">experiments</a><a href="/leaderboard">leaderboard</a><a href="/runs">runs</a></nav></header>
<main>{body}</main>
<script src="/static/app.js"></script>
</body></html>"""
