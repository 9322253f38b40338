"""A target run watched against its forecast while it trains, and stopped when it leaves it (if asked).

A ladder's forecast says what the target's training loss should be at every point of its run (the
forecast step's `prediction.curve`: the rungs' curves fitted across sizes at each 5 % of the run, with a
band; marin.evaluation.forecast_curve). A target with a broken learning rate, broken data or a broken
model leaves that band within its first steps; without a watch it is found only after the whole run has
been paid for. The watch reads the band once, before training, and while the run trains compares, every
`forecast_check_every` steps, the mean training loss of the steps since the last comparison with the band
at that fraction of the run (interpolated between the forecast's points; before the first point, no
comparison). A run outside the band for `forecast_patience` comparisons in a row is flagged: in its metrics
(every compared step's line holds `forecast/loss`, `forecast/low`, `forecast/high`, `forecast/outside`),
in `forecast_watch.json` in its folder (the step page shows it), and on the console (a warning). With
`stop_off_forecast` the run is then stopped: the train step fails with `OffForecast`, naming the step,
the losses against the band and the compute saved (the steps not trained, and their 6·N·D FLOPs), so a
stopped run is never taken for a finished one.

It is a pair of Levanter trackers (a tracker sees every logged figure, the training loss included, as the
metrics.jsonl tracker does): the first of the run's trackers compares and adds its figures to the step's
metrics, so every tracker after it records them (metrics.jsonl, W&B); the last raises `OffForecast` once
the run is to stop, after the others have recorded the step that stopped it. Its cost per step is one dictionary lookup and a running sum, and
one interpolation every `forecast_check_every` steps (docs/benchmarks-training.md).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

WATCH_FILE = "forecast_watch.json"
STEP_DONE = "throughput/hook_time"
"""What Levanter logs once a step's hooks have all run (marin.training.metrics writes the step's line then)."""


class OffForecast(RuntimeError):
    """The run left its forecast's band and the experiment asked for it to be stopped."""


def read_band(forecast_output: str) -> list[dict]:
    """The forecast's curve (`prediction.curve` of forecast.json), checked: an early, clear error without one."""
    from marin.storage import join, read_text

    where = join(forecast_output, "forecast.json")
    text = read_text(where)
    if text is None:
        raise FileNotFoundError(f"train.watch_forecast: {where} does not exist (run the forecast step first)")
    curve = (json.loads(text).get("prediction") or {}).get("curve")
    if not curve:
        raise ValueError(
            f"train.watch_forecast: {where} holds no predicted curve (prediction.curve): the forecast needs 4+ rungs "
            "with training curves (their metrics.jsonl)"
        )
    return sorted(curve, key=lambda p: p["fraction"])


def band_at(band: list[dict], fraction: float) -> tuple[float, float, float] | None:
    """(loss, low, high) at `fraction` of the run, linear between the forecast's points; None before the first."""
    if fraction < band[0]["fraction"] - 1e-9:
        return None
    for before, after in zip(band, band[1:], strict=False):
        if fraction <= after["fraction"]:
            w = (fraction - before["fraction"]) / (after["fraction"] - before["fraction"])
            return tuple(before[k] + w * (after[k] - before[k]) for k in ("loss", "low", "high"))  # type: ignore[return-value]
    last = band[-1]
    return last["loss"], last["low"], last["high"]


@dataclass
class Watch:
    """The comparison itself, fed one step's training loss at a time (no Levanter in it)."""

    band: list[dict]
    num_train_steps: int
    every: int
    patience: int
    stop: bool
    flops_per_step: float
    output_path: str | None = None
    comparisons: list[dict] = field(default_factory=list)
    outside_in_a_row: int = 0
    flagged_at: int | None = None
    last_step: int = -1
    """The last step fed: a step logged again (Levanter repeats the last step's loss at the end) is not fed twice."""
    stop_message: str | None = None
    """Set when the run is to stop: `raise_if_stopped` raises it (after every tracker has logged the step)."""
    _sum: float = 0.0
    _count: int = 0
    _nonfinite: int = 0

    def feed(self, step: int, loss: float | None) -> dict | None:
        """The step's loss; on a comparison step, the figures to add to its metrics (else None)."""
        if step <= self.last_step:
            return None
        self.last_step = step
        if loss is None or not math.isfinite(loss):
            self._nonfinite += 1
        else:
            self._sum += loss
            self._count += 1
        if (step + 1) % self.every and step + 1 != self.num_train_steps:
            return None
        fraction = (step + 1) / self.num_train_steps
        expected = band_at(self.band, fraction)
        mean = self._sum / self._count if self._count and not self._nonfinite else math.inf
        self._sum, self._count, self._nonfinite = 0.0, 0, 0
        if expected is None:
            return None
        loss_expected, low, high = expected
        outside = not low <= mean <= high
        self.outside_in_a_row = self.outside_in_a_row + 1 if outside else 0
        record = {"step": step, "fraction": fraction, "loss": mean, "forecast": loss_expected}
        self.comparisons.append({**record, "low": low, "high": high, "outside": outside})
        figures = {"forecast/loss": loss_expected, "forecast/low": low, "forecast/high": high}
        figures["forecast/outside"] = int(outside)
        if outside:
            logger.warning(
                "step %d (%.0f%% of the run): training loss %.4f outside the forecast's band %.4f-%.4f (%d in a row)",
                step,
                100 * fraction,
                mean,
                low,
                high,
                self.outside_in_a_row,
            )
        if self.outside_in_a_row >= self.patience and self.flagged_at is None:
            self.flagged_at = step
            figures["forecast/off"] = 1
            self._flag(step)
        return figures

    def summary(self) -> dict:
        steps_left = self.num_train_steps - 1 - self.flagged_at if self.flagged_at is not None else 0
        return {
            "flagged": self.flagged_at is not None,
            "flagged_at_step": self.flagged_at,
            "stop_off_forecast": self.stop,
            "patience": self.patience,
            "check_every_steps": self.every,
            "num_train_steps": self.num_train_steps,
            "saved": {
                "steps": steps_left if self.stop else 0,
                "fraction_of_run": (steps_left / self.num_train_steps) if self.stop else 0.0,
                "flops_6nd": steps_left * self.flops_per_step if self.stop else 0.0,
            },
            "comparisons": self.comparisons,
        }

    def write(self) -> None:
        if self.output_path is None:
            return
        from marin.storage import join, write_text

        write_text(join(self.output_path, WATCH_FILE), json.dumps(self.summary(), indent=2, sort_keys=True) + "\n")

    def _flag(self, step: int) -> None:
        self.write()
        last = self.comparisons[-1]
        saved = self.summary()["saved"]
        words = (
            f"the run left its forecast: {self.patience} comparisons in a row outside the band, the last at step "
            f"{step} ({last['fraction']:.0%} of the run): training loss {last['loss']:.4f} against "
            f"{last['low']:.4f}-{last['high']:.4f}"
        )
        if self.stop:
            message = (
                f"{words}; stopped (stop_off_forecast): {saved['steps']} of {self.num_train_steps} steps "
                f"({saved['fraction_of_run']:.0%}, {saved['flops_6nd']:.3g} FLOPs) not spent"
            )
            logger.error(message)
            self.stop_message = message
            return
        logger.warning("%s (flagged; training goes on: stop_off_forecast is off)", words)

    def raise_if_stopped(self) -> None:
        """Raise `OffForecast` once the run has been flagged with `stop` on."""
        if self.stop_message is not None:
            raise OffForecast(self.stop_message)


