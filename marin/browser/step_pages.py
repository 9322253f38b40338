"""The step page, folder listings, file previews and the comparison of two steps.

A step page is built from the step folder alone (`.executor_info`, status, lease, logs,
manifest), falling back to the experiment record's entry (`?exp=`) for a step that has not
started and so has no folder yet. Each section is rendered on its own, so a malformed
file costs that section an error box and nothing else.
"""

from __future__ import annotations

import re
import time
from typing import Any

from marin.browser import previews
from marin.browser.document_pages import search_form, search_results
from marin.browser.documents import DocQuery
from marin.browser.html import (
    error_box,
    esc,
    fmt_duration,
    fmt_size,
    fmt_time,
    json_tree,
    kv_table,
    note,
    page,
    q,
    state_badge,
    table,
    url_exp,
    url_file,
    url_raw,
    url_step,
    url_tree,
)
from marin.browser.lineage import lineage_html
from marin.browser.records import (
    STATES,
    RecordError,
    load_experiment,
    loads,
    read_lease,
    read_related_runs,
    step_timings,
)
from marin.browser.results import forecast_checks
from marin.browser.storage import list_dir
from marin.browser.summaries import CurveOptions, step_summaries
from marin.browser.versions import compare_links
from marin.storage.layout import (
    ATTEMPT_PREFIX,
    HASH_PATTERN,
    INFO_FILE,
    LEASE_FILE,
    LOGS_DIR,
    MANIFEST_FILE,
    STATUS_FILE,
    State,
    info_path,
    logs_dir,
    manifest_path,
    status_path,
)

LOG_TAIL = 64 << 10
OPEN_MAX_FILES = 20
"""The manifest and the folder listing of a step with more files than this start collapsed (a count in the
title): a 100-file manifest open by default would push the rest of the page thousands of pixels down."""
HASHED = HASH_PATTERN


def _section(title: str, render, *args, open_: bool = True, cls: str = "") -> str:
    try:
        body = render(*args)
    except (RecordError, ValueError) as e:
        body = error_box(str(e))
    except FileNotFoundError as e:
        body = error_box(f"missing: {e.filename or e}")
    except Exception as e:  # noqa: BLE001 - a section that fails is shown, never a 500
        body = error_box(f"{type(e).__name__}: {e}")
    if body is None:
        return ""
    return f'<details class="section {cls}"{" open" if open_ else ""}><summary>{esc(title)}</summary>{body}</details>'


def _entries(fs, full: str) -> dict[str, dict]:
    try:
        return {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in list_dir(fs, full)}
    except (FileNotFoundError, NotADirectoryError):
        return {}


def read_step(roots, index: int, rel: str, exp_rel: str | None) -> dict[str, Any]:
    """Everything the step page shows, with per-part errors instead of exceptions."""
    root, rel, full = roots.resolve(index, rel)
    if exp_rel:
        exp_rel = roots.resolve(index, exp_rel)[1]
    files = _entries(root.fs, full)
    st: dict[str, Any] = {"root": root, "rel": rel, "full": full, "files": files, "errors": []}
    info = None
    if INFO_FILE in files:
        try:
            info = loads(root.fs.cat_file(info_path(full)), INFO_FILE)
            if not isinstance(info, dict):
                raise RecordError(f"{INFO_FILE}: expected a JSON object")
        except RecordError as e:
            st["errors"].append(str(e))
            info = None
    exp = None
    if exp_rel:
        try:
            exp = load_experiment(roots, index, exp_rel)
        except FileNotFoundError:
            exp = None
    if info is None and exp and exp.record:
        info = next((s.record for s in exp.steps if s.rel == rel), None)
    st["info"] = info or {}
    st["exp"] = exp
    state = "NOT_STARTED"
    if STATUS_FILE in files:
        token = root.fs.cat_file(status_path(full)).decode("utf-8", "replace").strip()
        state = token if token in STATES else f"UNKNOWN({token[:20]})"
    st["state"] = state
    try:
        st["lease"] = read_lease(root, full) if LEASE_FILE in files else None
    except RecordError as e:
        st["errors"].append(str(e))
        st["lease"] = None
    st["timing"] = {}
    if exp and exp.record:
        runs, _ = read_related_runs(root, root.join(exp.rel))
        st["timing"] = step_timings(runs).get(rel, {})
    if st["timing"].get("duration_s") is None and LOGS_DIR in files:
        st["timing"] = {**st["timing"], **log_timing(root, full, state)}
    st["outputs"] = _outputs(root, rel, full, files, state)
    return st


