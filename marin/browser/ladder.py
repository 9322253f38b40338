"""The ladder page: a forecast step's rungs, the fitted law with its interval, the forecast, and the target.

A scaling ladder is read as one picture: the rungs (measured, one per small run), the law fitted through
them and carried out to the target's compute, the forecast at the target with its interval, and, once
the target run exists and has been evaluated, the measured point beside the forecast. The page draws it
from `forecast.json` alone (marin/evaluation/forecast.py writes it), on log-scaled FLOPs, and lists the
rungs with links to their evaluation steps. Fields it does not know are shown in the table below the
picture, so a richer forecast (an isoFLOP fit, say) still shows everything it wrote.

The y-range follows what was measured and forecast (the rungs, the forecast, the measured target), not the
interval: an interval that runs off that range (an unconstrained fit's can reach hundreds of nats) is
clipped to it, and the clipping is said in the band's legend and drawn as a marker at the edge it crosses.
`log_y` draws both axes logarithmic (the page's `?loglog=1`). A forecast's `notes` (an unconstrained
fit) are shown under the picture, loud, and the target's estimated cost (`prediction.cost`: its FLOPs and
device-hours on the named devices at the assumed MFU) beside the forecast. Rungs the forecast flagged as
off their family (`flagged_rungs`: diverged, loss spike, plateau, off the law) are drawn apart (hollow red
squares, out of the fit), named with their reasons above the table, and the forecast with every rung (or
without the flagged, `prediction_other`) is given beside the forecast. The legend sits under the plot,
never over the target, where the forecast, its interval and the measurement are drawn.
"""

from __future__ import annotations

import json
import math
import posixpath
from typing import Any

from marin.browser.charts import Chart, fmt_value
from marin.browser.html import esc, flatten, fmt_num, kv_table, note, table, url_step


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _law(fit: dict):
    a, b, c = (_num(fit.get(k)) for k in ("a", "b", "c"))
    if a is None or b is None or c is None:
        return None
    return lambda flops: a * flops ** (-b) + c


def measured_target(forecast: dict, metric: str) -> tuple[float, float] | None:
    """The target run's measured (flops, value), when the forecast records one."""
    for holder in (forecast.get("measured"), (forecast.get("prediction") or {}).get("measured")):
        if isinstance(holder, dict):
            flops = _num(holder.get("flops"))
            value = _num(holder.get(metric)) if _num(holder.get(metric)) is not None else _num(holder.get("value"))
            if flops is not None and value is not None:
                return flops, value
    return None


def y_range(values: list[float]) -> tuple[float, float]:
    """The range that shows `values` with a margin (a quarter of their spread, at least 2 % of their size)."""
    lo, hi = min(values), max(values)
    margin = max(0.25 * (hi - lo), 0.02 * max(abs(lo), abs(hi)), 1e-9)
    return lo - margin, hi + margin


def cost_line(prediction: dict) -> str:
    """The target's estimated cost in words, from the forecast's `prediction.cost` ('' without one)."""
    cost = prediction.get("cost") if isinstance(prediction.get("cost"), dict) else None
    if not cost:
        return ""
    flops = _num(cost.get("flops")) or _num(cost.get("flops_6nd"))
    counted = "" if _num(cost.get("flops")) else " (6·N·D)"
    hours = cost.get("device_hours") if isinstance(cost.get("device_hours"), dict) else {}
    on = ", ".join(
        f"<b>{fmt_value(h)}</b> device-hours on one {esc(name)}"
        for name, h in sorted(hours.items())
        if _num(h) is not None
    )
    mfu = _num(cost.get("mfu"))
    return (
        f'<div class="forecast-line cost">the target\'s estimated cost: {fmt_value(flops or 0)} FLOPs{counted}'
        + (f", {on}" if on else "")
        + (f" at an assumed MFU of {mfu:g}" if mfu is not None else "")
        + "</div>"
    )


def _clipped_interval(
    chart: Chart, target: float | None, interval: Any, confidence: float | None, y_lo: float, y_hi: float
) -> None:
    """The interval at the target as a band clipped to y_lo..y_hi; a clipped end is said in the legend and
    marked where it leaves the chart."""
    if not target or not isinstance(interval, list) or len(interval) != 2 or any(_num(v) is None for v in interval):
        return
    low, high = float(interval[0]), float(interval[1])
    label = f"{100 * confidence:.0f}% interval" if confidence else "interval"
    clipped_low, clipped_high = max(low, y_lo), min(high, y_hi)
    if (clipped_low, clipped_high) != (low, high):
        label += f" (clipped; full {fmt_value(low)} – {fmt_value(high)})"
    chart.band(
        label,
        [(target / 1.06, clipped_low, clipped_high), (target * 1.06, clipped_low, clipped_high)],
        css="interval clipped" if (clipped_low, clipped_high) != (low, high) else "interval",
        color="#2563eb",
    )
    edges = [(target, v) for v, off in ((clipped_low, low < y_lo), (clipped_high, high > y_hi)) if off]
    if edges:
        chart.points(
            "interval runs off the chart",
            edges,
            titles=[f"the interval runs on to {fmt_value(low if v == clipped_low else high)}" for _, v in edges],
            css="clip-mark",
            color="#dc2626",
        )


