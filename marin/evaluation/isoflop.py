"""isoFLOP analysis: which model size a compute budget should buy, and what loss it will reach.

For each of several budgets C (FLOPs, C = 6·N·D), models of a few sizes N are trained on D = C / (6·N)
tokens. At fixed C the held-out loss is close to a parabola in ln N: too small a model underfits, too
big a one sees too few tokens. Fitting that parabola per budget gives the budget's optimum N_opt(C)
(the vertex), D_opt(C) = C / (6·N_opt) and loss_opt(C). Across budgets the optima follow power laws,
N_opt = k_N·C^a and D_opt = k_D·C^b (a + b = 1), and loss_opt(C) follows the forecast's law
a·C^(−b) + c (with two budgets only, a pure power law). Extrapolated to a target budget they give the
configuration to train and the loss it should reach: Marin's `predict_optimal_config`.

Uncertainty is a residual bootstrap: the budgets' parabola residuals are pooled (scaled for the
parameters the parabolas fitted), resampled onto the fitted curves, and the whole analysis is refitted
`samples` times; the interval is the spread of the refitted predictions, each loss with one draw of a
single run's noise added (a prediction interval for the target run, which is what a check compares).
The analysis says when the rungs do not constrain the forecast: a budget whose losses do not curve upwards, or whose vertex lies outside the sizes tried, is set aside (named in
`notes`); with fewer than two usable budgets there is no prediction; when every parabola goes through its
points exactly (three sizes per budget) there are no residuals and no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marin.evaluation.forecast import fit_law, run_noise, scaled_residuals


@dataclass(frozen=True)
class BudgetFit:
    """The isoFLOP parabola of one budget and its vertex."""

    flops: float
    params: list[float]
    losses: list[float]
    coefficients: tuple[float, float, float]
    """(q, r, s) of loss = q·x² + r·x + s, x = ln N."""
    params_opt: float
    loss_opt: float
    usable: bool
    """The parabola curves upwards and its vertex lies within the sizes tried."""
    note: str | None

    @property
    def tokens_opt(self) -> float:
        return self.flops / (6 * self.params_opt)

    def curve(self, params):
        q, r, s = self.coefficients
        x = np.log(np.asarray(params, dtype=float))
        return q * x**2 + r * x + s


def fit_budget(flops: float, params, losses) -> BudgetFit:
    """The parabola in ln N through one budget's rungs (at least 3 distinct sizes)."""
    params = np.asarray(params, dtype=float)
    losses = np.asarray(losses, dtype=float)
    if len(np.unique(params)) < 3:
        raise ValueError(f"budget {flops:.3g} FLOPs: needs at least 3 model sizes, got {sorted(set(params.tolist()))}")
    x = np.log(params)
    q, r, s = (float(v) for v in np.polyfit(x, losses, 2))
    note = None
    if q <= 0:
        vertex = float(x[np.argmin(losses)])
        note = f"budget {flops:.3g}: the loss does not curve upwards over the sizes tried (no interior optimum)"
    else:
        vertex = -r / (2 * q)
        if not x.min() <= vertex <= x.max():
            side = "smaller" if vertex < x.min() else "larger"
            note = (
                f"budget {flops:.3g}: the optimum ({math.exp(vertex):.3g} parameters) is {side} than every size "
                f"tried ({params.min():.3g}–{params.max():.3g}): try {side} models"
            )
    loss_opt = q * vertex**2 + r * vertex + s
    return BudgetFit(
        float(flops), params.tolist(), losses.tolist(), (q, r, s), math.exp(vertex), float(loss_opt), note is None, note
    )


def power_law(flops, values) -> tuple[float, float]:
    """(k, e) of values = k·C^e, least squares in log-log."""
    e, ln_k = np.polyfit(np.log(np.asarray(flops, dtype=float)), np.log(np.asarray(values, dtype=float)), 1)
    return float(math.exp(ln_k)), float(e)


@dataclass(frozen=True)
class IsoflopFit:
    budgets: list[BudgetFit]
    params_law: tuple[float, float] | None
    """(k, a) of N_opt = k·C^a over the usable budgets; None with fewer than two."""
    tokens_law: tuple[float, float] | None
    """(k, b) of D_opt = k·C^b."""
    loss_law: dict | None
    """{"kind": "a*C^-b+c", a, b, c} with three usable budgets or more, {"kind": "k*C^e", k, e} with two."""
    notes: list[str]

    @property
    def usable(self) -> list[BudgetFit]:
        return [b for b in self.budgets if b.usable]

    def predict(self, flops: float) -> dict | None:
        """{"params", "tokens", "loss"} at `flops`, or None when the budgets do not constrain them."""
        if self.params_law is None or self.tokens_law is None or self.loss_law is None:
            return None
        params = self.params_law[0] * flops ** self.params_law[1]
        tokens = self.tokens_law[0] * flops ** self.tokens_law[1]
        law = self.loss_law
        loss = law["a"] * flops ** (-law["b"]) + law["c"] if law["kind"] == "a*C^-b+c" else law["k"] * flops ** law["e"]
        return {"params": float(params), "tokens": float(tokens), "loss": float(loss)}


