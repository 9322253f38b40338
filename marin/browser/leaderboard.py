"""The leaderboard: every evaluated run under the roots, ranked by its result against what it cost.

Marin's speedrun leaderboard plots bits-per-byte against training FLOPs; a run is worth looking at when no
cheaper run did better, so the page draws the Pareto frontier (the runs that no run with less or equal
compute beats) and marks its rows. The x axis can be FLOPs, tokens or parameters and the metric bpb or
loss, chosen in the query (`?x=tokens&metric=macro_loss`). Each row and each point links to the
experiment page of the run's newest record; harness task scores, when an evaluation has them, get a
column each. A run whose forecast was checked (a forecast check step's `check.json` names its evaluation)
is marked with the forecast's error, and whether the measurement fell in the interval.
"""

from __future__ import annotations

import json
import posixpath
import time

from marin.browser.charts import Chart, fmt_value, pareto_front
from marin.browser.html import error_box, esc, fmt_num, fmt_time, note, page, table, url_exp, url_step
from marin.browser.records import list_experiments
from marin.browser.results import METRICS, X_AXES, collect_results
from marin.browser.runs_table import _config, differing_fields, lab_cell
from marin.browser.storage import read_many
from marin.storage.layout import State


def _trained_config(r) -> dict:
    """The flattened config of the training an evaluation read (its first dependency), else the evaluation's own."""
    for step in r.experiment.steps:
        if step.rel == r.trained_by:
            return _config(step)
    return _config(r.step)


def _tell_apart(ranked: list) -> dict[int, str]:
    """For evaluations that share a step name: the hyperparameters (of what they evaluated) that differ."""
    by_name: dict[str, list] = {}
    for r in ranked:
        by_name.setdefault(r.step.name, []).append(r)
    out: dict[int, str] = {}
    for group in by_name.values():
        if len({r.step.hash for r in group}) < 2:
            continue
        configs = [_trained_config(r) for r in group]
        keys = differing_fields(configs)
        for r, config in zip(group, configs, strict=True):
            out[id(r)] = ", ".join(f"{k}={fmt_num(config.get(k, '∅'))}" for k in keys[:4])
    return out


def forecast_checks(roots, experiments) -> dict[tuple[int, str], dict]:
    """(root, evaluation step folder) -> the `check.json` of a forecast check of that evaluation."""
    wanted = {
        (exp.root_index, step.rel)
        for exp in experiments
        for step in exp.steps
        if step.state == State.SUCCESS and "forecast_check" in str(step.record.get("fn") or "")
    }
    out: dict[tuple[int, str], dict] = {}
    for index, root in enumerate(roots):
        rels = sorted(rel for i, rel in wanted if i == index)
        blobs = read_many(root.fs, [f"{root.join(rel)}/check.json" for rel in rels])
        for rel in rels:
            data = blobs.get(f"{root.join(rel)}/check.json")
            try:
                check = json.loads(data) if isinstance(data, bytes | bytearray) else None
            except ValueError:
                continue
            evaluation = check.get("evaluation_output") if isinstance(check, dict) else None
            if isinstance(evaluation, str) and not evaluation.startswith(("/", "gs://", "s3://")):
                out[(index, posixpath.normpath(posixpath.join(rel, evaluation)))] = check
    return out


def _check_cell(check: dict | None) -> tuple[str, float]:
    """The forecast error of an evaluation a forecast check read; a dash where none did."""
    if not check or not isinstance(check.get("error"), int | float):
        return '<span class="muted" title="no forecast check read this evaluation">—</span>', -1.0
    rel = check.get("relative_error")
    inside = check.get("within_interval")
    mark = "✓" if inside else ("✗" if inside is False else "")
    title = f"forecast {check.get('forecast')}, measured {check.get('measured')}, interval {check.get('interval')}" + (
        "" if check.get("preregistered") else " (not shown to precede the run)"
    )
    text = f"{mark} {check['error']:+.3f}" + (f" ({100 * rel:+.1f}%)" if isinstance(rel, int | float) else "")
    return f'<span class="forecast-checked" title="{esc(title)}">{esc(text)}</span>', abs(float(check["error"]))


def _choice(value: str | None, options: dict[str, str], default: str, what: str, errors: list[str]) -> str:
    if value is None or value == "":
        return default
    if value not in options:
        errors.append(f"unknown {what} {value!r}: one of {', '.join(options)}")
        return default
    return value


def _chooser(name: str, options: dict[str, str], chosen: str) -> str:
    opts = "".join(
        f'<option value="{esc(k)}"{" selected" if k == chosen else ""}>{esc(v)}</option>' for k, v in options.items()
    )
    return f'<label class="muted">{esc(name)} <select name="{esc(name)}">{opts}</select></label>'