def ladder_chart(forecast: dict, checks: list[dict] | None = None, log_y: bool = False) -> str:
    metric = forecast.get("metric") if isinstance(forecast.get("metric"), str) else "loss"
    rungs = [r for r in forecast.get("rungs") or [] if isinstance(r, dict)]
    every = [(_num(r.get("flops")), _num(r.get(metric)), bool(r.get("flags"))) for r in rungs]
    every = [(x, y, off) for x, y, off in every if x is not None and y is not None and x > 0]
    points = [(x, y) for x, y, off in every if not off]
    flagged = [(x, y) for x, y, off in every if off]
    prediction = forecast.get("prediction") if isinstance(forecast.get("prediction"), dict) else {}
    target = _num(prediction.get("flops"))
    predicted = _num(prediction.get(metric))
    chart = Chart(
        x_label="training FLOPs (6·N·D)",
        y_label=metric + (" (log)" if log_y else ""),
        log_x=True,
        log_y=log_y,
        css_class="plot ladder-plot",
        spread_markers=False,
    )
    measured = measured_target(forecast, metric)
    checked = [(_num(c.get("measured_flops")), _num(c.get("measured"))) for c in checks or []]
    checked = [(x, y) for x, y in checked if x and y is not None]
    shown = [y for _, y in points + flagged] + ([predicted] if predicted is not None else [])
    shown += ([measured[1]] if measured else []) + [y for _, y in checked]
    y_lo, y_hi = y_range(shown) if shown else (-math.inf, math.inf)
    if log_y:
        y_lo = max(y_lo, min(shown) / 1.05) if shown else y_lo
    law = _law(forecast.get("fit") or {})
    xs = [x for x, _ in points + flagged] + ([target] if target else [])
    if law and xs:
        lo, hi = math.log10(min(xs)), math.log10(max(xs))
        grid = [10 ** (lo + (hi - lo) * i / 80) for i in range(81)] if hi > lo else [10**lo]
        chart.line("fitted law", [(x, law(x)) for x in grid if y_lo <= law(x) <= y_hi], css="fit", color="#2563eb")
    _clipped_interval(chart, target, prediction.get("interval"), _num(prediction.get("confidence")), y_lo, y_hi)
    chart.points(
        "rungs",
        points,
        titles=[f"rung @ {fmt_value(x)} FLOPs" for x, _ in points],
        css="rung",
        color="#059669",
    )
    if flagged:
        chart.points(
            "flagged rungs (off their family)",
            flagged,
            titles=[f"flagged rung @ {fmt_value(x)} FLOPs" for x, _ in flagged],
            css="rung flagged",
            color="#dc2626",
            shape="square",
            hollow=True,
        )
    if target and predicted is not None:
        chart.points("forecast", [(target, predicted)], titles=[f"forecast @ {fmt_value(target)}"], css="forecast")
    if measured:
        chart.points("measured target", [measured], titles=["measured target"], css="measured", color="#111827")
    for point in checked:
        chart.points("measured target", [point], titles=["measured target"], css="measured", color="#111827")
    return chart.render()