def _outputs(root, rel: str, full: str, files: dict, state: str) -> tuple[str, str, dict]:
    """(rel, full, entries) of the folder holding the step's own files: while it runs, its latest attempt's
    staging folder (marin.storage.staging), where its metrics grow; otherwise the step folder."""
    attempts = sorted(n for n in files if n.startswith(ATTEMPT_PREFIX))
    if state != "RUNNING" or not attempts:
        return rel, full, files
    return f"{rel}/{attempts[-1]}", f"{full}/{attempts[-1]}", _entries(root.fs, f"{full}/{attempts[-1]}")


_LOG_TIME = re.compile(rb"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[,.](\d+))?")


def log_timing(root, full: str, state: str) -> dict:
    """Start from the first timestamped line of the newest log, end from its last write (when not running)."""
    import datetime as dt

    try:
        logs = [e for e in list_dir(root.fs, logs_dir(full)) if e.get("type") == "file"]
    except FileNotFoundError:
        return {}
    if not logs:
        return {}
    last = max(logs, key=lambda e: e["name"])
    head = root.fs.cat_file(last["name"], start=0, end=200)
    m = _LOG_TIME.match(head)
    if not m:
        return {}
    start = dt.datetime.fromisoformat(m.group(1).decode().replace(" ", "T")).replace(tzinfo=dt.UTC).timestamp()
    start += float("0." + m.group(2).decode()) if m.group(2) else 0.0
    out = {"started": dt.datetime.fromtimestamp(start, dt.UTC).isoformat(), "source": "log"}
    mtime = last.get("mtime")
    if state != State.RUNNING and isinstance(mtime, int | float) and mtime >= start:
        out["duration_s"] = mtime - start
    return out


def step_page(roots, index: int, rel: str, exp_rel: str | None, curves: CurveOptions | None = None) -> str:
    st = read_step(roots, index, rel, exp_rel)
    root, full, files, info, state = st["root"], st["full"], st["files"], st["info"], st["state"]
    if not files and not info:
        raise FileNotFoundError(full)  # neither a folder nor a step of the given record
    name = info.get("name") or rel.rsplit("/", 1)[-1]
    exp = st["exp"]
    crumbs = [("experiments", "/")]
    if exp:
        crumbs.append((exp.name, url_exp(index, exp.rel)))
    crumbs.append((str(name), None))
    lease = st["lease"]
    duration = fmt_duration(st["timing"].get("duration_s"))
    if st["timing"].get("source") == "log" and st["timing"].get("duration_s") is not None:
        duration += ' <span class="muted">(from the log\'s first and last write)</span>'
    if st["timing"].get("error"):
        duration += f' <span class="bad">{esc(st["timing"]["error"])}</span>'
    if state == State.RUNNING and lease and isinstance(lease.get("acquired"), int | float):
        duration = f"running for {fmt_duration(time.time() - lease['acquired'])}"
    fn = str(info.get("fn") or "")
    head_items = [
        ("output", f'<code class="path">{esc(root.display(rel))}</code>'),
        ("hash", f"<code>{esc(info.get('hash'))}</code>"),
        ("function", f"<code>{esc(fn)}</code>"),
        ("config type", f"<code>{esc(info.get('config_type'))}</code>"),
        ("duration", duration),
        ("code fingerprint", f"<code>{esc(str(info.get('code_fingerprint') or '')[:16])}</code>"),
    ]
    if info.get("description"):
        head_items.insert(0, ("description", esc(info["description"])))
    if isinstance(info.get("resources"), dict):
        res = ", ".join(f"{k}={v}" for k, v in info["resources"].items() if v not in (None, {}, 0))
        head_items.append(("resources", esc(res or "default")))
    deps_html = _deps(roots, index, info, exp_rel)
    if deps_html:
        head_items.append(("depends on", deps_html))
    not_started = "" if files else note("This step has not started: its output folder does not exist yet.")
    body = (
        f'<div class="head"><h1>{esc(name)} {state_badge(state)}</h1></div>'
        + "".join(error_box(e) for e in st["errors"])
        + not_started
        + kv_table(head_items)
        + compare_links(roots, index, rel)
        + (_section("Lease", _lease, lease) if lease else "")
        + step_summaries(
            root.fs,
            index,
            *st["outputs"],
            f"{fn} {name}",
            curves,
            forecast_checks(roots, index, rel) if "forecast.json" in st["outputs"][2] else None,
        )
        + _section(
            "Config",
            lambda: json_tree(info.get("config"), open_depth=1) if "config" in info else note("no config recorded"),
        )
        + _section("Version", _version, info, open_=False)
        + (_section("Lineage", lineage_html, roots, index, rel) if info else "")
        + _section("Log", _log, roots, index, rel, files, state, cls="log")
        + (_manifest_section(root, index, rel, full) if MANIFEST_FILE in files else "")
        + (
            _section(f"Folder ({len(files)} entries)", _listing, index, rel, files, open_=len(files) <= OPEN_MAX_FILES)
            if files
            else ""
        )
    )
    return page(str(name), body, crumbs)