def leaderboard_page(roots, x: str | None = None, metric: str | None = None) -> str:
    t0 = time.perf_counter()
    errors: list[str] = []
    x = _choice(x, X_AXES, "flops", "x", errors)
    metric = _choice(metric, METRICS, "macro_bpb", "metric", errors)
    experiments, list_errors = list_experiments(roots)
    results, read_errors = collect_results(roots, experiments)
    errors += list_errors + read_errors
    checks = forecast_checks(roots, experiments)
    ranked = [r for r in results if r.metrics.get(metric) is not None]
    ranked.sort(key=lambda r: (r.metrics[metric], r.x(x) or 0.0, r.experiment.name))
    placed = [r for r in ranked if r.x(x) is not None and r.x(x) > 0]
    front = {id(placed[i]) for i in pareto_front([(r.x(x), r.metrics[metric]) for r in placed])}
    tasks = sorted({t for r in ranked for t in r.tasks})

    chart = Chart(x_label=X_AXES[x], y_label=METRICS[metric], log_x=True, css_class="plot leaderboard-plot", height=440)
    others = [r for r in placed if id(r) not in front]
    best = sorted((r for r in placed if id(r) in front), key=lambda r: r.x(x))
    for name, group, css in (("runs", others, "run"), ("Pareto frontier", best, "frontier")):
        chart.points(
            name,
            [(r.x(x), r.metrics[metric]) for r in group],
            hrefs=[url_exp(r.experiment.root_index, r.experiment.rel) for r in group],
            titles=[f"{r.experiment.name} · {r.step.name} @ {fmt_value(r.x(x))}" for r in group],
            css=css,
            color="#94a3b8" if css == "run" else "#dc2626",
        )
    if len(best) > 1:
        stairs = []
        for i, r in enumerate(best):
            stairs.append((r.x(x), r.metrics[metric]))
            if i + 1 < len(best):
                stairs.append((best[i + 1].x(x), r.metrics[metric]))
        chart.line("frontier", stairs, dashed=True, css="frontier-line", color="#dc2626", legend=False)

    apart = _tell_apart(ranked)
    rows = []
    for rank, r in enumerate(ranked, 1):
        exp = r.experiment
        on_front = id(r) in front
        created = (exp.record or {}).get("created") or ""
        rows.append(
            [
                (str(rank), rank),
                ('<span class="frontier" title="on the Pareto frontier">★</span>' if on_front else "", int(on_front)),
                (
                    f'<a class="exp-link" href="{esc(url_exp(exp.root_index, exp.rel))}">{esc(exp.name)}</a>',
                    exp.name,
                ),
                *([lab_cell(roots, exp.root_index)] if len(roots) > 1 else []),
                (
                    f'<a href="{esc(url_step(exp.root_index, r.step.rel, exp=exp.rel))}">{esc(r.step.name)}</a>'
                    f' <code class="hash">{esc(r.step.hash)}</code>'
                    + (f'<div class="sub differs">{esc(apart[id(r)])}</div>' if apart.get(id(r)) else ""),
                    r.step.name,
                ),
                (f"{r.metrics[metric]:.4f}", r.metrics[metric]),
                (fmt_value(r.flops) if r.flops else "—", r.flops or 0),
                (fmt_value(r.tokens) if r.tokens else "—", r.tokens or 0),
                (fmt_value(r.parameters) if r.parameters else "—", r.parameters or 0),
                *[(fmt_num(r.tasks[t]) if t in r.tasks else "—", r.tasks.get(t, -1)) for t in tasks],
                _check_cell(checks.get((exp.root_index, r.step.rel))),
                (fmt_time(created), created if isinstance(created, str) else ""),
            ]
        )
    headers = [
        "#",
        "",
        "experiment",
        *(["lab"] if len(roots) > 1 else []),
        "evaluation",
        METRICS[metric],
        "FLOPs (6·N·D)",
        "tokens",
        "parameters",
        *tasks,
        "forecast error",
        "created",
    ]
    form = (
        '<form class="toolbar" method="get" action="/leaderboard">'
        + _chooser("x", X_AXES, x)
        + _chooser("metric", METRICS, metric)
        + '<button type="submit">show</button>'
        + '<input type="search" class="search" data-table="board" placeholder="Filter runs…">'
        + '<span class="muted count" data-count-for="board"></span></form>'
    )
    body = (
        f'<div class="head"><h1>Leaderboard</h1><div class="muted">{len(ranked)} evaluated runs, ranked by '
        f"{esc(METRICS[metric])}; ★ on the Pareto frontier of {esc(X_AXES[x])}</div></div>"
        + "".join(error_box(e) for e in errors[:20])
        + form
        + (chart.render() if placed else note("no evaluated run has a positive " + X_AXES[x]))
        + (table(headers, rows, cls="data board", tid="board") if rows else note("no evaluation results yet"))
        + f'<footer class="muted">rendered in {1000 * (time.perf_counter() - t0):.0f} ms</footer>'
    )
    return page("Leaderboard", body, [("experiments", "/"), ("leaderboard", None)])