def ladder_summary(
    forecast: dict, root: int, step_rel: str, checks: list[dict] | None = None, log_y: bool = False
) -> str:
    """The picture, the forecast in words, the rungs with links, and every other field."""
    checks = checks or []
    if forecast.get("kind") == "isoflop":
        return isoflop_summary(forecast, root, step_rel, checks)
    metric = forecast.get("metric") if isinstance(forecast.get("metric"), str) else "loss"
    prediction = forecast.get("prediction") if isinstance(forecast.get("prediction"), dict) else {}
    predicted, target = _num(prediction.get(metric)), _num(prediction.get("flops"))
    words = []
    if predicted is not None and target is not None:
        interval = prediction.get("interval")
        span = (
            f" ({fmt_value(interval[0])} – {fmt_value(interval[1])})"
            if isinstance(interval, list) and len(interval) == 2
            else ""
        )
        words.append(f"forecast {esc(metric)} at {fmt_value(target)} FLOPs: <b>{fmt_value(predicted)}</b>{esc(span)}")
    notes = [n for n in forecast.get("notes") or [] if isinstance(n, str)]
    if not notes and prediction.get("interval_note"):
        notes = [str(prediction["interval_note"])]
    flagged = [f for f in forecast.get("flagged_rungs") or [] if isinstance(f, dict)]
    other = forecast.get("prediction_other") if isinstance(forecast.get("prediction_other"), dict) else None
    if other and _num(other.get(metric)) is not None:
        interval = other.get("interval")
        span = (
            f" ({fmt_value(interval[0])} – {fmt_value(interval[1])})"
            if isinstance(interval, list) and len(interval) == 2
            else ""
        )
        words.append(f"with {esc(other.get('rungs'))}: {fmt_value(other[metric])}{esc(span)}")
    measured = measured_target(forecast, metric)
    if measured and predicted is not None:
        words.append(f"measured: <b>{fmt_value(measured[1])}</b> (forecast error {fmt_value(measured[1] - predicted)})")
    rows = []
    for r in forecast.get("rungs") or []:
        if not isinstance(r, dict):
            continue
        evaluation = r.get("evaluation")
        link = esc(evaluation)
        if isinstance(evaluation, str) and not evaluation.startswith(("/", "gs://", "s3://")):
            rel = posixpath.normpath(posixpath.join(step_rel, evaluation))
            if not rel.startswith(".."):
                link = f'<a href="{esc(url_step(root, rel))}">{esc(evaluation)}</a>'
        rows.append(
            [
                link,
                (fmt_value(r["flops"]) if _num(r.get("flops")) else "—", _num(r.get("flops")) or 0),
                (fmt_num(r.get("parameter_count")), _num(r.get("parameter_count")) or 0),
                (fmt_num(r.get("tokens")), _num(r.get("tokens")) or 0),
                (fmt_num(r.get(metric)), _num(r.get(metric)) or 0),
                (fmt_num(r.get("residual")), _num(r.get("residual")) or 0),
                esc("; ".join(str(f) for f in r.get("flags") or [])) or "—",
            ]
        )
    rest = {k: v for k, v in forecast.items() if k not in ("rungs",)}
    return (
        ladder_chart(forecast, checks, log_y=log_y)
        + ("".join(f'<div class="forecast-line">{w}</div>' for w in words) if words else note("no prediction"))
        + cost_line(prediction)
        + "".join(
            f'<div class="note flagged-rung"><b>FLAGGED rung {esc(f.get("evaluation"))}: '
            f"{esc('; '.join(str(x) for x in f.get('reasons') or []))}</b></div>"
            for f in flagged
        )
        + "".join(f'<div class="note unconstrained"><b>{esc(n)}</b></div>' for n in notes)
        + check_lines(checks)
        + table(
            ["rung (evaluation)", "FLOPs", "parameters", "tokens", metric, "residual", "flags"], rows, cls="data rungs"
        )
        + kv_table(
            [
                (k, fmt_num(v) if not isinstance(v, list) else esc(json.dumps(v)[:300]))
                for k, v in flatten(rest).items()
            ][:80]
        )
    )


def _budget_colors(n: int) -> list[str]:
    from marin.browser.svg import PALETTE

    return [PALETTE[i % len(PALETTE)] for i in range(n)]


