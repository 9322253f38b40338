"""The ladder page: a forecast step's rungs, the fitted law with its interval, the forecast, and the target.

A scaling ladder is read as one picture: the rungs (measured, one per small run), the law fitted through
them and carried out to the target's compute, the forecast at the target with its interval, and, once
the target run exists and has been evaluated, the measured point beside the forecast. The page draws it
from `forecast.json` alone (marin/evaluation/forecast.py writes it), on log-scaled FLOPs, and lists the
rungs with links to their evaluation steps. Fields it does not know are shown in the table below the
picture, so a richer forecast (an isoFLOP fit, say) still shows everything it wrote.
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


def ladder_chart(forecast: dict) -> str:
    metric = forecast.get("metric") if isinstance(forecast.get("metric"), str) else "loss"
    rungs = [r for r in forecast.get("rungs") or [] if isinstance(r, dict)]
    points = [(_num(r.get("flops")), _num(r.get(metric))) for r in rungs]
    points = [(x, y) for x, y in points if x is not None and y is not None and x > 0]
    prediction = forecast.get("prediction") if isinstance(forecast.get("prediction"), dict) else {}
    target = _num(prediction.get("flops"))
    predicted = _num(prediction.get(metric))
    chart = Chart(x_label="training FLOPs (6·N·D)", y_label=metric, log_x=True, css_class="plot ladder-plot")
    law = _law(forecast.get("fit") or {})
    xs = [x for x, _ in points] + ([target] if target else [])
    if law and xs:
        lo, hi = math.log10(min(xs)), math.log10(max(xs))
        grid = [10 ** (lo + (hi - lo) * i / 80) for i in range(81)] if hi > lo else [10**lo]
        chart.line("fitted law", [(x, law(x)) for x in grid], css="fit", color="#2563eb")
    interval = prediction.get("interval")
    if target and isinstance(interval, list) and len(interval) == 2 and all(_num(v) is not None for v in interval):
        low, high = float(interval[0]), float(interval[1])
        confidence = _num(prediction.get("confidence"))
        label = f"{100 * confidence:.0f}% interval" if confidence else "interval"
        chart.band(label, [(target / 1.06, low, high), (target * 1.06, low, high)], css="interval", color="#2563eb")
    chart.points(
        "rungs",
        points,
        titles=[f"rung @ {fmt_value(x)} FLOPs" for x, _ in points],
        css="rung",
        color="#059669",
    )
    if target and predicted is not None:
        chart.points("forecast", [(target, predicted)], titles=[f"forecast @ {fmt_value(target)}"], css="forecast")
    measured = measured_target(forecast, metric)
    if measured:
        chart.points("measured target", [measured], titles=["measured target"], css="measured", color="#111827")
    return chart.render()


def ladder_summary(forecast: dict, root: int, step_rel: str) -> str:
    """The picture, the forecast in words, the rungs with links, and every other field."""
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
        if prediction.get("interval_note"):
            words.append(esc(prediction["interval_note"]))
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
            ]
        )
    rest = {k: v for k, v in forecast.items() if k not in ("rungs",)}
    return (
        ladder_chart(forecast)
        + ("".join(f'<div class="forecast-line">{w}</div>' for w in words) if words else note("no prediction"))
        + (table(["rung (evaluation)", "FLOPs", "parameters", "tokens", metric, "residual"], rows, cls="data rungs"))
        + kv_table(
            [
                (k, fmt_num(v) if not isinstance(v, list) else esc(json.dumps(v)[:300]))
                for k, v in flatten(rest).items()
            ][:80]
        )
    )
