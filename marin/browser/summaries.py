"""Per-kind summaries on a step page, recognised by the files a step leaves.

The step library writes a few well-known files (issues 4 and 5): `provenance.json`
(download: source, revision, files), `stats.json` (filter, dedup, tokenize counts),
`metrics.jsonl` (train: step, loss, lr, tokens, throughput), `results.json` (evaluate) and
`forecast.json` / `forecast.png` (scaling ladder). The browser recognises them by name
rather than by the step's function, so a new step kind that writes one of them gets its
summary for free, and a file it cannot read shows an error box instead of breaking the page.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from marin.browser.charts import Chart, SeriesStyle, ema
from marin.browser.costs import cost_summary
from marin.browser.html import error_box, esc, flatten, fmt_num, fmt_size, kv_table, note, table, url_file, url_raw
from marin.browser.ladder import check_lines, ladder_summary
from marin.storage.layout import INFO_FILE

SMALL_MAX = 4 << 20
METRICS_MAX = 32 << 20


def _load_json(fs, path: str, size: int, name: str) -> Any:
    if size > SMALL_MAX:
        raise ValueError(f"{name}: {fmt_size(size)} is too large to summarise")
    try:
        return json.loads(fs.cat_file(path))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{name}: not valid JSON ({e})") from None


def read_metrics(fs, path: str, size: int) -> tuple[list[dict], str | None]:
    """Lines of metrics.jsonl that are JSON objects (the last METRICS_MAX bytes when larger)."""
    start = max(0, size - METRICS_MAX)
    data = fs.cat_file(path, start=start, end=size) if size else b""
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]
    rows, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            rows.append(obj)
        else:
            bad += 1
    return rows, (f"metrics.jsonl: {bad} line(s) are not JSON objects and were skipped" if bad else None)


def _x_of(row: dict, i: int) -> float:
    for key in ("step", "global_step", "_step", "iteration"):
        if isinstance(row.get(key), int | float):
            return float(row[key])
    return float(i)


def metric_series(rows: list[dict], want) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    for i, row in enumerate(rows):
        x = _x_of(row, i)
        for k, v in flatten(row).items():
            if want(k) and isinstance(v, int | float) and not isinstance(v, bool):
                series.setdefault(k, []).append((x, float(v)))
    return series


def _is_loss(k: str) -> bool:
    return "loss" in k.lower()


def _is_bpb(k: str) -> bool:
    return "bpb" in k.lower()


def is_eval(k: str) -> bool:
    low = k.lower()
    return low.startswith("eval") or "/eval" in low or "eval_" in low or "eval/" in low


def _is_throughput(k: str) -> bool:
    return k == "tokens_per_second" or k.endswith("/tokens_per_second")


def _is_grad_norm(k: str) -> bool:
    low = k.lower()
    return "grad_norm" in low or "grad/norm" in low or "gradient_norm" in low


def _is_mfu(k: str) -> bool:
    return "mfu" in k.lower()


def _is_lr(k: str) -> bool:
    low = k.lower()
    return low == "lr" or low.endswith("/lr") or "learning_rate" in low


CHART_W = 640
"""A train page's charts are drawn two to a row (`div.chart-grid`), each this wide in SVG units."""

X_CHOICES = {"step": "step", "tokens": "tokens seen", "flops": "training FLOPs (6·N·tokens)"}
SMOOTH_CHOICES = (0.0, 0.6, 0.9, 0.97)


@dataclass(frozen=True)
class CurveOptions:
    """How a step page draws its training curves; from the page's query (`?x=tokens&smooth=0.9`)."""

    x: str = "step"
    """step | tokens | flops."""
    smooth: float = 0.0
    """EMA weight applied to training curves (evaluation points are never smoothed)."""
    loglog: bool = False
    """A forecast's chart on log-log axes (`?loglog=1`)."""
    log_y: bool = False
    """Loss, bits per byte, learning rate and throughput on log y axes (`?logy=1`)."""

    @staticmethod
    def from_query(
        x: str | None, smooth: str | None, loglog: str | None = None, logy: str | None = None
    ) -> CurveOptions:
        try:
            weight = min(0.99, max(0.0, float(smooth))) if smooth else 0.0
        except ValueError:
            weight = 0.0
        yes = ("1", "true", "yes")
        return CurveOptions(x if x in X_CHOICES else "step", weight, loglog in yes, logy in yes)