_CONFIG_CLASS: type | None = None


def _config_class() -> type:
    """The Levanter TrackerConfig of the watch, registered (as `marin_forecast_watch`) on first use, so that
    Levanter can write the run's configuration with it; this module imports Levanter only then."""
    global _CONFIG_CLASS
    if _CONFIG_CLASS is not None:
        return _CONFIG_CLASS
    from levanter.tracker import Tracker
    from levanter.tracker.tracker import TrackerConfig

    class WatchTracker(Tracker):
        name = "forecast_watch"

        def __init__(self, watch: Watch, role: str):
            self.watch, self.role = watch, role

        def log(self, metrics, *, step, commit=None):
            if self.role == "stop":
                # after the step's last figure (metrics.jsonl writes the step's line then), or at the next step
                if STEP_DONE in metrics or (self.watch.flagged_at is not None and step > self.watch.flagged_at):
                    self.watch.raise_if_stopped()
                return
            if "train/loss" not in metrics:
                return
            value = metrics["train/loss"]
            figures = self.watch.feed(step, float(value.item() if hasattr(value, "item") else value))
            if figures and isinstance(metrics, dict):
                metrics.update(figures)

        def log_hyperparameters(self, hparams):
            pass

        def log_summary(self, metrics):
            pass

        def log_artifact(self, artifact_path, *, name=None, type=None):
            pass

        def finish(self):
            if self.role == "figures":
                self.watch.write()

    @TrackerConfig.register_subclass("marin_forecast_watch")
    @dataclass
    class WatchTrackerConfig(TrackerConfig):
        role: str = "figures"
        """figures: compares and adds its figures to the step's metrics (first of the trackers); stop: raises
        OffForecast once the run is to stop (last, after every tracker has recorded the step)."""

        def init(self, run_id):
            return WatchTracker(self._watch, self.role)

    _CONFIG_CLASS = WatchTrackerConfig
    return _CONFIG_CLASS


def tracker_configs(watch: Watch) -> tuple:
    """The two Levanter tracker configs of `watch`: the first to put before the run's trackers, the second after."""
    configs = []
    for role in ("figures", "stop"):
        config = _config_class()(role=role)
        object.__setattr__(config, "_watch", watch)  # not a field: the run's configuration dump leaves it out
        configs.append(config)
    return tuple(configs)


def watch_for(config, write: bool = True) -> Watch | None:
    """The watch a TrainConfig asks for (`watch_forecast`), its band read now, before anything trains; every
    host of a gang watches (so that all stop together), only the one that `write`s records the watch."""
    if config.watch_forecast is None:
        return None
    from marin.storage import join, read_text

    band = read_band(config.watch_forecast)
    target = json.loads(read_text(join(config.watch_forecast, "forecast.json")))["prediction"]["flops"]
    every = config.forecast_check_every or max(1, config.num_train_steps // 20)
    return Watch(
        band=band,
        num_train_steps=config.num_train_steps,
        every=every,
        patience=config.forecast_patience,
        stop=config.stop_off_forecast,
        flops_per_step=float(target) / config.num_train_steps,
        output_path=config.output_path if write else None,
    )


def watched(lev_config, watch: Watch | None):
    """`lev_config` with the watch's tracker first among its trackers (unchanged without a watch)."""
    if watch is None:
        return lev_config
    import dataclasses

    trackers = lev_config.trainer.tracker
    trackers = trackers if isinstance(trackers, tuple) else (trackers,)
    first, last = tracker_configs(watch)
    trainer = dataclasses.replace(lev_config.trainer, tracker=(first, *trackers, last))
    return dataclasses.replace(lev_config, trainer=trainer)
