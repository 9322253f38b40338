"""The experiments list and the experiment page (the DAG, the step table, runs, environment).

Both pages read each experiment's record once (cached by size and modification stamp),
and every step's `.executor_status` fresh (one batched read per root), so a page over
1,000 experiments or a 1,000-step experiment stays well under a second on local storage.
"""

from __future__ import annotations

import json
import time

from marin.browser.costs import experiment_costs
from marin.browser.html import (
    STATE_LABEL,
    error_box,
    esc,
    fmt_duration,
    fmt_time,
    kv_table,
    page,
    state_badge,
    table,
    url_exp,
    url_file,
    url_step,
    url_tree,
)
from marin.browser.records import (
    STATES,
    list_experiments,
    load_experiment,
    read_lease,
    read_related_runs,
    read_runs,
    step_timings,
)
from marin.browser.results import Headline, headlines, is_training
from marin.browser.runs_table import _config, differing_fields, lab_cell
from marin.browser.storage import read_many
from marin.browser.svg import dag_svg
from marin.storage.layout import STEP_FOLDER_IN_PATH, State, runs_file


def state_bar(counts: dict[str, int]) -> str:
    total = sum(counts.values()) or 1
    segs = "".join(
        f'<span class="seg st-{s.lower()}" style="flex:{counts[s]}" title="{counts[s]} {STATE_LABEL[s]}"></span>'
        for s in STATES
        if counts.get(s)
    )
    labels = " ".join(
        f'<span class="cnt st-{s.lower()}" title="{STATE_LABEL[s]}">{counts[s]}</span>' for s in STATES if counts.get(s)
    )
    return f'<div class="statebar" data-total="{total}"><div class="bar">{segs}</div><div class="cnts">{labels}</div></div>'


def counts_of(steps) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in steps:
        key = s.state if s.state in STATES else State.FAILED
        counts[key] = counts.get(key, 0) + 1
    return counts


def autorefresh(running: bool) -> str:
    checked = " checked" if running else ""
    return (
        f'<label class="autorefresh muted" title="reload every 15 s"><input type="checkbox" data-autorefresh="15"{checked}> '
        "auto-refresh</label>"
    )


def git_cell(git) -> tuple[str, str]:
    if not isinstance(git, dict) or not git.get("commit"):
        return '<span class="muted">—</span>', ""
    commit = str(git["commit"])
    dirty = ' <span class="dirty" title="uncommitted changes">dirty</span>' if git.get("dirty") else ""
    return f'<code title="{esc(commit)}">{esc(commit[:10])}</code>{dirty}', commit


def headline_cell(h: Headline | None) -> tuple[str, float]:
    """The best evaluation's bpb (and loss), else the last training loss; task scores below; sorts by bpb/loss."""
    if h is None:
        return '<span class="muted">—</span>', 1e9
    parts, key = [], 1e9
    if h.bpb is not None:
        parts.append(f'<span class="metric" title="bits per byte, macro average">{h.bpb:.4f} bpb</span>')
        key = h.bpb
    if h.loss is not None:
        parts.append(f'<span class="metric" title="evaluation loss, nats per token">{h.loss:.4f} loss</span>')
        key = key if h.bpb is not None else h.loss
    if h.train_loss is not None and h.bpb is None and h.loss is None:
        parts.append(f'<span class="metric" title="last logged training loss">train loss {h.train_loss:.4f}</span>')
        key = h.train_loss
    if h.tasks:
        shown = ", ".join(f"{esc(t)} {v:.3f}" for t, v in sorted(h.tasks.items())[:4])
        parts.append(f'<div class="sub">{shown}</div>')
    return ("<br>".join(parts) or '<span class="muted">—</span>'), key


_STEP_FOLDER = STEP_FOLDER_IN_PATH
DIFFERS_SHOWN = 3
"""The experiment list names this many differing settings of a version (all of them on hover)."""


def _settings(exp) -> dict[str, object]:
    """A record's settings, `step name: field` -> value, without paths to step folders (they differ whenever
    an upstream step does, which its own settings already say) and each step's own output folder."""
    out: dict[str, object] = {}
    for step in exp.steps:
        for field, value in _config(step).items():
            if isinstance(value, str) and _STEP_FOLDER.search(value):
                continue
            out[f"{step.name}: {field}"] = value
    return out