def _x_values(rows: list[dict], axis: str, parameters: float | None) -> list[float | None]:
    xs: list[float | None] = []
    for i, row in enumerate(rows):
        if axis == "step":
            xs.append(_x_of(row, i))
            continue
        tokens = row.get("tokens")
        if not isinstance(tokens, int | float):
            xs.append(None)
        elif axis == "tokens":
            xs.append(float(tokens))
        else:
            xs.append(6.0 * parameters * float(tokens) if parameters else None)
    return xs


def _curves(rows: list[dict], xs: list[float | None], want) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    for row, x in zip(rows, xs, strict=True):
        if x is None:
            continue
        for k, v in flatten(row).items():
            if want(k) and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                series.setdefault(k, []).append((x, float(v)))
    return series


def _controls(options: CurveOptions, have_flops: bool) -> str:
    def link(label: str, **change) -> str:
        merged = {"x": options.x, "smooth": options.smooth, "logy": int(options.log_y), **change}
        query = {k: v for k, v in merged.items() if v not in ("step", 0.0, 0)}
        href = "?" + urlencode(query) if query else "?"
        on = all(getattr(options, "log_y" if k == "logy" else k) == v for k, v in change.items())
        return f'<a class="{"on" if on else ""}" href="{esc(href)}">{esc(label)}</a>'

    axes = [link(label, x=key) for key, label in X_CHOICES.items() if key != "flops" or have_flops]
    smooth = [link("none" if w == 0 else f"{w:g}", smooth=w) for w in SMOOTH_CHOICES]
    y_axis = [link("linear", logy=0), link("log", logy=1)]
    return (
        '<div class="plot-controls"><span class="muted">x axis:</span>'
        + " ".join(axes)
        + '<span class="muted">smoothing:</span>'
        + " ".join(smooth)
        + '<span class="muted">y axis:</span>'
        + " ".join(y_axis)
        + "</div>"
    )


def series_key(name: str) -> str:
    """What a metric column measures apart from its unit: `loss` and `bpb` of one evaluation set share a key
    (`eval_web_loss` and `eval_web_bpb` are both `eval web`), so they get one colour and one marker shape on
    every chart of a page; the training loss is `train`."""
    words = [w for w in name.lower().replace("/", "_").split("_") if w and w not in ("loss", "bpb")]
    return " ".join(words) or "train"


def page_style(rows: list[dict]) -> SeriesStyle:
    """Colours and shapes for every loss and bpb column of `rows`: training first, then evaluations by name."""
    keys = {k for row in rows for k in flatten(row) if _is_loss(k) or _is_bpb(k)}
    ordered = sorted({series_key(k) for k in keys if not is_eval(k)}) + sorted(
        {series_key(k) for k in keys if is_eval(k)}
    )
    return SeriesStyle(ordered)


def _chart(
    rows,
    xs,
    want,
    options: CurveOptions,
    y_label: str,
    css: str,
    eval_label=lambda k: k,
    height: int = 320,
    style: SeriesStyle | None = None,
    width: int = CHART_W,
) -> str | None:
    series = _curves(rows, xs, want)
    if not series:
        return None
    style = style or SeriesStyle()
    chart = Chart(
        x_label=X_CHOICES[options.x],
        y_label=y_label + (" (log)" if options.log_y else ""),
        log_x=options.x == "flops",
        log_y=options.log_y,
        css_class=css,
        height=height,
        width=width,
    )
    train = {k: v for k, v in sorted(series.items()) if not is_eval(k)}
    evals = {k: v for k, v in sorted(series.items()) if is_eval(k)}
    for name, points in train.items():
        color = style.color(series_key(name))
        if options.smooth > 0:
            chart.line(f"{name} (raw)", points, css="raw", color=color + "55")
            chart.line(name, ema(points, options.smooth), css="train", color=color)
        else:
            chart.line(name, points, css="train", color=color)
    for name, points in evals.items():
        key = series_key(name)
        chart.points(eval_label(name), points, css="eval", color=style.color(key), shape=style.shape(key))
    return chart.render()


