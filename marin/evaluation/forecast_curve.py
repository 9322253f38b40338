"""The target's whole training curve, forecast from the rungs' curves, with a band a running target is held to.

A ladder's rungs are trained the same way at every size (the same schedule's shape, the same tokens per
parameter), so at a given fraction f of its steps each rung has seen the same share of its tokens at the
same point of its learning-rate schedule. At each f the law loss_f(C) = a_f·C^(−b_f) + c_f is fitted
across the rungs (C each rung's whole compute, as in the forecast) to their training loss there (the mean
over a window of ±`window` of the run around f, which averages out the batch noise), and read at the
target's compute: the loss the target should show at f of its steps. The band at f is the prediction ±
`band_sigmas` times the rungs' residual standard deviation about that fit, at least `min_band_fraction` of
the prediction: it is a tolerance for one run's training loss, not a confidence interval, and is meant
to catch a run that is off its family by more than a ladder's seed noise (a broken learning rate, broken
data), not to grade a healthy one.

The curve is of training loss (what every step logs), the quantity the target's watch compares
(marin.training.forecast_watch); the final held-out forecast is the forecast step's own prediction.
"""

from __future__ import annotations

import math

FRACTIONS = tuple(round(0.05 * k, 2) for k in range(1, 21))
"""Where the curve is forecast: every 5 % of the run."""


def window_mean(curve: list[float | None], fraction: float, window: float) -> float | None:
    """The mean finite training loss over the steps within ±window of `fraction` of the run."""
    n = len(curve)
    lo = max(0, math.floor((fraction - window) * n))
    hi = min(n, max(lo + 1, math.ceil((fraction + window) * n)))
    values = [v for v in curve[lo:hi] if v is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def forecast_curve(
    flops: list[float],
    curves: list[list[float | None]],
    target_flops: float,
    *,
    window: float = 0.025,
    band_sigmas: float = 4.0,
    min_band_fraction: float = 0.03,
) -> list[dict] | None:
    """[{fraction, loss, low, high}] of the target's training loss, or None with fewer than 4 rung curves."""
    from marin.evaluation.scaling_law import fit_law

    if len(curves) < 4:
        return None
    points = []
    for f in FRACTIONS:
        pairs = [(c, window_mean(curve, f, window)) for c, curve in zip(flops, curves, strict=True)]
        pairs = [(c, v) for c, v in pairs if v is not None]
        if len(pairs) < 4:
            continue
        try:
            fit = fit_law([c for c, _ in pairs], [v for _, v in pairs])
        except RuntimeError:
            continue
        predicted = float(fit.predict(target_flops))
        half = max(band_sigmas * fit.residual_sd, min_band_fraction * abs(predicted))
        points.append({"fraction": f, "loss": predicted, "low": predicted - half, "high": predicted + half})
    return points or None