def isoflop_charts(forecast: dict, checks: list[dict]) -> str:
    """The isoFLOP curves (loss against size per budget, with each optimum), N_opt(C) and the loss at the optimum
    against compute, each carried out to the target with the forecast's interval, and the measured target."""
    budgets = [b for b in forecast.get("budgets") or [] if isinstance(b, dict)]
    prediction = forecast.get("prediction") if isinstance(forecast.get("prediction"), dict) else {}
    intervals = prediction.get("interval") if isinstance(prediction.get("interval"), dict) else {}
    target = _num(prediction.get("flops"))
    curves = Chart(
        x_label="parameters",
        y_label="loss",
        log_x=True,
        css_class="plot isoflop-plot",
        spread_markers=False,
    )
    for color, b in zip(_budget_colors(len(budgets)), budgets, strict=True):
        rungs = [r for r in b.get("rungs") or [] if isinstance(r, dict)]
        points = [(_num(r.get("params")), _num(r.get("loss"))) for r in rungs]
        points = [(x, y) for x, y in points if x and y is not None]
        label = f"{fmt_value(_num(b.get('flops')) or 0)} FLOPs"
        coefficients = b.get("parabola_in_ln_params")
        if points and isinstance(coefficients, list) and len(coefficients) == 3:
            q, r, s = (float(c) for c in coefficients)
            lo, hi = math.log(min(x for x, _ in points) / 1.3), math.log(max(x for x, _ in points) * 1.3)
            grid = [lo + (hi - lo) * i / 40 for i in range(41)]
            curves.line(
                label, [(math.exp(x), q * x * x + r * x + s) for x in grid], dashed=not b.get("usable"), color=color
            )
        curves.points(f"{label} rungs", points, css="rung", color=color, legend=False)
        opt = (_num(b.get("params_opt")), _num(b.get("loss_opt")))
        if b.get("usable") and opt[0] and opt[1] is not None:
            first = not any(s.name == "optimum" for s in curves.series)
            curves.points(
                "optimum", [opt], titles=[f"optimum of {label}"], css="optimum", color="#111827", legend=first
            )
    out = [curves.render()]
    usable = [b for b in budgets if b.get("usable") and _num(b.get("params_opt")) and _num(b.get("flops"))]
    laws = forecast.get("laws") if isinstance(forecast.get("laws"), dict) else {}
    size = Chart(
        x_label="training FLOPs",
        y_label="compute-optimal parameters",
        log_x=True,
        log_y=True,
        css_class="plot nopt-plot",
        height=280,
        spread_markers=False,
    )
    size.points("budget optima", [(float(b["flops"]), float(b["params_opt"])) for b in usable], css="optimum")
    law = laws.get("params_opt") if isinstance(laws.get("params_opt"), dict) else None
    span = [float(b["flops"]) for b in usable] + ([target] if target else [])
    if law and span and _num(law.get("k")) and _num(law.get("exponent")) is not None:
        k, e = float(law["k"]), float(law["exponent"])
        lo, hi = math.log10(min(span)), math.log10(max(span))
        grid = [10 ** (lo + (hi - lo) * i / 40) for i in range(41)]
        size.line(f"N_opt = {fmt_value(k)}·C^{e:.3f}", [(c, k * c**e) for c in grid], css="fit")
    if target and _num(prediction.get("params")):
        band = intervals.get("params")
        if isinstance(band, list) and len(band) == 2:
            size.band("interval", [(target / 1.1, band[0], band[1]), (target * 1.1, band[0], band[1])], css="interval")
        size.points("forecast", [(target, float(prediction["params"]))], css="forecast")
    out.append(size.render())
    loss = Chart(
        x_label="training FLOPs",
        y_label="loss at the optimum",
        log_x=True,
        css_class="plot ladder-plot",
        height=280,
        spread_markers=False,
    )
    loss.points(
        "budget optima",
        [(float(b["flops"]), float(b["loss_opt"])) for b in usable if _num(b.get("loss_opt"))],
        css="rung",
        color="#059669",
    )
    loss_law = laws.get("loss_opt") if isinstance(laws.get("loss_opt"), dict) else None
    if loss_law and span:
        lo, hi = math.log10(min(span)), math.log10(max(span))
        grid = [10 ** (lo + (hi - lo) * i / 40) for i in range(41)]
        if loss_law.get("kind") == "a*C^-b+c":
            fn = _law(loss_law)
        elif _num(loss_law.get("k")) and _num(loss_law.get("e")) is not None:
            k, e = float(loss_law["k"]), float(loss_law["e"])
            fn = lambda c: k * c**e  # noqa: E731
        else:
            fn = None
        if fn:
            loss.line("loss law", [(c, fn(c)) for c in grid], css="fit", color="#2563eb")
    _forecast_and_measured(loss, prediction, "loss", checks, intervals.get("loss"), usable)
    out.append(loss.render())
    return "".join(out)


def _forecast_and_measured(
    chart: Chart, prediction: dict, metric: str, checks: list[dict], band, usable: list[dict]
) -> None:
    """The forecast, its interval (clipped to the range of the optima, the forecast and the measurements) and
    the measured targets."""
    target, predicted = _num(prediction.get("flops")), _num(prediction.get(metric))
    shown = [float(b["loss_opt"]) for b in usable if _num(b.get("loss_opt")) is not None]
    shown += [predicted] if predicted is not None else []
    shown += [float(c["measured"]) for c in checks if _num(c.get("measured")) is not None]
    if shown:
        y_lo, y_hi = y_range(shown)
        _clipped_interval(chart, target, band, _num(prediction.get("confidence")), y_lo, y_hi)
    if target and predicted is not None:
        chart.points("forecast", [(target, predicted)], titles=[f"forecast @ {fmt_value(target)}"], css="forecast")
    for check in checks:
        flops, measured = _num(check.get("measured_flops")), _num(check.get("measured"))
        if flops and measured is not None:
            chart.points(
                "measured target", [(flops, measured)], titles=["measured target"], css="measured", color="#111827"
            )