def version_differences(versions: list) -> dict[str, tuple[str, str]]:
    """Record path -> (short, full) text of the settings in which this version differs from the other versions
    of its name (`train/mix: lr=0.01, mixture.weights.web=0.5`), compared over the steps every version has;
    a step only some versions have is named with + (this version has it) or − (this one lacks it)."""
    steps = [{s.name for s in e.steps} for e in versions]
    common, every = set.intersection(*steps), set.union(*steps)
    settings = [{k: v for k, v in _settings(e).items() if k.split(": ", 1)[0] in common} for e in versions]
    keys = differing_fields(settings)
    out: dict[str, tuple[str, str]] = {}
    for e, flat, names in zip(versions, settings, steps, strict=True):
        parts: dict[str, list[str]] = {}
        for key in keys:
            step, field = key.split(": ", 1)
            if step in names:
                parts.setdefault(step, []).append(f"{field}={fmt_value_short(flat.get(key, '∅'))}")
        extra = [f"+{n}" for n in sorted(names - common)] + [f"−{n}" for n in sorted(every - names)]
        items = [f"{step}: {', '.join(fields)}" for step, fields in parts.items()] + extra
        flat_items = [field for fields in parts.values() for field in fields] + extra
        if not items:
            continue
        short = ", ".join(flat_items[:DIFFERS_SHOWN]) + (
            f" (+{len(flat_items) - DIFFERS_SHOWN} more)" if len(flat_items) > DIFFERS_SHOWN else ""
        )
        out[e.rel] = (short, "; ".join(items))
    return out


def fmt_value_short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "…"


def experiments_page(roots) -> str:
    t0 = time.perf_counter()
    exps, errors = list_experiments(roots)
    exps.sort(key=lambda e: str((e.record or {}).get("created") or ""), reverse=True)
    heads = headlines(roots, exps)
    # A version is a record (its file name holds the hash of the DAG): the same record in two labs is one
    # version, shown once per lab.
    versions: dict[str, list[str]] = {}
    labs_of: dict[str, list[int]] = {}
    for e in sorted(exps, key=lambda e: str((e.record or {}).get("created") or "")):
        if e.rel not in versions.setdefault(e.name, []):
            versions[e.name].append(e.rel)
        labs_of.setdefault(e.rel, []).append(e.root_index)
    multi = len(roots) > 1
    by_rel = {e.rel: e for e in exps}
    differs: dict[str, tuple[str, str]] = {}
    for rels in versions.values():
        if len(rels) > 1:
            differs.update(version_differences([by_rel[r] for r in rels]))
    rows = []
    for e in exps:
        r = e.record or {}
        counts = counts_of(e.steps)
        link = f'<a class="exp-link" href="{esc(url_exp(e.root_index, e.rel))}">{esc(e.name)}</a>'
        same = versions.get(e.name, [e.rel])
        version = (
            f' <span class="version" title="distinct records (DAGs) of this experiment name, oldest first">'
            f"version {same.index(e.rel) + 1} of {len(same)}</span>"
            if len(same) > 1
            else ""
        )
        if e.rel in differs:
            short, full = differs[e.rel]
            version += f'<div class="differs" title="{esc(full)}">{esc(short)}</div>'

        others = [roots.label(i) for i in labs_of.get(e.rel, []) if i != e.root_index] if multi else []
        also = (
            f' <span class="also-in" title="the same record (same steps, same hashes) under other roots">also in '
            f"{esc(', '.join(others))}</span>"
            if others
            else ""
        )
        sub = f'<div class="sub"><code>{esc(e.rel.removeprefix("experiments/"))}</code>{version}{also}</div>'
        lab = [lab_cell(roots, e.root_index)] if multi else []
        if e.error:
            rows.append(
                [
                    (link + sub, e.name),
                    *lab,
                    f'<span class="bad">{esc(e.error)}</span>',
                    ("—", ""),
                    "",
                    ("", ""),
                    ("", -1),
                    ("", 1e9),
                ]
            )
            continue
        created = r.get("created") if isinstance(r.get("created"), str) else ""
        failed = counts.get(State.FAILED, 0) + counts.get(State.DEP_FAILED, 0)
        rows.append(
            [
                (link + sub, e.name),
                *lab,
                esc(r.get("description") or ""),
                (fmt_time(created), created),
                esc(r.get("user") or ""),
                git_cell(r.get("git")),
                (state_bar(counts), f"{failed:06d}{counts.get('RUNNING', 0):06d}{len(e.steps):06d}"),
                headline_cell(heads.get((e.root_index, e.rel))),
            ]
        )
    headers = ["experiment", *(["lab"] if multi else []), "description", "created", "user", "git commit", "steps"]
    headers.append("result")
    root_list = ", ".join(f"<code>{esc(r.url)}</code>" for r in roots)
    body = (
        f'<div class="head"><h1>Experiments</h1><div class="muted">{len(exps)} records under {root_list}, newest '
        'first · <a href="/leaderboard">leaderboard</a> · <a href="/runs">runs table</a></div></div>'
        + "".join(error_box(m) for m in errors)
        + '<div class="toolbar"><input type="search" class="search" data-table="exps" '
        'placeholder="Search name, description, user, commit…" autofocus>'
        '<span class="muted count" data-count-for="exps"></span>'
        + autorefresh(any(s.state == State.RUNNING for e in exps for s in e.steps))
        + "</div>"
        + table(headers, rows, cls="data exps", tid="exps")
        + f'<footer class="muted">rendered in {1000 * (time.perf_counter() - t0):.0f} ms</footer>'
    )
    return page("Experiments", body)