def _deps(roots, index: int, info: dict, exp_rel: str | None) -> str:
    prefix = info.get("prefix") if isinstance(info.get("prefix"), str) else None
    if prefix is None and exp_rel:
        return ""
    links = []
    for key in ("dependencies", "pseudo_dependencies"):
        for d in info.get(key) or []:
            if not isinstance(d, str):
                continue
            if prefix and d.startswith(prefix.rstrip("/") + "/"):
                drel = d[len(prefix.rstrip("/")) + 1 :]
                label = drel + (" (nonblocking)" if key == "pseudo_dependencies" else "")
                links.append(f'<a href="{esc(url_step(index, drel, exp=exp_rel))}">{esc(label)}</a>')
            else:
                links.append(f"<code>{esc(d)}</code>")
    return "<br>".join(links)


def _lease(lease: dict) -> str:
    age = lease.get("_age_s")
    items = [
        ("owner", f"<code>{esc(lease.get('owner'))}</code>"),
        ("host / pid", f"{esc(lease.get('host'))} / {esc(lease.get('pid'))}"),
        ("acquired", fmt_time(lease.get("acquired"))),
        ("heartbeat", fmt_time(lease.get("heartbeat")) + (f" ({fmt_duration(age)} ago)" if age is not None else "")),
    ]
    if lease.get("_stale"):
        items.append(
            ("", '<span class="bad">stale: no heartbeat for over 60 s; another runner may take it over</span>')
        )
    return kv_table(items)


def _version(info: dict) -> str:
    return kv_table([("hash", f"<code>{esc(info.get('hash'))}</code>")]) + json_tree(info.get("version"), open_depth=3)


def _log(roots, index: int, rel: str, files: dict, state: str) -> str:
    root = roots.get(index)
    if LOGS_DIR not in files:
        return note("no log yet")
    logs = sorted(
        (e for e in list_dir(root.fs, logs_dir(root.join(rel))) if e.get("type") == "file"),
        key=lambda e: e["name"],
    )
    if not logs:
        return note("no log yet")
    last = logs[-1]
    log_name = last["name"].rsplit("/", 1)[-1]
    log_rel = f"{logs_dir(rel)}/{log_name}"
    size = last.get("size") or 0
    start = max(0, size - LOG_TAIL)
    text = root.fs.cat_file(root.join(log_rel), start=start, end=size).decode("utf-8", "replace") if size else ""
    attempts = " ".join(
        f'<a href="{esc(url_file(index, f"{logs_dir(rel)}/" + e["name"].rsplit("/", 1)[-1]))}">'
        f"{esc(e['name'].rsplit('/', 1)[-1])}</a> ({fmt_size(e.get('size'))})"
        for e in logs
    )
    follow = state == State.RUNNING
    head = (
        f'<div class="toolbar"><span>attempt <b>{esc(log_name)}</b>, {fmt_size(size)}'
        + (f", last {fmt_size(LOG_TAIL)} shown" if start else "")
        + f'</span><span class="muted">all attempts: {attempts}</span>'
        + ('<label class="follow"><input type="checkbox" checked data-follow> follow</label>' if follow else "")
        + "</div>"
    )
    return head + (
        f'<pre class="log" data-log-url="/api/log/{index}/{esc(q(log_rel))}" data-offset="{size}" '
        f'data-follow="{"1" if follow else "0"}">{esc(text)}</pre>'
    )


def _manifest_section(root, index: int, rel: str, full: str) -> str:
    """The manifest, open when it lists at most OPEN_MAX_FILES files."""
    try:
        data = loads(root.fs.cat_file(manifest_path(full)), MANIFEST_FILE)
        count = len(data["files"]) if isinstance(data, dict) and isinstance(data.get("files"), list) else None
    except (RecordError, OSError):
        count = None
    title = "Manifest" if count is None else f"Manifest ({count} files)"
    return _section(title, _manifest, root, index, rel, full, open_=count is None or count <= OPEN_MAX_FILES)


