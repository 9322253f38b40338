"""The forecast step: fit loss(C) = a·C^(−b) + c to a scaling ladder's evaluations and extrapolate.

This is how a lab de-risks a big run: train a ladder of small models at compute-matched budgets
(C = 6·N·D FLOPs for N parameters and D tokens), fit the law to their held-out losses, and read off the
loss the big run should reach before paying for it. With the rungs' compute spread over orders of
magnitude, the fit is done on C / C_ref (C_ref the geometric mean of the rungs' compute) so that the
least-squares problem is well conditioned; `a` is reported for raw FLOPs.

The interval is a prediction interval for one run at the target, the quantity the check compares against,
made by a residual bootstrap: the rungs' residuals (scaled by sqrt(n / (n − 3)) for the three fitted
parameters) are resampled onto the fitted law, the law is refitted to each resample (with the same bounds
as the fit: a, b > 0, 0 <= c <= the lowest rung's loss), and each refit's prediction at the target gets the
target run's own seed noise, the rungs' residual standard deviation times a Student t(n − 3) draw. Refits
keep every draw a law that fits data like the rungs'; the alternative kept as `interval="t_draws"`
draws the parameters from a multivariate t with the fit's linearised covariance, and since a·C^(−b) + c
is far from linear in b and c, its draws reach laws no refit gives: on simulated ladders like the
tutorial's it was three times as wide and covered less (benchmarks/forecast_interval_sim.py). With
exactly three rungs the law goes through every point and no interval can be given (it is null, with the
reason).

A fit the rungs do not constrain is said, never hidden: `constrained` is false and `notes` say why when the
irreducible term c sits on a bound (0, or the lowest rung's loss: the rungs cannot tell the curvature),
when there is no interval, or when the interval is wider than `max_interval_fraction` of the forecast.
The same notes are the prediction's `interval_note` and are logged as warnings.

Before the fit, every rung is checked against its family (marin.evaluation.rung_check: its training curve
from its train step's metrics.jsonl, its final loss against the other rungs); flagged rungs are named
with their reasons, left out of the fit (`drop_flagged`), and the forecast with every rung is given
beside it (`prediction_other`). The prediction also holds the target's forecast training curve
(`prediction.curve`, marin.evaluation.forecast_curve), which a target can be watched against while it
trains (marin.training.forecast_watch).

Inputs: evaluate steps' outputs (`results.json`). Output: `forecast.json` (fit, per-rung residuals and
flags, prediction with its interval and curve) and `forecast.png` (the rungs, the flagged ones apart,
the fitted law, the prediction).
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
from dataclasses import dataclass
from typing import Literal

from marin.evaluation.rung_check import train_curve
from marin.evaluation.scaling_law import Fit, fit_law, law  # noqa: F401 (law: re-exported for its users)
from marin.stepkit.config import StepConfig, input_field, output_field, versioned_unless_default
from marin.storage import join, open_read, write_bytes, write_text

logger = logging.getLogger(__name__)


_METRICS = ("loss", "bpb")


@dataclass(frozen=True, kw_only=True)
class ForecastConfig(StepConfig):
    """Fit the scaling law to evaluations and predict the loss at `target_flops`."""

    evaluations: list[str] = input_field("evaluation output", holds_any=("results.json",))
    """Evaluate steps' outputs (each holds `results.json`), one per rung."""
    output_path: str = output_field()
    """This step's folder: `forecast.json`, `forecast.png`."""
    target_flops: float
    """Compute (6·N·D FLOPs) of the run to forecast."""
    dataset: str | None = versioned_unless_default(None)
    """Which held-out set's figure to fit; None: the macro average over the sets."""
    metric: str = versioned_unless_default("loss")
    """loss (nats per token) or bpb (bits per byte)."""
    confidence: float = versioned_unless_default(0.95)
    """Coverage of the prediction interval."""
    interval: Literal["bootstrap", "t_draws"] = "bootstrap"
    """How the prediction interval is made: refits to resampled residuals, or draws of the parameters from
    their linearised covariance (both with the target run's own noise added)."""
    samples: int = versioned_unless_default(1000)
    """Bootstrap refits (or parameter draws) used to form the interval."""
    seed: int = versioned_unless_default(0)
    """Seed of the resampling."""
    max_interval_fraction: float = versioned_unless_default(0.1)
    """An interval wider than this fraction of the forecast marks the fit unconstrained (a note, not an error)."""
    band_sigmas: float = versioned_unless_default(5.0)
    """A rung further than this many noise units from what the other rungs predict for it is flagged off the
    law (marin.evaluation.rung_check) and left out of the fit."""
    drop_flagged: bool = versioned_unless_default(True)
    """Fit the forecast to the rungs not flagged (the forecast with every rung is kept beside it); False fits
    every rung and gives the forecast without the flagged ones beside it."""

    def validate(self) -> None:
        if len(self.evaluations) < 3:
            raise ValueError(f"forecast.evaluations needs at least 3 rungs to fit a, b, c; got {len(self.evaluations)}")
        if self.metric not in _METRICS:
            raise ValueError(f"forecast.metric must be one of {_METRICS}, got {self.metric!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"forecast.confidence must be in (0, 1), got {self.confidence}")
        if not self.target_flops > 0:
            raise ValueError(f"forecast.target_flops must be > 0, got {self.target_flops}")


def prediction_interval(fit: Fit, flops: float, confidence: float, samples: int, seed: int):
    """(low, high) of the predicted loss at `flops` from Student-t draws of the parameters with the fit's
    linearised covariance (kept where the law is one) plus the target's own noise, or None."""
    import numpy as np

    if fit.covariance is None:
        return None
    rng = np.random.default_rng(seed)
    big_a = fit.a * fit.reference_flops ** (-fit.b)
    spread = rng.multivariate_normal(np.zeros(3), np.asarray(fit.covariance), size=samples)
    spread /= np.sqrt(rng.chisquare(fit.dof, size=samples) / fit.dof)[:, None]
    draws = np.array([big_a, fit.b, fit.c]) + spread
    feasible = (draws[:, 0] > 0) & (draws[:, 1] > 0) & (draws[:, 2] >= 0)
    if fit.c_ceiling is not None:
        feasible &= draws[:, 2] <= fit.c_ceiling
    if feasible.sum() < max(20, samples // 20):
        return None
    draws = draws[feasible]
    x = flops / fit.reference_flops
    preds = draws[:, 0] * x ** (-draws[:, 1]) + draws[:, 2] + run_noise(rng, fit.residual_sd, fit.dof, len(draws))
    tail = (1 - confidence) / 2
    return float(np.quantile(preds, tail)), float(np.quantile(preds, 1 - tail))


def scaled_residuals(residuals, dof: int):
    """Residuals scaled by sqrt(n / dof): a fit with n − dof parameters leaves residuals smaller than the
    rungs' noise, and resampled onto the fitted curve the scaled ones give data with the rungs' spread."""
    import numpy as np

    residuals = np.asarray(residuals, dtype=float)
    return residuals * math.sqrt(residuals.size / dof)


def run_noise(rng, residual_sd: float, dof: int, size: int | None = None):
    """One run's own noise about the law: the residual sd times Student's t(dof) draws. Added to a fitted
    prediction it makes the interval one for the next single run (what a check measures), not for the law."""
    return residual_sd * (float(rng.standard_t(dof)) if size is None else rng.standard_t(dof, size))


MIN_BOOTSTRAP_DOF = 2
"""Residual degrees of freedom (n − 3) the bootstrap needs: on simulated ladders, four rungs' one residual
degree of freedom gave intervals covering 82 % for a nominal 95 %, five rungs' two 93 %."""


def bootstrap_interval(fit: Fit, flops, losses, target: float, confidence: float, samples: int, seed: int):
    """(low, high) of the predicted loss at `target` by a residual bootstrap, or None.

    The rungs' residuals (scaled by sqrt(n / (n − 3)) for the three fitted parameters) are resampled onto
    the fitted law, the law is refitted to each resample, and each refit's prediction gets the target
    run's own noise (the residual standard deviation times a t(n − 3) draw). Refitting keeps every draw a
    law that fits data like the rungs', where drawing the parameters from their linearised covariance
    does not: a·C^(−b) + c is far from linear in b and c, and such draws reach laws no refit would give."""
    import numpy as np

    if fit.dof < MIN_BOOTSTRAP_DOF:
        return None
    flops = np.asarray(flops, dtype=float)
    losses = np.asarray(losses, dtype=float)
    rng = np.random.default_rng(seed)
    fitted = fit.predict(flops)
    residuals = scaled_residuals(losses - fitted, fit.dof)
    preds = []
    for _ in range(samples):
        resampled = fitted + rng.choice(residuals, len(losses), replace=True)
        try:
            refit = fit_law(flops, resampled, start=fit)
        except RuntimeError:
            continue
        preds.append(float(refit.predict(target)) + run_noise(rng, fit.residual_sd, fit.dof))
    if len(preds) < max(20, samples // 2):
        return None
    tail = (1 - confidence) / 2
    return float(np.quantile(preds, tail)), float(np.quantile(preds, 1 - tail))


def _read(path: str) -> dict:
    with open_read(path, "r") as f:
        return json.load(f)


def _rung(results: dict, config: ForecastConfig, where: str) -> float:
    if config.dataset is None:
        return results[f"macro_{config.metric}"]
    if config.dataset not in results["datasets"]:
        raise KeyError(f"forecast.dataset {config.dataset!r} is not in {where} (has {sorted(results['datasets'])})")
    return results["datasets"][config.dataset][config.metric]


def fit_and_predict(config: ForecastConfig, rungs: list[dict]) -> tuple[Fit, float, tuple | None, list[str]]:
    """The law fitted to `rungs`, its prediction at the target with the interval, and the notes on it."""
    flops, values = [r["flops"] for r in rungs], [r[config.metric] for r in rungs]
    fit = fit_law(flops, values)
    predicted = float(fit.predict(config.target_flops))
    if config.interval == "bootstrap":
        interval = bootstrap_interval(
            fit, flops, values, config.target_flops, config.confidence, config.samples, config.seed
        )
    else:
        interval = prediction_interval(fit, config.target_flops, config.confidence, config.samples, config.seed)
    notes = unconstrained_notes(fit, predicted, interval, len(rungs), config.max_interval_fraction, config.interval)
    return fit, predicted, interval, notes


def check_rungs(config: ForecastConfig, rungs: list[dict], curves: list[list[float | None] | None]) -> dict:
    """Flag the rungs off their family (marin.evaluation.rung_check): each rung gets `flags` (the reasons,
    empty when it is in the band) and `law_deviation` (its leave-one-out residual in noise units)."""
    from marin.evaluation.rung_check import RungCheckSettings, curve_reasons, law_outliers

    settings = RungCheckSettings(band_sigmas=config.band_sigmas)
    checked = law_outliers([r["flops"] for r in rungs], [r[config.metric] for r in rungs], settings)
    for i, (rung, curve) in enumerate(zip(rungs, curves, strict=True)):
        rung["flags"] = [
            *(curve_reasons(curve, settings) if curve is not None else []),
            *([checked.flagged[i]] if i in checked.flagged else []),
        ]
        rung["curve_checked"] = curve is not None
        rung["law_deviation"] = checked.deviation.get(i)
    return {
        "band_sigmas": config.band_sigmas,
        "noise": checked.noise,
        "note": checked.note,
        "curves_checked": sum(c is not None for c in curves),
    }


def _prediction(config: ForecastConfig, predicted: float, interval, notes: list[str]) -> dict:
    return {
        "flops": config.target_flops,
        config.metric: predicted,
        "interval": list(interval) if interval else None,
        "confidence": config.confidence,
        "interval_note": "; ".join(notes) or None,
    }


def forecast(config: ForecastConfig) -> dict:
    """Check the rungs, fit the law to them, predict at the target, write `forecast.json` and `forecast.png`."""
    from marin.storage.paths import portable_path

    rungs, curves = [], []
    for evaluation in config.evaluations:
        where = posixpath.join(evaluation, "results.json")
        results = _read(where)
        rungs.append(
            {
                "evaluation": portable_path(evaluation, config.output_path),
                "checkpoint": results["checkpoint"],
                "parameter_count": results["parameter_count"],
                "tokens": results["tokens"],
                "flops": results["flops"],
                config.metric: _rung(results, config, where),
            }
        )
        curves.append(train_curve(evaluation, results))
    order = sorted(range(len(rungs)), key=lambda i: rungs[i]["flops"])
    rungs, curves = [rungs[i] for i in order], [curves[i] for i in order]
    rung_check = check_rungs(config, rungs, curves)
    flagged = [r for r in rungs if r["flags"]]
    kept = [r for r in rungs if not r["flags"]]
    if flagged and len(kept) < 3:
        rung_check["note"] = (
            f"{len(flagged)} of {len(rungs)} rungs flagged: fewer than 3 are left, so the fit uses every rung"
        )
    used = kept if flagged and config.drop_flagged and len(kept) >= 3 else rungs
    fit, predicted, interval, notes = fit_and_predict(config, used)
    for r in rungs:
        r["fitted"] = float(fit.predict(r["flops"]))
        r["residual"] = r[config.metric] - r["fitted"]
        r["in_fit"] = any(r is u for u in used)
    alternative = None
    if flagged and len(kept) >= 3:
        other = rungs if used is kept else kept
        other_fit, other_predicted, other_interval, other_notes = fit_and_predict(config, other)
        alternative = {
            "rungs": "every rung, the flagged included" if other is rungs else "the rungs not flagged",
            "fit": {"a": other_fit.a, "b": other_fit.b, "c": other_fit.c, "reference_flops": other_fit.reference_flops},
            **_prediction(config, other_predicted, other_interval, other_notes),
        }
    used_rungs = [r for r in rungs if r["in_fit"]]
    from marin.evaluation.forecast_curve import forecast_curve

    with_curves = [(r, c) for r, c in zip(rungs, curves, strict=True) if r["in_fit"] and c]
    curve = forecast_curve([r["flops"] for r, _ in with_curves], [c for _, c in with_curves], config.target_flops)
    out = {
        "law": f"{config.metric}(C) = a * C^(-b) + c, C = 6 * N * D FLOPs",
        "metric": config.metric,
        "dataset": config.dataset,
        "fit": {"a": fit.a, "b": fit.b, "c": fit.c, "reference_flops": fit.reference_flops},
        "covariance_scaled": fit.covariance,
        "rungs": rungs,
        "rmse": math.sqrt(sum(r["residual"] ** 2 for r in used_rungs) / len(used_rungs)),
        "prediction": {
            **_prediction(config, predicted, interval, notes),
            "cost": target_cost(config.target_flops),
            "curve": curve,
        },
        "flagged_rungs": [{"evaluation": r["evaluation"], "flops": r["flops"], "reasons": r["flags"]} for r in flagged],
        "rung_check": rung_check,
        "prediction_other": alternative,
        "constrained": not notes,
        "notes": notes,
    }
    write_text(join(config.output_path, "forecast.json"), json.dumps(out, indent=2, sort_keys=True) + "\n")
    write_bytes(join(config.output_path, "forecast.png"), plot(fit, rungs, config, predicted, interval))
    logger.info(
        "forecast at %.3g FLOPs: %s %.4f (interval %s)", config.target_flops, config.metric, predicted, interval
    )
    for note in notes:
        logger.warning("forecast not constrained by its rungs: %s", note)
    for r in flagged:
        logger.warning("rung %s is off its family: %s", r["evaluation"], "; ".join(r["flags"]))
    if alternative is not None:
        logger.warning(
            "forecast with %s: %s %.4f (interval %s)",
            alternative["rungs"],
            config.metric,
            alternative[config.metric],
            alternative["interval"],
        )
    return out


def target_cost(flops: float) -> dict:
    """The target's cost at its compute (6·N·D FLOPs): device-hours on one CPU core and on one H100 at the
    assumed MFU (marin.training.cost); the law knows C only, not the model, so 6·N·D is the count."""
    from marin.training.cost import CostSettings, estimate

    settings = CostSettings()
    on = [estimate(flops, res, settings) for res in ({"cpu": 1}, {"gpu": 1})]
    return {
        "flops_6nd": flops,
        "device_hours": {e["device"]: e["device_hours"] for e in on},
        "peak_flops_per_s": {e["device"]: e["peak_flops_per_s"] for e in on},
        "mfu": settings.mfu,
    }


def unconstrained_notes(
    fit: Fit, predicted: float, interval, rungs: int, max_fraction: float, method: str = "bootstrap"
) -> list[str]:
    """Why the rungs do not constrain the forecast (empty when they do)."""
    notes = []
    bound = fit.c_on_bound()
    if bound is not None:
        notes.append(
            f"UNCONSTRAINED: the irreducible loss c = {fit.c:.3g} sits on its bound ({bound}); the rungs do not "
            "show the curve's bend, so the extrapolation rests on the power law alone"
        )
    if interval is None:
        notes.append(
            "UNCONSTRAINED: 3 rungs fit a, b, c exactly: add rungs for an interval"
            if rungs == 3
            else f"UNCONSTRAINED: {rungs} rungs leave {rungs - 3} residual degree(s) of freedom, too few to "
            f"resample: {MIN_BOOTSTRAP_DOF + 3} rungs or more give an interval"
            if method == "bootstrap" and rungs - 3 < MIN_BOOTSTRAP_DOF
            else "UNCONSTRAINED: no interval (too few bootstrap refits converged)"
            if method == "bootstrap"
            else "UNCONSTRAINED: the fit's covariance gives no interval (too few feasible parameter draws)"
        )
    elif interval[1] - interval[0] > max_fraction * abs(predicted):
        notes.append(
            f"UNCONSTRAINED: the {interval[0]:.3g}-{interval[1]:.3g} interval is wider than "
            f"{max_fraction:.0%} of the forecast {predicted:.3g}"
        )
    return notes


def plot(fit: Fit, rungs: list[dict], config: ForecastConfig, predicted: float, interval) -> bytes:
    """The rungs, the fitted law out to the target, and the prediction, as PNG bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    flops = np.array([r["flops"] for r in rungs])
    values = np.array([r[config.metric] for r in rungs])
    grid = np.geomspace(min(flops.min(), config.target_flops) / 1.5, max(flops.max(), config.target_flops) * 1.5, 200)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    ax.plot(grid, fit.predict(grid), color="tab:blue", label=f"fit: {fit.a:.3g}·C^-{fit.b:.3f} + {fit.c:.3f}")
    off = np.array([bool(r.get("flags")) for r in rungs])
    ax.scatter(flops[~off], values[~off], color="tab:orange", zorder=3, label="ladder rungs")
    if off.any():
        ax.scatter(flops[off], values[off], color="tab:red", marker="x", s=60, zorder=4, label="flagged rungs")
    if interval is not None:
        ax.errorbar(
            [config.target_flops],
            [predicted],
            yerr=[[predicted - interval[0]], [interval[1] - predicted]],
            fmt="*",
            color="tab:red",
            markersize=12,
            capsize=4,
            label=f"forecast ({config.confidence:.0%} interval {interval[0]:.3g}–{interval[1]:.3g})",
        )
        shown = np.concatenate([values, [predicted], fit.predict(grid)])
        span = shown.max() - shown.min()
        low, high = shown.min() - 0.25 * span, shown.max() + 0.25 * span
        if interval[0] < low or interval[1] > high:
            ax.set_ylim(low, high)
    else:
        ax.plot([config.target_flops], [predicted], "*", color="tab:red", markersize=12, label="forecast")
    ax.set_xscale("log")
    ax.set_xlabel("compute C = 6·N·D (FLOPs)")
    ax.set_ylabel(f"held-out {config.metric}" + (f" ({config.dataset})" if config.dataset else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