def experiment_page(roots, index: int, rel: str) -> str:
    t0 = time.perf_counter()
    exp = load_experiment(roots, index, rel)
    root, _, full = roots.resolve(index, rel)
    crumbs = [("experiments", "/"), (exp.name, None)]
    if exp.error:
        body = f"<h1>{esc(exp.name)}</h1>" + error_box(exp.error) + _raw_links(index, rel)
        return page(exp.name, body, crumbs)
    rec = exp.record or {}
    runs, runs_error = read_runs(root, full)
    timings = step_timings(read_related_runs(root, full)[0])
    leases = {}
    for s in exp.steps:
        if s.state == State.RUNNING:
            try:
                leases[s.rel] = read_lease(root, root.join(s.rel))
            except Exception:  # noqa: BLE001 - a bad lease only loses the "running for" figure
                leases[s.rel] = None
    counts = counts_of(exp.steps)
    nodes = [
        {
            "id": s.rel,
            "label": s.name,
            "hash": s.hash,
            "sub": f"{s.hash} · {STATE_LABEL.get(s.state, s.state)}",
            "state": s.state,
            "href": url_step(index, s.rel, exp=rel),
            "deps": s.deps,
            "pseudo_deps": s.pseudo_deps,
        }
        for s in exp.steps
    ]
    step_rows = []
    for s in exp.steps:
        t = timings.get(s.rel, {})
        dur = t.get("duration_s")
        dur_html = fmt_duration(dur)
        lease = leases.get(s.rel)
        if s.state == State.RUNNING and lease and isinstance(lease.get("acquired"), int | float):
            dur = time.time() - lease["acquired"]
            dur_html = f"running {fmt_duration(dur)}" + (
                ' <span class="bad">stale lease</span>' if lease.get("_stale") else ""
            )
        step_rows.append(
            [
                (state_badge(s.state), s.state),
                (f'<a class="step-link" href="{esc(url_step(index, s.rel, exp=rel))}">{esc(s.name)}</a>', s.name),
                f"<code>{esc(s.hash)}</code>",
                (dur_html, dur if isinstance(dur, int | float) else -1),
                (fmt_time(t.get("started")), t.get("started") or ""),
                f'<span title="{esc(t.get("error") or "")}">{esc(t.get("outcome") or "")}</span>',
                f'<a class="path" href="{esc(url_tree(index, s.rel))}">{esc(root.display(s.rel))}</a>',
            ]
        )
    git_html, _ = git_cell(rec.get("git"))
    cmd = rec.get("command")
    info = [
        ("script", f"<code>{esc(rec.get('script'))}</code>"),
        ("created", fmt_time(rec.get("created"))),
        ("user / host", f"{esc(rec.get('user'))} @ {esc(rec.get('host'))}"),
        ("git commit", git_html),
        ("command", f"<code>{esc(' '.join(map(str, cmd)) if isinstance(cmd, list) else cmd)}</code>"),
        ("written under", f"<code>{esc(rec.get('prefix'))}</code>"),
        ("record hash", f"<code>{esc(rec.get('hash'))}</code>"),
    ]
    badges = " ".join(f"{state_badge(st)} {counts[st]}" for st in STATES if counts.get(st))
    body = (
        f'<div class="head"><h1>{esc(exp.name)}</h1><div class="desc">{esc(rec.get("description") or "")}</div>'
        f'<div class="badges">{badges}</div></div>'
        + kv_table(info)
        + _raw_links(index, rel)
        + f'<h2>DAG <span class="muted">{len(exp.steps)} steps</span></h2><div class="dagbox">{dag_svg(nodes)}</div>'
        + '<h2>Steps</h2><div class="toolbar"><input type="search" class="search" data-table="steps" placeholder="Filter steps…">'
        + '<span class="muted count" data-count-for="steps"></span>'
        + autorefresh(counts.get(State.RUNNING, 0) > 0)
        + "</div>"
        + table(
            ["state", "step", "hash", "duration", "started", "last outcome", "output"],
            step_rows,
            cls="data steps",
            tid="steps",
        )
        + experiment_costs(root, index, rel, exp.steps)
        + _runs_section(runs, runs_error)
        + _environment_section(rec.get("environment"), where_it_ran(root, rec, exp.steps))
        + f'<footer class="muted">rendered in {1000 * (time.perf_counter() - t0):.0f} ms</footer>'
    )
    return page(exp.name, body, crumbs)