def _manifest(root, index: int, rel: str, full: str) -> str:
    data = loads(root.fs.cat_file(manifest_path(full)), MANIFEST_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise RecordError(f"{MANIFEST_FILE}: field 'files' is missing or not a list")
    rows = []
    for f in data["files"][:2000]:
        if not isinstance(f, dict):
            continue
        p = str(f.get("path", ""))
        digest = str(f.get("sha256", ""))
        rows.append(
            [
                f'<a href="{esc(url_file(index, f"{rel}/{p}"))}">{esc(p)}</a>',
                (fmt_size(f.get("size")), f.get("size") or 0),
                f'<code title="{esc(digest)}">{esc(digest[:16])}</code>',
            ]
        )
    more = note(f"{len(data['files']) - 2000} more files not shown") if len(data["files"]) > 2000 else ""
    return (
        f'<div class="muted">{len(data["files"])} files, {fmt_size(data.get("total_size"))}</div>'
        + table(["path", "size", "sha256"], rows, cls="data manifest")
        + more
    )


def _listing(index: int, rel: str, files: dict) -> str:
    return listing_table(index, rel, list(files.values()))


def listing_table(index: int, rel: str, entries: list[dict], limit: int = 2000) -> str:
    entries = sorted(entries, key=lambda e: (e.get("type") != "directory", e["name"]))
    rows = []
    for e in entries[:limit]:
        name = e["name"].rstrip("/").rsplit("/", 1)[-1]
        child = f"{rel}/{name}" if rel else name
        if e.get("type") == "directory":
            rows.append(
                [(f'<a class="dir" href="{esc(url_tree(index, child))}">{esc(name)}/</a>', "0" + name), ("", -1), ""]
            )
        else:
            mod = e.get("mtime") or e.get("updated") or e.get("LastModified")
            rows.append(
                [
                    (f'<a class="file" href="{esc(url_file(index, child))}">{esc(name)}</a>', "1" + name),
                    (fmt_size(e.get("size")), e.get("size") or 0),
                    fmt_time(mod if isinstance(mod, int | float | str) else str(mod) if mod else None),
                ]
            )
    more = note(f"{len(entries) - limit} more entries not shown") if len(entries) > limit else ""
    return table(["name", "size", "modified"], rows, cls="data listing") + more


def tree_page(roots, index: int, rel: str) -> str:
    root, rel, full = roots.resolve(index, rel)
    entries = list_dir(root.fs, full)
    names = {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries}
    crumbs = [("experiments", "/"), (root.url, url_tree(index, ""))]
    acc = ""
    for part in rel.split("/") if rel else []:
        acc = f"{acc}/{part}" if acc else part
        crumbs.append((part, url_tree(index, acc)))
    step_link = (
        f'<div class="links">This is a step folder: <a href="{esc(url_step(index, rel))}">open the step page</a></div>'
        if INFO_FILE in names or STATUS_FILE in names
        else ""
    )
    body = f'<h1 class="path">{esc(root.display(rel))}</h1>' + step_link + listing_table(index, rel, entries)
    return page(rel or root.url, body, crumbs)


def file_page(roots, index: int, rel: str, offset: int, n: int, query: DocQuery | str | None = None) -> str:
    root, rel, full = roots.resolve(index, rel)
    info = root.fs.info(full)
    size = info.get("size") or 0
    name = rel.rsplit("/", 1)[-1]
    crumbs = [("experiments", "/"), (root.url, url_tree(index, ""))]
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    acc = ""
    for part in parent.split("/") if parent else []:
        acc = f"{acc}/{part}" if acc else part
        crumbs.append((part, url_tree(index, acc)))
    crumbs.append((name, None))
    kind = previews.kind_of(name)
    try:
        if kind == "jsonl":
            body = search_form(index, rel, query if isinstance(query, DocQuery) else DocQuery())
            if isinstance(query, str):
                body += error_box(query)
            elif query is not None and query.active:
                body += search_results(root.fs, index, rel, full, query, offset, n)
            else:
                body += previews.jsonl_preview(root.fs, index, rel, full, offset, n)
        elif kind == "parquet":
            body = previews.parquet_preview(root.fs, index, rel, full, offset, n)
        elif kind == "json":
            body = previews.json_preview(root.fs, full, size)
        elif kind == "image":
            body = previews.image_preview(index, rel)
        elif kind == "text":
            body = previews.text_preview(root.fs, full, size, offset, index, rel)
        else:
            body = previews.binary_preview(root.fs, full, size)
    except Exception as e:  # noqa: BLE001 - a file that cannot be previewed says why
        body = error_box(
            f"{name}: cannot preview as {kind} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        )
    head = (
        f'<div class="head"><h1 class="path">{esc(name)}</h1>'
        f'<div class="muted"><code>{esc(root.display(rel))}</code> · {fmt_size(size)} · {esc(kind)} · '
        f'<a href="{esc(url_raw(index, rel))}">raw</a></div></div>'
    )
    return page(name, head + f'<div class="preview {esc(kind)}">{body}</div>', crumbs)
