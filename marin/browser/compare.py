"""Two versions of one step side by side: config differences, loss curves overlaid, results.

Versions of a step are the sibling folders `<name>-<hash8>` in the same parent folder, so
the comparison needs no experiment record: any two runs of `train/tiny` with different
versioned configs are found from either one's step page (`versions.compare_links`).
"""

from __future__ import annotations

import json

from marin.browser.charts import Chart, SeriesStyle
from marin.browser.html import error_box, esc, flatten, fmt_duration, fmt_num, page, state_badge, table, url_step
from marin.browser.runs_table import HIDDEN_FIELDS
from marin.browser.step_pages import read_step
from marin.browser.summaries import grid, is_eval, metric_series, read_metrics, results_table, series_key


def compare_page(roots, index: int, a: str, b: str) -> str:
    roots.resolve(index, a), roots.resolve(index, b)  # refuse either before reading anything

    sa, sb = read_step(roots, index, a, None), read_step(roots, index, b, None)
    na, nb = sa["info"].get("name") or a, sb["info"].get("name") or b
    crumbs = [("experiments", "/"), (f"compare {na}", None)]
    warn = "" if na == nb else error_box(f"these steps have different names: {na} vs {nb}")
    ha, hb = sa["info"].get("hash") or a.rsplit("-", 1)[-1], sb["info"].get("hash") or b.rsplit("-", 1)[-1]
    head = table(
        ["", f"A · {ha}", f"B · {hb}"],
        [
            [
                "step",
                f'<a href="{esc(url_step(index, sa["rel"]))}">{esc(sa["rel"])}</a>',
                f'<a href="{esc(url_step(index, sb["rel"]))}">{esc(sb["rel"])}</a>',
            ],
            ["state", state_badge(sa["state"]), state_badge(sb["state"])],
            ["duration", fmt_duration(sa["timing"].get("duration_s")), fmt_duration(sb["timing"].get("duration_s"))],
        ],
        cls="data",
        sortable=False,
    )
    fa, fb = _shown(sa["info"].get("config")), _shown(sb["info"].get("config"))
    hidden = sorted(
        {
            k
            for k in (*flatten(sa["info"].get("config") or {}), *flatten(sb["info"].get("config") or {}))
            if k not in fa and k not in fb
        }
    )
    rows = []
    ndiff = 0
    for k in sorted(set(fa) | set(fb)):
        va, vb = fa.get(k, "∅"), fb.get(k, "∅")
        differs = va != vb
        ndiff += differs
        cls = "diff" if differs else "same"
        rows.append(
            [
                f'<span class="{cls}">{esc(k)}</span>',
                f'<span class="{cls}">{fmt_num(va)}</span>',
                f'<span class="{cls}">{fmt_num(vb)}</span>',
            ]
        )
    left_out = (
        f'<div class="muted hidden-fields">left out: {esc(", ".join(hidden))} (each version\'s own folder, '
        "different by construction)</div>"
        if hidden
        else ""
    )
    config = (
        f'<h2>Config <span class="muted">{ndiff} of {len(rows)} fields differ</span></h2>'
        '<label class="muted"><input type="checkbox" data-only-diff="cfgdiff" checked> only differences</label>'
        + table(["field", f"A · {ha}", f"B · {hb}"], rows, cls="data cfgdiff only-diff", tid="cfgdiff", sortable=False)
        + left_out
    )
    metrics = ""
    columns = []
    for st in (sa, sb):
        _, outputs_full, outputs = st["outputs"]
        entry = outputs.get("metrics.jsonl")
        mrows = read_metrics(st["root"].fs, outputs_full + "/metrics.jsonl", entry.get("size") or 0)[0] if entry else []
        columns.append(metric_series(mrows, lambda key: "loss" in key.lower() or "bpb" in key.lower()))
    keys = {k for c in columns for k in c}
    style = SeriesStyle(
        sorted({series_key(k) for k in keys if not is_eval(k)}) + sorted({series_key(k) for k in keys if is_eval(k)})
    )
    charts = []
    for unit, css in (("loss", "loss-curve"), ("bpb", "bpb-curve")):
        chart = Chart(
            x_label="step",
            y_label="loss" if unit == "loss" else "bits per byte",
            css_class=f"plot {css} compare",
            width=640,
        )
        for label, series in zip(("A", "B"), columns, strict=True):
            for k, pts in sorted(series.items()):
                if ("bpb" in k.lower()) != (unit == "bpb"):
                    continue
                key = series_key(k)
                if is_eval(k):
                    chart.points(
                        f"{label}: {k} (in-training eval)",
                        pts,
                        css=f"eval run-{label}",
                        color=style.color(key),
                        shape=style.shape(key),
                        hollow=label == "B",
                    )
                else:
                    chart.line(
                        f"{label}: {k}", pts, dashed=label == "B", css=f"train run-{label}", color=style.color(key)
                    )
        if chart.series:
            charts.append(chart.render())
    if charts:
        metrics = (
            "<h2>Metrics</h2>"
            '<div class="muted">one colour and marker shape per series, the same in both runs: A solid lines and '
            "filled markers, B dashed lines and open markers</div>" + grid(charts)
        )
    results = ""
    if "results.json" in sa["files"] or "results.json" in sb["files"]:
        cols = []
        for st in (sa, sb):
            try:
                cols.append(results_table(json.loads(st["root"].fs.cat_file(st["full"] + "/results.json"))))
            except Exception as e:  # noqa: BLE001
                cols.append(error_box(f"results.json: {type(e).__name__}"))
        results = f'<h2>Results</h2><div class="cols"><div>{cols[0]}</div><div>{cols[1]}</div></div>'
    body = f"<h1>Compare <code>{esc(na)}</code></h1>" + warn + head + config + metrics + results
    return page(f"compare {na}", body, crumbs)


def _shown(config) -> dict:
    """The flattened config without the fields every version has its own value of (its output folder)."""
    flat = flatten(config) if isinstance(config, dict) else {}
    return {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] not in HIDDEN_FIELDS}