def _raw_links(index: int, rel: str) -> str:
    runs = runs_file(rel)
    return (
        f'<div class="links"><a href="{esc(url_file(index, rel))}">record JSON</a> · '
        f'<a href="{esc(url_file(index, runs))}">runs.jsonl</a></div>'
    )


def _runs_section(runs: list[dict], runs_error: str | None) -> str:
    out = "<h2>Runs</h2>" + (error_box(runs_error) if runs_error else "")
    if not runs:
        return out + '<div class="note">no runs recorded yet</div>'
    rows = []
    for run in reversed(runs[-200:]):
        steps = run.get("steps") if isinstance(run.get("steps"), dict) else {}
        outcomes: dict[str, int] = {}
        for entry in steps.values():
            if isinstance(entry, dict):
                o = str(entry.get("outcome"))
                outcomes[o] = outcomes.get(o, 0) + 1
        git_html, _ = git_cell(run.get("git"))
        rows.append(
            [
                (fmt_time(run.get("started")), run.get("started") or ""),
                fmt_time(run.get("ended")),
                esc(f"{run.get('user')} @ {run.get('host')}"),
                git_html,
                "dry run" if run.get("dry_run") else "",
                ", ".join(f"{esc(k.lower())} {v}" for k, v in sorted(outcomes.items())),
            ]
        )
    return out + table(["started", "ended", "who", "commit", "", "outcomes"], rows, cls="data runs")


def _asked(resources) -> str:
    """What a step's resources ask for beyond CPUs ('' for nothing): `gpu=1`, `tpu=v5e-8`, `H100`."""
    if not isinstance(resources, dict):
        return ""
    parts = [f"{k}={resources[k]}" for k in ("gpu", "tpu") if resources.get(k)]
    if resources.get("accelerator_type"):
        parts.append(str(resources["accelerator_type"]))
    return " ".join(parts)


def where_it_ran(root, rec: dict, steps) -> str:
    """The environment's accelerator row: the accelerator of the machine the script ran on (none: CPU only), the
    devices each finished train step trained on (its `train_info.json`), and the accelerators steps asked for."""
    env = rec.get("environment") if isinstance(rec.get("environment"), dict) else {}
    here = env.get("accelerator") or "none (CPU only)"
    lines = [f"{esc(here)} on <code>{esc(rec.get('host'))}</code>, where the script ran"]
    trained = [s for s in steps if s.state == State.SUCCESS and is_training(s)]
    paths = {s.rel: root.join(f"{s.rel}/train_info.json") for s in trained}
    blobs = read_many(root.fs, list(paths.values()))
    devices: dict[str, list[str]] = {}
    for s in trained:
        blob = blobs.get(paths[s.rel])
        try:
            info = json.loads(blob) if isinstance(blob, bytes | bytearray) else None
        except ValueError:
            continue
        if isinstance(info, dict) and info.get("device_kind"):
            devices.setdefault(f"{info.get('device_count') or 1} × {info['device_kind']}", []).append(s.name)
    for device, names in devices.items():
        lines.append(f"{esc(', '.join(dict.fromkeys(names)))} trained on {esc(device)} (train_info.json)")
    asked: dict[str, list[str]] = {}
    for s in steps:
        want = _asked(s.record.get("resources"))
        if want:
            asked.setdefault(want, []).append(s.name)
    for want, names in asked.items():
        lines.append(f"{esc(', '.join(dict.fromkeys(names)))} asked for {esc(want)}")
    if len(lines) == 1 and not trained:
        lines.append('<span class="muted">no step asked for an accelerator</span>')
    return "<br>".join(lines)


def _environment_section(env, accelerator: str = "") -> str:
    if not isinstance(env, dict):
        return ""
    packages = env.get("packages") if isinstance(env.get("packages"), dict) else {}
    items = []
    for k, v in env.items():
        if k == "packages":
            continue
        if k == "accelerator" and accelerator:
            items.append((k, f'<div class="where-ran">{accelerator}</div>'))
            continue
        if isinstance(v, list) and len(v) > 12:
            items.append(
                (k, f"<details><summary>{len(v)} items</summary><code>{esc(' '.join(map(str, v)))}</code></details>")
            )
        else:
            items.append((k, f"<code>{esc(' '.join(map(str, v)) if isinstance(v, list) else v)}</code>"))
    pkg_rows = [[esc(k), f"<code>{esc(v)}</code>"] for k, v in sorted(packages.items())]
    pk = ""
    if pkg_rows:
        pk = (
            f'<details class="section"><summary>{len(pkg_rows)} packages</summary>'
            '<div class="toolbar"><input type="search" class="search" data-table="pkgs" placeholder="Filter packages…"></div>'
            + table(["package", "version"], pkg_rows, cls="data pkgs", tid="pkgs")
            + "</details>"
        )
    return "<h2>Environment</h2>" + kv_table(items) + pk


def dumps(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
