"""The forecast check: a forecast read back beside the measured result of the run it forecast.

A ladder's point is to say what a big run will reach before it is paid for; whether it did is only known
once the run exists. This step reads a forecast step's `forecast.json` (the loss-law forecast or the
isoFLOP one) and the target run's evaluation (`results.json`), and records the forecast, its interval,
the measured value, the error, and whether the measurement fell in the interval, in `check.json`. The
target's compute is compared too: a run trained at other FLOPs than forecast is flagged, not hidden.
"""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass

from marin.step_config import StepConfig, input_field, output_field
from marin.storage import open_url, url_to_fs

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ForecastCheckConfig(StepConfig):
    """Compare a forecast with the target run's measured evaluation."""

    forecast: str = input_field("forecast output", holds_any=("forecast.json",))
    """A forecast step's output (`forecast.json`)."""
    evaluation: str = input_field("evaluation output", holds_any=("results.json",))
    """The target run's evaluate step output (`results.json`)."""
    output_path: str = output_field()
    """This step's folder: `check.json`."""


def _read(path: str) -> dict:
    with open_url(path, "r") as f:
        return json.load(f)


def measured_value(results: dict, metric: str, dataset: str | None, where: str) -> float:
    if dataset is None:
        return results[f"macro_{metric}"]
    if dataset not in results["datasets"]:
        raise KeyError(f"forecast_check: the forecast's dataset {dataset!r} is not in {where}")
    return results["datasets"][dataset][metric]


def compare(forecast: dict, results: dict, where: str = "results.json") -> dict:
    """The check record for one forecast (`forecast.json` contents) and one evaluation (`results.json`)."""
    prediction = forecast.get("prediction")
    metric = forecast.get("metric", "loss")
    if prediction is None:
        raise ValueError(f"forecast_check: the forecast made no prediction ({'; '.join(forecast.get('notes', []))})")
    predicted = prediction[metric]
    interval = prediction.get("interval")
    if isinstance(interval, dict):
        interval = interval.get(metric)
    measured = measured_value(results, metric, forecast.get("dataset"), where)
    flops_ratio = results["flops"] / prediction["flops"]
    notes = []
    if not 0.8 <= flops_ratio <= 1.25:
        notes.append(f"the run used {flops_ratio:.2f}x the forecast's compute: the comparison is not like for like")
    return {
        "metric": metric,
        "dataset": forecast.get("dataset"),
        "forecast": predicted,
        "interval": interval,
        "confidence": prediction.get("confidence"),
        "measured": measured,
        "error": measured - predicted,
        "relative_error": (measured - predicted) / predicted,
        "within_interval": None if interval is None else bool(interval[0] <= measured <= interval[1]),
        "forecast_flops": prediction["flops"],
        "measured_flops": results["flops"],
        "flops_ratio": flops_ratio,
        "measured_step": results.get("step"),
        "notes": notes,
    }


def forecast_check(config: ForecastCheckConfig) -> dict:
    """Write `check.json`: the forecast against the measured value."""
    from marin.storage.paths import portable_path

    where = posixpath.join(config.evaluation, "results.json")
    check = compare(_read(posixpath.join(config.forecast, "forecast.json")), _read(where), where)
    check["forecast_output"] = portable_path(config.forecast, config.output_path)
    check["evaluation_output"] = portable_path(config.evaluation, config.output_path)
    fs, plain = url_to_fs(config.output_path)
    fs.makedirs(plain, exist_ok=True)
    with fs.open(posixpath.join(plain, "check.json"), "w") as f:
        f.write(json.dumps(check, indent=2, sort_keys=True) + "\n")
    logger.info(
        "forecast %s %.4f (interval %s), measured %.4f: error %+.4f",
        check["metric"],
        check["forecast"],
        check["interval"],
        check["measured"],
        check["error"],
    )
    return check
