"""The forecast check: a forecast read back beside the measured result of the run it forecast.

A ladder's point is to say what a big run will reach before it is paid for; whether it did is only known
once the run exists. This step reads a forecast step's `forecast.json` (the loss-law forecast or the
isoFLOP one) and the target run's evaluation (`results.json`), and records the forecast, its interval,
the measured value, the error, and whether the measurement fell in the interval, in `check.json`. The
target's compute is compared too: a run trained at other FLOPs than forecast is flagged, not hidden.

A forecast is evidence only if it was written before the run it forecasts. Given the target's train
output (`train`), the check reads when the forecast's `forecast.json` was written and when the target
run started, both from the storage's own clock (file modification times, so no two hosts' clocks are
compared): the start is the older of the train step's `.executor_info` (written when its attempt began)
and its oldest checkpoint (an attempt of an earlier run that left checkpoints started no later). A
forecast written after that start is refused with an error: no `check.json` is written. `check.json`
names the forecast's step record (name, hash, the sha256 of the `forecast.json` it read, from the
forecast step's manifest); the two times are in `preregistration.json`, declared volatile, since they
differ between two identical runs while everything in `check.json` does not.
"""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass
from datetime import UTC, datetime

from marin.stepkit.config import StepConfig, input_field, output_field
from marin.storage import join, list_dir, modified_time, open_read, write_text
from marin.storage.layout import INFO_FILE, MANIFEST_FILE

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ForecastCheckConfig(StepConfig):
    """Compare a forecast with the target run's measured evaluation."""

    forecast: str = input_field("forecast output", holds_any=("forecast.json",))
    """A forecast step's output (`forecast.json`)."""
    evaluation: str = input_field("evaluation output", holds_any=("results.json",))
    """The target run's evaluate step output (`results.json`)."""
    output_path: str = output_field()
    """This step's folder: `check.json`, `preregistration.json`."""
    train: str | None = input_field("train output", default=None)
    """The target run's train step output: with it, a forecast written after that run started is refused."""


def _read(path: str) -> dict:
    with open_read(path, "r") as f:
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


def forecast_record(forecast_output: str) -> dict:
    """Which forecast was checked: its step's name and hash and the sha256 of its `forecast.json`."""
    from marin.storage import read_text

    info = json.loads(read_text(posixpath.join(forecast_output, INFO_FILE)) or "{}")
    manifest = json.loads(read_text(posixpath.join(forecast_output, MANIFEST_FILE)) or "{}")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    sha = None
    for entry in files if isinstance(files, list) else []:
        if isinstance(entry, dict) and entry.get("path") == "forecast.json":
            sha = entry.get("sha256")
    return {"step": info.get("name"), "hash": info.get("hash"), "forecast_sha256": sha}


def target_started_at(train_output: str) -> datetime | None:
    """When the target run began, on the storage's clock (see the module docstring)."""
    times = [modified_time(join(train_output, INFO_FILE))]
    checkpoints = join(train_output, "checkpoints")
    for name in list_dir(checkpoints):
        if name.startswith("step-"):
            times.append(modified_time(join(checkpoints, name, "metadata.json")))
    found = [t for t in times if t is not None]
    return min(found) if found else None


def preregistration(config: ForecastCheckConfig) -> dict:
    """When the forecast was written and the target started; raises when the forecast came after."""
    written = modified_time(posixpath.join(config.forecast, "forecast.json"))
    if config.train is None:
        return {"forecast_written_at": _iso(written), "target_started_at": None, "preregistered": None}
    started = target_started_at(config.train)
    if written is None or started is None:
        raise FileNotFoundError(
            f"forecast_check: cannot tell when {'the forecast was written' if written is None else 'the target started'}"
            f" ({config.forecast if written is None else config.train})"
        )
    if written > started:
        raise ValueError(
            f"forecast_check: the forecast {config.forecast}/forecast.json was written at {_iso(written)}, after the "
            f"target run {config.train} started at {_iso(started)}: it is not a forecast of that run (pre-registration "
            "needs the forecast first; delete the target's folder and train it again to check this forecast)"
        )
    return {"forecast_written_at": _iso(written), "target_started_at": _iso(started), "preregistered": True}


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if t else None


def forecast_check(config: ForecastCheckConfig) -> dict:
    """Write `check.json`: the forecast against the measured value (refusing a forecast made too late)."""
    from marin.storage import write_volatile_list
    from marin.storage.paths import portable_path

    times = preregistration(config)
    where = posixpath.join(config.evaluation, "results.json")
    check = compare(_read(posixpath.join(config.forecast, "forecast.json")), _read(where), where)
    check["forecast_output"] = portable_path(config.forecast, config.output_path)
    check["forecast_record"] = forecast_record(config.forecast)
    check["evaluation_output"] = portable_path(config.evaluation, config.output_path)
    check["train_output"] = portable_path(config.train, config.output_path) if config.train else None
    check["preregistered"] = times["preregistered"]
    write_text(join(config.output_path, "check.json"), json.dumps(check, indent=2, sort_keys=True) + "\n")
    write_text(join(config.output_path, "preregistration.json"), json.dumps(times, indent=2, sort_keys=True) + "\n")
    write_volatile_list(config.output_path, ["preregistration.json"])
    check.update({k: v for k, v in times.items() if k != "preregistered"})
    logger.info(
        "forecast %s %.4f (interval %s), measured %.4f: error %+.4f",
        check["metric"],
        check["forecast"],
        check["interval"],
        check["measured"],
        check["error"],
    )
    return check