def train_summary(fs, full: str, size: int, options: CurveOptions | None = None) -> str:
    options = options or CurveOptions()
    rows, warn = read_metrics(fs, full, size)
    out = [error_box(warn)] if warn else []
    if not rows:
        return "".join(out) + note("metrics.jsonl has no rows yet")
    folder = full.rsplit("/", 1)[0]
    info = _train_info(fs, folder)
    parameters = _parameter_count(info)
    axis = options.x if options.x != "flops" or parameters else "step"
    options = CurveOptions(axis, options.smooth, options.loglog, options.log_y)
    xs = _x_values(rows, axis, parameters)
    out.append(_controls(options, parameters is not None))
    batches = _max_eval_batches(fs, folder)
    in_training = "all batches" if batches is None else f"{batches} batch{'es' if batches != 1 else ''}"

    def eval_label(k: str) -> str:
        return f"{k} (in-training eval, {in_training})"

    style = page_style(rows)
    losses = _chart(
        rows, xs, lambda k: _is_loss(k) and not _is_bpb(k), options, "loss", "plot loss-curve", eval_label, style=style
    )
    bpb = _chart(rows, xs, _is_bpb, options, "bits per byte", "plot bpb-curve", eval_label, style=style)
    out.append(grid([losses or note("no loss column in metrics.jsonl"), bpb]))
    if any(is_eval(k) for row in rows for k in row):
        out.append(
            '<p class="muted eval-note">Points marked <i>in-training eval</i> are Levanter\'s evaluation during '
            f"training: the validation set's first {esc(in_training)} of packed sequences "
            "(<code>max_eval_batches</code>) at the steps it evaluated. The evaluation step scores the final "
            "checkpoint on every document of the split, document by document, so its loss and bits per byte "
            "(on its own page) differ from these.</p>"
        )
    lr = _chart(rows, xs, _is_lr, options, "learning rate", "plot lr-curve", height=220)
    throughput = _chart(rows, xs, _is_throughput, options, "tokens / s", "plot throughput-curve", height=220)
    mfu, mfu_note = _mfu_chart(rows, xs, options, info)
    grad = _chart(rows, xs, _is_grad_norm, options, "gradient norm", "plot grad-norm-curve", height=220)
    out.append(grid([lr, throughput, mfu, grad]))
    if mfu_note:
        out.append(f'<p class="muted mfu-note">{esc(mfu_note)}</p>')
    if not grad:
        out.append(note("not in this step's metrics.jsonl: gradient norm"))
    last = flatten(rows[-1])
    items = [(k, fmt_num(v)) for k, v in last.items() if not isinstance(v, dict | list)]
    out.append("<h4>Last logged row</h4>" + kv_table(items[:24]))
    return "".join(out)


def grid(charts: list[str | None]) -> str:
    """Charts two to a row across the page's width (one to a row on a narrow window)."""
    shown = [c for c in charts if c]
    return f'<div class="chart-grid">{"".join(f"<div>{c}</div>" for c in shown)}</div>' if shown else ""


