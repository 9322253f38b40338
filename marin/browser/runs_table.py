"""The runs table: every training run of one step name under the roots, its hyperparameters and its results.

A sweep is a set of versions of one train step (`train/tiny-<hash>` for several learning rates, say). The
compare page shows two of them; this page shows all of them as rows, with a column for each config field
that differs between them (the fields every run shares are listed once above the table), the run's last
training loss, and the figures of the evaluations that read its checkpoints (an evaluation step whose
record depends on the train step's folder). The table sorts by any column and filters by text, like the
other tables. Which step name to show is chosen in the query (`?step=train/tiny`); by default the name with
the most runs.
"""

from __future__ import annotations

import time
from urllib.parse import urlencode

from marin.browser.html import (
    error_box,
    esc,
    flatten,
    fmt_num,
    fmt_time,
    kv_table,
    note,
    page,
    state_badge,
    table,
    url_exp,
    url_step,
)
from marin.browser.records import list_experiments
from marin.browser.results import _last_loss, _read_results, is_evaluation, is_training, task_scores
from marin.storage.layout import State

HIDDEN_FIELDS = ("output_path",)
"""Config fields that differ between every two runs by construction, so say nothing about the run."""


def _created(exp) -> str:
    created = (exp.record or {}).get("created")
    return created if isinstance(created, str) else ""


def _config(step) -> dict:
    config = step.record.get("config")
    flat = flatten(config) if isinstance(config, dict) else {}
    return {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] not in HIDDEN_FIELDS}


def runs_page(roots, step_name: str | None = None) -> str:
    t0 = time.perf_counter()
    experiments, errors = list_experiments(roots)
    runs: dict[tuple[int, str], tuple] = {}
    evaluations: dict[tuple[int, str], list] = {}
    for exp in sorted(experiments, key=_created):
        for step in exp.steps:
            if is_training(step) and step.state in (State.SUCCESS, State.RUNNING, State.FAILED):
                runs[(exp.root_index, step.rel)] = (exp, step)
            elif is_evaluation(step) and step.state == State.SUCCESS:
                for dep in step.deps:
                    evaluations.setdefault((exp.root_index, dep), []).append((exp, step))
    names: dict[str, int] = {}
    for _, step in runs.values():
        names[step.name] = names.get(step.name, 0) + 1
    if not names:
        body = "<h1>Runs</h1>" + "".join(error_box(e) for e in errors) + note("no training runs under these roots")
        return page("Runs", body, [("experiments", "/"), ("runs", None)])
    chosen = step_name if step_name in names else max(sorted(names), key=lambda n: names[n])
    if step_name and step_name not in names:
        errors.append(f"no training runs named {step_name!r}; showing {chosen!r}")
    mine = sorted(((k, v) for k, v in runs.items() if v[1].name == chosen), key=lambda kv: _created(kv[1][0]))
    configs = [_config(step) for _, (_, step) in mine]
    keys = sorted({k for c in configs for k in c})
    differing = differing_fields(configs)
    shared = [(k, fmt_num(configs[0].get(k))) for k in keys if k not in differing]
    evals = [pair for (index, rel), _ in mine for pair in evaluations.get((index, rel), [])]
    found, read_errors = _read_results(roots, evals)
    errors += read_errors
    rows = []
    for ((index, rel), (exp, step)), config in zip(mine, configs, strict=True):
        root = roots.get(index)
        loss = _last_loss(root, f"{root.join(rel)}/metrics.jsonl")
        bpb = eval_loss = None
        tasks: dict[str, float] = {}
        for e_exp, e_step in evaluations.get((index, rel), []):
            results = found.get((e_exp.root_index, e_step.rel)) or {}
            value = results.get("macro_bpb")
            if isinstance(value, int | float) and (bpb is None or value < bpb):
                bpb, eval_loss = float(value), results.get("macro_loss")
            tasks.update(task_scores(results))
        rows.append(
            [
                (
                    f'<input type="checkbox" name="a" value="{esc(rel)}" data-root="{index}" '
                    f'aria-label="select {esc(step.hash)} to compare">',
                    "",
                ),
                (state_badge(step.state), step.state),
                (f'<a href="{esc(url_exp(index, exp.rel))}">{esc(exp.name)}</a>', exp.name),
                *([lab_cell(roots, index)] if len(roots) > 1 else []),
                (f'<a href="{esc(url_step(index, rel, exp=exp.rel))}"><code>{esc(step.hash)}</code></a>', step.hash),
                *[(fmt_num(config.get(k, "∅")), _sort_key(config.get(k))) for k in differing],
                (f"{loss:.4f}" if loss is not None else "—", loss if loss is not None else 1e9),
                (f"{bpb:.4f}" if bpb is not None else "—", bpb if bpb is not None else 1e9),
                (f"{eval_loss:.4f}" if isinstance(eval_loss, int | float) else "—", eval_loss or 1e9),
                (esc(", ".join(f"{t} {v:.3f}" for t, v in sorted(tasks.items()))) or "—", ""),
                (fmt_time(_created(exp)), _created(exp)),
            ]
        )
    lab = ["lab"] if len(roots) > 1 else []
    headers = [
        "",
        "state",
        "experiment",
        *lab,
        "version",
        *differing,
        "train loss",
        "eval bpb",
        "eval loss",
        "tasks",
        "created",
    ]
    options = "".join(
        f'<option value="{esc(n)}"{" selected" if n == chosen else ""}>{esc(n)} ({names[n]})</option>'
        for n in sorted(names)
    )
    body = (
        f'<div class="head"><h1>Runs of <code>{esc(chosen)}</code></h1><div class="muted">{len(rows)} runs; '
        f"{len(differing)} config fields differ between them</div></div>"
        + "".join(error_box(e) for e in errors[:20])
        + '<form class="toolbar" method="get" action="/runs"><label class="muted">step <select name="step">'
        + options
        + '</select></label><button type="submit">show</button>'
        + '<input type="search" class="search" data-table="runs" placeholder="Filter runs…">'
        + '<span class="muted count" data-count-for="runs"></span></form>'
        + f'<form class="compare-selected" method="get" action="/compare/{mine[0][0][0]}" data-compare>'
        + '<div class="toolbar"><button type="submit" class="btn">compare selected</button>'
        + '<span class="muted compare-msg">tick two runs</span></div>'
        + table(headers, rows, cls="data runs-table", tid="runs")
        + "</form>"
        + (
            f'<details class="section"><summary>{len(shared)} fields every run shares</summary>{kv_table(shared)}</details>'
            if shared
            else ""
        )
        + f'<footer class="muted">rendered in {1000 * (time.perf_counter() - t0):.0f} ms · '
        f'<a href="/runs?{esc(urlencode({"step": chosen}))}">link to this table</a></footer>'
    )
    return page(f"Runs of {chosen}", body, [("experiments", "/"), ("runs", None)])


def lab_cell(roots, index: int) -> tuple[str, str]:
    """The lab (root) a row comes from: its short label, the full URL on hover."""
    label = roots.label(index)
    return f'<span class="lab" title="{esc(roots.get(index).url)}">{esc(label)}</span>', label


def differing_fields(configs: list[dict]) -> list[str]:
    """The flattened config fields whose values are not the same in every config."""
    keys = sorted({k for c in configs for k in c})
    return [k for k in keys if len({repr(c.get(k, "∅")) for c in configs}) > 1]


def _sort_key(value):
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return "" if value is None else str(value)