def group_by_budget(points: list[dict]) -> dict[float, list[dict]]:
    """Points ({"budget", "params", "loss"}) by their budget."""
    groups: dict[float, list[dict]] = {}
    for p in points:
        groups.setdefault(float(p["budget"]), []).append(p)
    return dict(sorted(groups.items()))


def fit_isoflop(points: list[dict]) -> IsoflopFit:
    """Fit every budget's parabola, then the optima's laws over the usable budgets."""
    groups = group_by_budget(points)
    if len(groups) < 2:
        raise ValueError(f"an isoFLOP analysis needs at least 2 budgets, got {len(groups)}")
    budgets = [fit_budget(c, [p["params"] for p in ps], [p["loss"] for p in ps]) for c, ps in groups.items()]
    notes = [b.note for b in budgets if b.note]
    usable = [b for b in budgets if b.usable]
    if len(usable) < 2:
        notes.append(
            f"only {len(usable)} of {len(budgets)} budgets have an optimum within the sizes tried: "
            "the rungs do not constrain N_opt(C), so there is no prediction"
        )
        return IsoflopFit(budgets, None, None, None, notes)
    flops = [b.flops for b in usable]
    params_law = power_law(flops, [b.params_opt for b in usable])
    tokens_law = power_law(flops, [b.tokens_opt for b in usable])
    losses = [b.loss_opt for b in usable]
    if len(usable) >= 3:
        law = fit_law(flops, losses)
        loss_law = {"kind": "a*C^-b+c", "a": law.a, "b": law.b, "c": law.c}
    else:
        k, e = power_law(flops, losses)
        loss_law = {"kind": "k*C^e", "k": k, "e": e}
        notes.append("two usable budgets: the loss is extrapolated as a pure power law (no irreducible term)")
    return IsoflopFit(budgets, params_law, tokens_law, loss_law, notes)


def bootstrap(
    points: list[dict],
    fit: IsoflopFit,
    flops: float,
    samples: int,
    seed: int,
    confidence: float,
    interval: str = "prediction",
):
    """({"params": (lo, hi), "tokens": ..., "loss": ...}, note): intervals from refits on resampled residuals.

    The usable budgets' parabola residuals (n of them, 3 parameters fitted per budget, so n − 3k degrees of
    freedom) are scaled by sqrt(n / (n − 3k)), which makes their spread that of the rungs' noise, and
    resampled onto every budget's fitted curve; each resample is refitted from the parabolas on. With
    `interval="prediction"` each refit's loss also gets one draw of a single run's own noise (the residual
    sd times Student's t with n − 3k degrees of freedom), so the loss interval is one for the target run
    that the check measures; with "confidence" it is the interval of the fitted loss_opt(C) alone."""
    if interval not in ("prediction", "confidence"):
        raise TypeError(f"isoflop.interval must be 'prediction' or 'confidence', got {interval!r}")
    usable = fit.usable
    residuals = np.concatenate([np.asarray(b.losses) - b.curve(b.params) for b in usable])
    dof = residuals.size - 3 * len(usable)
    scale = float(np.abs(np.asarray([b.loss_opt for b in usable])).mean())
    if dof <= 0 or np.abs(residuals).max() <= 1e-9 * max(scale, 1.0):
        return None, "every budget's parabola goes through its points exactly (3 sizes each): add sizes for an interval"
    inflated = scaled_residuals(residuals, dof)
    noise_sd = float(math.sqrt((residuals**2).sum() / dof))
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {"params": [], "tokens": [], "loss": []}
    failed = 0
    for _ in range(samples):
        resampled = []
        for b in fit.budgets:
            noisy = b.curve(b.params) + rng.choice(inflated, size=len(b.params), replace=True)
            resampled += [
                {"budget": b.flops, "params": n, "loss": float(v)} for n, v in zip(b.params, noisy, strict=True)
            ]
        own_noise = run_noise(rng, noise_sd, dof) if interval == "prediction" else 0.0
        try:
            refit = fit_isoflop(resampled)
        except (RuntimeError, ValueError):
            failed += 1
            continue
        predicted = refit.predict(flops)
        if predicted is None or not all(math.isfinite(v) for v in predicted.values()):
            failed += 1
            continue
        predicted["loss"] += own_noise
        for key, value in predicted.items():
            draws[key].append(value)
    note = None
    if failed > samples / 2:
        return None, f"{failed} of {samples} bootstrap refits found no optimum: the rungs do not constrain the forecast"
    if failed:
        note = f"{failed} of {samples} bootstrap refits found no optimum and were left out"
    tail = (1 - confidence) / 2
    intervals = {k: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail))) for k, v in draws.items()}
    return intervals, note