def _train_info(fs, folder: str) -> dict:
    """The train step's `train_info.json`; {} when there is none or it is not a JSON object."""
    try:
        info = json.loads(fs.cat_file(f"{folder}/train_info.json"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _positive(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def _parameter_count(info: dict) -> float | None:
    """The model's parameter count from the train step's `train_info.json`, when there is one."""
    return _positive(info.get("parameter_count"))


def _mfu_chart(rows: list[dict], xs: list[float | None], options: CurveOptions, info: dict) -> tuple[str | None, str]:
    """MFU per step: achieved model FLOP/s (`model_flops_per_token` x tokens/s) over the devices' peak
    (`device_count` x `device_peak_flops_per_s`), all three from `train_info.json`; the line under it says how
    it was computed, or why there is none (no peak known for the device, a CPU among them, or no record)."""
    if any(_is_mfu(k) for row in rows for k in flatten(row)):
        return _chart(rows, xs, _is_mfu, options, "MFU", "plot mfu-curve", height=220), "MFU as logged by the run."
    per_token, peak, count = (
        _positive(info.get(key)) for key in ("model_flops_per_token", "device_peak_flops_per_s", "device_count")
    )
    kind = info.get("device_kind")
    if not kind or per_token is None:
        return None, "MFU: not shown, train_info.json does not record the device or the model FLOPs per token."
    if peak is None:
        achieved = [
            per_token * row["tokens_per_second"] for row in rows if _positive(row.get("tokens_per_second")) is not None
        ]
        rate = f" (achieved model FLOP/s, last step: {fmt_num(achieved[-1])})" if achieved else ""
        return None, (
            f"MFU: not shown, no peak FLOP/s is known for the device this run trained on ({kind}){rate}; "
            "marin.training.cost names the devices whose peaks it knows (MARIN_DEVICE_PEAKS adds others)."
        )
    count = count or 1.0
    derived = [
        {"step": row.get("step"), "mfu": per_token * row["tokens_per_second"] / (peak * count)}
        if _positive(row.get("tokens_per_second")) is not None
        else {"step": row.get("step")}
        for row in rows
    ]
    chart = _chart(derived, xs, _is_mfu, options, "MFU", "plot mfu-curve", height=220)
    how = (
        f"MFU = model FLOP/s ({fmt_num(per_token)} FLOPs per token x tokens/s) / peak "
        f"({fmt_num(count)} x {kind}, {fmt_num(peak)} bf16 FLOP/s each)."
    )
    return chart, how if chart else f"MFU: no step of metrics.jsonl has tokens_per_second. {how}"


def _max_eval_batches(fs, folder: str) -> int | None:
    """`max_eval_batches` of the train step's config (its `.executor_info`); Levanter's default of 8 if unreadable."""
    try:
        info = json.loads(fs.cat_file(f"{folder}/{INFO_FILE}"))
        value = (info.get("config") or {}).get("max_eval_batches", 8)
    except (OSError, ValueError, AttributeError):
        return 8
    return value if isinstance(value, int) or value is None else 8


def stats_summary(fs, full: str, size: int) -> str:
    data = _load_json(fs, full, size, "stats.json")
    flat = flatten(data) if isinstance(data, dict) else {"(value)": data}
    items = []
    for k, v in flat.items():
        if isinstance(v, list):
            v = f"[{len(v)} items]" if len(v) > 8 else json.dumps(v)
        items.append((k, fmt_num(v)))
    return kv_table(items[:200]) + (note(f"{len(items) - 200} more keys in the file") if len(items) > 200 else "")


def provenance_summary(fs, full: str, size: int) -> str:
    data = _load_json(fs, full, size, "provenance.json")
    if not isinstance(data, dict):
        raise ValueError("provenance.json: expected a JSON object")
    scalars = [(k, esc(v)) for k, v in data.items() if not isinstance(v, dict | list)]
    files = data.get("files")
    out = kv_table(scalars)
    if isinstance(files, list) and files:
        rows = []
        for f in files[:200]:
            if isinstance(f, dict):
                digest = str(f.get("sha256", ""))
                rows.append(
                    [
                        esc(f.get("path") or f.get("name") or f.get("source") or ""),
                        (fmt_size(f.get("size")), f.get("size") or 0),
                        f'<code title="{esc(digest)}">{esc(digest[:16])}</code>',
                    ]
                )
            else:
                rows.append([esc(f), "", ""])
        total = sum(f.get("size", 0) for f in files if isinstance(f, dict) and isinstance(f.get("size"), int))
        out += f"<h4>{len(files)} files, {fmt_size(total)}</h4>" + table(["file", "size", "sha256"], rows, cls="data")
    elif isinstance(files, dict):
        out += kv_table([(k, esc(v)) for k, v in list(files.items())[:200]])
    return out


def results_summary(fs, full: str, size: int) -> str:
    data = _load_json(fs, full, size, "results.json")
    out = results_table(data)
    if isinstance(data, dict) and "checkpoint" in data and "datasets" in data:
        out += (
            '<p class="muted eval-note">Scored by this evaluation step: the checkpoint above on every document of '
            "the split (up to <code>max_documents</code>), document by document. The train step's page also "
            "shows <code>eval_loss</code>/<code>eval_bpb</code>: Levanter's in-training estimate on its first "
            "<code>max_eval_batches</code> batches of packed sequences, a different computation.</p>"
        )
    return out


def results_table(data: Any) -> str:
    """A dict of dicts becomes rows × columns; anything else a flat key/value table."""
    inner = data.get("results") if isinstance(data, dict) and isinstance(data.get("results"), dict | list) else data
    if isinstance(inner, dict) and inner and all(isinstance(v, dict) for v in inner.values()):
        cols: list[str] = []
        for v in inner.values():
            for k in flatten(v):
                if k not in cols:
                    cols.append(k)
        rows = []
        for name, v in inner.items():
            fv = flatten(v)
            rows.append([esc(name)] + [(fmt_num(fv.get(c)), fv.get(c) if fv.get(c) is not None else "") for c in cols])
        out = table(["set"] + cols, rows, cls="data results")
    elif isinstance(inner, list) and inner and all(isinstance(v, dict) for v in inner):
        cols = []
        for v in inner:
            for k in flatten(v):
                if k not in cols:
                    cols.append(k)
        rows = [[(fmt_num(flatten(v).get(c)), flatten(v).get(c) or "") for c in cols] for v in inner]
        out = table(cols, rows, cls="data results")
    else:
        out = kv_table([(k, fmt_num(v)) for k, v in flatten(inner).items()])
    if isinstance(data, dict) and inner is not data:
        rest = {k: v for k, v in data.items() if k != "results"}
        if rest:
            out += kv_table([(k, fmt_num(v)) for k, v in flatten(rest).items()][:50])
    return out


def forecast_summary(
    fs, full: str, size: int, root: int = 0, step_rel: str = "", checks=None, loglog: bool = False
) -> str:
    data = _load_json(fs, full, size, "forecast.json")
    if not isinstance(data, dict):
        raise ValueError("forecast.json: expected a JSON object")
    return ladder_summary(data, root, step_rel, checks, log_y=loglog)


def check_summary(fs, full: str, size: int) -> str:
    data = _load_json(fs, full, size, "check.json")
    if not isinstance(data, dict):
        raise ValueError("check.json: expected a JSON object")
    return check_lines([data]) + kv_table([(k, fmt_num(v)) for k, v in flatten(data).items()][:40])


def watch_summary(fs, full: str, size: int) -> str:
    """A training watched against its forecast (`forecast_watch.json`, marin/training/forecast_watch.py): flagged
    or not, loudly, the compute saved when stopped, and every comparison with the band."""
    data = _load_json(fs, full, size, "forecast_watch.json")
    if not isinstance(data, dict):
        raise ValueError("forecast_watch.json: expected a JSON object")
    comparisons = [c for c in data.get("comparisons") or [] if isinstance(c, dict)]
    saved = data.get("saved") if isinstance(data.get("saved"), dict) else {}
    if data.get("flagged"):
        stopped = (
            f"; stopped: {fmt_num(saved.get('steps'))} steps ({fmt_num(saved.get('fraction_of_run'))} of the run, "
            f"{fmt_num(saved.get('flops_6nd'))} FLOPs) not spent"
            if data.get("stop_off_forecast")
            else "; training went on (stop_off_forecast is off)"
        )
        head = (
            f'<div class="note unconstrained off-forecast"><b>OFF ITS FORECAST: {fmt_num(data.get("patience"))} '
            f"comparisons in a row outside the band, flagged at step {fmt_num(data.get('flagged_at_step'))}"
            f"{esc(stopped)}</b></div>"
        )
    else:
        head = f'<div class="forecast-line">inside its forecast\'s band at all {len(comparisons)} comparisons</div>'
    rows = [
        [
            fmt_num(c.get("step")),
            fmt_num(c.get("fraction")),
            fmt_num(c.get("loss")),
            fmt_num(c.get("forecast")),
            f"{fmt_num(c.get('low'))} – {fmt_num(c.get('high'))}",
            "outside" if c.get("outside") else "inside",
        ]
        for c in comparisons
    ]
    return head + table(["step", "fraction", "training loss", "forecast", "band", ""], rows, cls="data watch")


def harness_summary(fs, full: str, size: int) -> str:
    """The harness step's tasks: version, documents, shots and every metric (marin/evaluation/harness.py)."""
    data = _load_json(fs, full, size, "metrics.json")
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        return kv_table([(k, fmt_num(v)) for k, v in flatten(data).items()][:60])
    names = sorted({m for t in tasks.values() if isinstance(t, dict) for m in (t.get("metrics") or {})})
    rows = []
    for name, t in sorted(tasks.items()):
        if not isinstance(t, dict):
            continue
        metrics = t.get("metrics") or {}
        rows.append(
            [esc(name), esc(t.get("version")), fmt_num(t.get("documents")), fmt_num(t.get("num_fewshot"))]
            + [(fmt_num(metrics.get(m)), metrics.get(m) if metrics.get(m) is not None else "") for m in names]
        )
    rest = {k: v for k, v in data.items() if k not in ("tasks", "groups")}
    return table(["task", "version", "documents", "shots", *names], rows, cls="data harness") + kv_table(
        [(k, fmt_num(v)) for k, v in flatten(rest).items()][:20]
    )


def mixture_stages_table(fs, full: str, size: int) -> str:
    """The stages of a mixture that changes within the run (`train_info.json`), one row each; '' for none."""
    info = _load_json(fs, full, size, "train_info.json")
    stages = info.get("mixture_stages") if isinstance(info, dict) else None
    if not isinstance(stages, list) or not stages:
        return ""
    last = info.get("num_train_steps")
    names = sorted({n for s in stages if isinstance(s, dict) for n in (s.get("weights") or {})})
    rows = []
    for i, stage in enumerate(stages):
        start = stage.get("start_step")
        end = (
            stages[i + 1].get("start_step") - 1 if i + 1 < len(stages) else (last - 1 if isinstance(last, int) else "…")
        )
        weights = stage.get("weights") or {}
        rows.append([str(i), f"steps {start}–{end}"] + [fmt_num(round(weights.get(n, 0.0), 4)) for n in names])
    return table(["stage", "steps"] + [esc(n) for n in names], rows, cls="data mixture", sortable=False)


KINDS = [
    ("provenance.json", "Download", provenance_summary),
    ("stats.json", "Counts", stats_summary),
    ("metrics.jsonl", "Training", train_summary),
    ("results.json", "Evaluation results", results_summary),
    ("metrics.json", "Harness tasks", harness_summary),
    ("forecast.json", "Forecast", forecast_summary),
    ("check.json", "Forecast check", check_summary),
    ("forecast_watch.json", "Watched against its forecast", watch_summary),
    ("cost.json", "Cost: estimate against measured", cost_summary),
]


def step_summaries(
    fs,
    root: int,
    step_rel: str,
    step_full: str,
    files: dict[str, dict],
    fn: str,
    curves: CurveOptions | None = None,
    checks: list[dict] | None = None,
) -> str:
    """HTML sections for every well-known file among `files` (name -> ls entry, top level)."""
    out = []
    for name, title, render in KINDS:
        if name not in files:
            continue
        if name == "stats.json":
            low = fn.lower()
            title = next(
                (t for key, t in (("dedup", "Dedup"), ("filter", "Filter"), ("tokeni", "Tokenize")) if key in low),
                "Stats",
            )
            title += " counts"
        link = f'<a class="muted" href="{esc(url_file(root, f"{step_rel}/{name}"))}">{esc(name)}</a>'
        try:
            size = files[name].get("size") or 0
            if render is forecast_summary:
                body = render(fs, f"{step_full}/{name}", size, root, step_rel, checks, bool(curves and curves.loglog))
            elif render is train_summary:
                body = render(fs, f"{step_full}/{name}", size, curves)
            else:
                body = render(fs, f"{step_full}/{name}", size)
        except Exception as e:  # noqa: BLE001 - a bad file is shown, never a 500
            body = error_box(str(e) if isinstance(e, ValueError) else f"{name}: {type(e).__name__}: {e}")
        out.append(f'<section class="summary" data-kind="{esc(name)}"><h3>{esc(title)} {link}</h3>{body}</section>')
    if "train_info.json" in files:
        try:
            stages = mixture_stages_table(fs, f"{step_full}/train_info.json", files["train_info.json"].get("size") or 0)
        except Exception as e:  # noqa: BLE001 - a bad file is shown, never a 500
            stages = error_box(f"train_info.json: {type(e).__name__}: {e}")
        if stages:
            out.append(f'<section class="summary" data-kind="mixture"><h3>Data mixture by stage</h3>{stages}</section>')
    if "removed_ids.jsonl" in files:
        out.append(
            '<section class="summary" data-kind="removed_ids.jsonl"><h3>Duplicates</h3>'
            f'<a class="btn" href="/dups/{root}/{esc(step_rel)}">removed documents beside the documents they duplicate ▶</a>'
            "</section>"
        )
    if "forecast.png" in files:
        out.append(
            '<section class="summary" data-kind="forecast.png"><details><summary>Forecast plot (PNG, as the step drew it)'
            f'</summary><div class="image"><img src="{esc(url_raw(root, f"{step_rel}/forecast.png"))}" alt="forecast">'
            "</div></details></section>"
        )
    return "".join(out)
