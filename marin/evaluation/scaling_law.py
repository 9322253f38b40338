"""The law a scaling ladder is fitted to, loss(C) = a·C^(−b) + c, and its least-squares fit.

Shared by the forecast step, the check of its rungs (marin.evaluation.rung_check) and the forecast of the
target's curve (marin.evaluation.forecast_curve). The fit is done on C / C_ref (C_ref the geometric mean of
the points' compute) so that it is well conditioned over orders of magnitude of compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def law(flops, a: float, b: float, c: float):
    return a * flops ** (-b) + c


@dataclass(frozen=True)
class Fit:
    a: float
    b: float
    c: float
    reference_flops: float
    covariance: list[list[float]] | None
    """Covariance of (A, b, c), where A = a·reference_flops^(−b) is the coefficient on C / C_ref."""
    c_ceiling: float | None = None
    """The upper bound on c in the fit (the lowest rung's loss)."""
    residual_sd: float = 0.0
    """Standard deviation of the rungs about the law, with n − 3 degrees of freedom: one run's own noise."""
    dof: int = 0
    """Residual degrees of freedom, n − 3."""

    def c_on_bound(self, tolerance: float = 1e-3) -> str | None:
        """'0' or 'the lowest rung loss' when c sits on that bound, else None."""
        if self.c <= tolerance * max(self.c_ceiling or 1.0, 1.0):
            return "0"
        if self.c_ceiling is not None and self.c >= self.c_ceiling * (1 - tolerance):
            return "the lowest rung's loss"
        return None

    def predict(self, flops):
        import numpy as np

        return law(np.asarray(flops, dtype=float), self.a, self.b, self.c)

    def parameter_sd(self, flops: float) -> float:
        """Standard deviation of the fitted law's value at `flops` from the parameters' uncertainty alone
        (first order, through the covariance); 0 where the fit has no covariance.

        Small between the points the law was fitted to and growing outside them: a point predicted by
        extrapolation is less certain than one the fit brackets."""
        import numpy as np

        if self.covariance is None:
            return 0.0
        x = flops / self.reference_flops
        power = x ** (-self.b)
        big_a = self.a * self.reference_flops ** (-self.b)
        gradient = np.array([power, -big_a * power * math.log(x), 1.0])
        return math.sqrt(max(float(gradient @ np.asarray(self.covariance) @ gradient), 0.0))


def fit_law(flops, losses, start: Fit | None = None) -> Fit:
    """Least-squares fit of loss = a·C^(−b) + c, with a, b > 0 and 0 <= c <= min(loss).

    The fit is tried from a grid of starting points, or only from `start` (a fit of similar data: a
    bootstrap's refits start from the fit they resample) with the grid as the fallback."""
    import numpy as np
    from scipy.optimize import curve_fit

    flops = np.asarray(flops, dtype=float)
    losses = np.asarray(losses, dtype=float)
    if len(flops) < 3:
        raise ValueError(f"need at least 3 points to fit a, b, c; got {len(flops)}")
    if np.any(flops <= 0):
        raise ValueError("every rung needs positive compute (flops)")
    ref = float(np.exp(np.mean(np.log(flops))))
    x = flops / ref

    def scaled(x, big_a, b, c):
        return big_a * x ** (-b) + c

    low = float(losses.min())
    starts = [
        (max(float(np.mean(losses)) - c0, 1e-6), b0, c0)
        for c0 in (0.0, 0.5 * low, 0.9 * low)
        for b0 in (0.05, 0.2, 0.5, 1.0)
    ]
    if start is not None:
        starts.insert(0, (start.a * ref ** (-start.b), start.b, min(start.c, low)))
    best = None
    for i, (a0, b0, c0) in enumerate(starts):
        if start is not None and i > 0 and best is not None:
            break
        try:
            popt, pcov = curve_fit(
                scaled,
                x,
                losses,
                p0=(max(a0, 1e-9), max(b0, 1e-5), c0),
                bounds=([1e-12, 1e-6, 0.0], [np.inf, 10.0, low]),
                maxfev=20000,
            )
        except RuntimeError:
            continue
        sse = float(np.sum((scaled(x, *popt) - losses) ** 2))
        if best is None or sse < best[0]:
            best = (sse, popt, pcov)
    if best is None:
        raise RuntimeError("the scaling-law fit did not converge from any starting point")
    sse, (big_a, b, c), pcov = best
    dof = len(flops) - 3
    covariance = pcov.tolist() if dof > 0 and np.all(np.isfinite(pcov)) else None
    residual_sd = math.sqrt(sse / dof) if dof > 0 else 0.0
    return Fit(float(big_a * ref**b), float(b), float(c), ref, covariance, low, residual_sd, dof)