def check_lines(checks: list[dict]) -> str:
    out = []
    for check in checks:
        interval = check.get("interval")
        inside = check.get("within_interval")
        verdict = "" if inside is None else (" — inside the interval" if inside else " — <b>outside the interval</b>")
        span = f" ({fmt_value(interval[0])} – {fmt_value(interval[1])})" if isinstance(interval, list) else ""
        out.append(
            f'<div class="forecast-line check">checked: forecast {esc(check.get("metric"))} '
            f"{fmt_value(_num(check.get('forecast')) or 0)}{esc(span)}, measured "
            f"<b>{fmt_value(_num(check.get('measured')) or 0)}</b>, error {fmt_value(_num(check.get('error')) or 0)}"
            f"{verdict}</div>"
        )
        record = check.get("forecast_record") if isinstance(check.get("forecast_record"), dict) else {}
        if check.get("preregistered"):
            out.append(
                f'<div class="forecast-line preregistered">pre-registered: the forecast '
                f"({esc(record.get('step'))}-{esc(record.get('hash'))}) was written before the target run started</div>"
            )
        elif "preregistered" in check:
            out.append('<div class="note">not shown to precede the target run (the check was not given it)</div>')
        out += [f'<div class="note">{esc(n)}</div>' for n in check.get("notes") or []]
    return "".join(out)


def isoflop_summary(forecast: dict, root: int, step_rel: str, checks: list[dict]) -> str:
    """An isoFLOP forecast: the three pictures, the prediction and chosen configuration, the notes, every field."""
    prediction = forecast.get("prediction") if isinstance(forecast.get("prediction"), dict) else None
    words = []
    if prediction:
        words.append(
            f"at {fmt_value(_num(prediction.get('flops')) or 0)} FLOPs: N_opt <b>{fmt_value(_num(prediction.get('params')) or 0)}</b>"
            f" parameters, D_opt <b>{fmt_value(_num(prediction.get('tokens')) or 0)}</b> tokens, loss "
            f"<b>{fmt_value(_num(prediction.get('loss')) or 0)}</b>"
        )
        chosen = prediction.get("config")
        if isinstance(chosen, dict):
            words.append(
                f"chosen configuration: {fmt_value(_num(chosen.get('params')) or 0)} parameters for "
                f"{esc(chosen.get('steps'))} steps ({esc(json.dumps(chosen.get('model'), sort_keys=True)[:200])})"
            )
    else:
        words.append("<b>no prediction</b>: the rungs do not constrain the laws")
    other = forecast.get("prediction_other") if isinstance(forecast.get("prediction_other"), dict) else None
    if other and _num(other.get("loss")) is not None:
        words.append(
            f"with {esc(other.get('rungs'))}: N_opt {fmt_value(_num(other.get('params')) or 0)}, "
            f"loss {fmt_value(_num(other.get('loss')) or 0)}"
        )
    flagged = [f for f in forecast.get("flagged_rungs") or [] if isinstance(f, dict)]
    notes = "".join(
        f'<div class="note flagged-rung"><b>FLAGGED rung {esc(f.get("evaluation"))}: '
        f"{esc('; '.join(str(x) for x in f.get('reasons') or []))}</b></div>"
        for f in flagged
    )
    notes += "".join(f'<div class="note">{esc(n)}</div>' for n in forecast.get("notes") or [])
    rows = []
    for b in forecast.get("budgets") or []:
        if isinstance(b, dict):
            rows.append(
                [
                    fmt_value(_num(b.get("flops")) or 0),
                    str(len(b.get("rungs") or [])),
                    fmt_value(_num(b.get("params_opt")) or 0) if b.get("params_opt") else "—",
                    fmt_num(b.get("loss_opt")),
                    "yes" if b.get("usable") else f'<span class="bad">no</span> {esc(b.get("note") or "")}',
                ]
            )
    return (
        isoflop_charts(forecast, checks)
        + "".join(f'<div class="forecast-line">{w}</div>' for w in words)
        + cost_line(prediction or {})
        + check_lines(checks)
        + notes
        + table(["budget (FLOPs)", "rungs", "N_opt", "loss at optimum", "usable"], rows, cls="data budgets")
        + kv_table(
            [
                (k, fmt_num(v) if not isinstance(v, list) else esc(json.dumps(v)[:300]))
                for k, v in flatten({k: v for k, v in forecast.items() if k != "budgets"}).items()
            ][:80]
        )
    )
