"""How often the loss-law forecast's interval covers a run at the target, on simulated ladders.

A ladder is drawn from a known law (by default the one the tutorial's earlier six rungs fitted: a = 1140,
b = 0.268, c = 1.854), each rung's loss and the target's measurement get Gaussian seed noise `sigma`,
`marin.evaluation.forecast` fits and predicts, and the interval is scored against the noisy measurement.
Printed per (sigma, compute range, rungs): the mean width of the interval as a fraction of the forecast,
the mean absolute relative error of the forecast, and the coverage, for three intervals side by side:
the residual bootstrap (refits; `bootstrap_interval`), Student-t draws of the parameters from their
linearised covariance plus the target's noise (`prediction_interval`), and Gaussian draws of the
parameters alone.

    .venv/bin/python benchmarks/forecast_interval_sim.py --trials 60
    .venv/bin/python benchmarks/forecast_interval_sim.py --law 36.507 0.10330 0.47486 --smallest 5.59e10 \
        --sigmas 0.016 0.01 --designs 35:8
"""

from __future__ import annotations

import argparse

import numpy as np

from marin.evaluation.forecast import Fit, bootstrap_interval, fit_law, law, prediction_interval

LAW = (1139.79, 0.26849, 1.85401)
SMALLEST = 1.12e11


def gaussian_interval(fit: Fit, flops: float, samples: int = 4000) -> tuple[float, float] | None:
    if fit.covariance is None:
        return None
    rng = np.random.default_rng(0)
    big_a = fit.a * fit.reference_flops ** (-fit.b)
    draws = rng.multivariate_normal([big_a, fit.b, fit.c], np.asarray(fit.covariance), size=samples)
    draws = draws[(draws[:, 0] > 0) & (draws[:, 1] > 0) & (draws[:, 2] >= 0) & (draws[:, 2] <= fit.c_ceiling)]
    preds = draws[:, 0] * (flops / fit.reference_flops) ** (-draws[:, 1]) + draws[:, 2]
    return float(np.quantile(preds, 0.025)), float(np.quantile(preds, 0.975))


KINDS = ("bootstrap", "t_draws", "gaussian")


def trial_scores(
    span: float, rungs: int, ratio: float, sigma: float, trials: int, seed: int, true_law=LAW, smallest=SMALLEST
) -> dict:
    rng = np.random.default_rng(seed)
    flops = smallest * np.geomspace(1, span, rungs)
    target = flops[-1] * ratio
    truth = float(law(target, *true_law))
    scores = {k: [] for k in KINDS}
    for _ in range(trials):
        losses = law(flops, *true_law) + rng.normal(0, sigma, rungs)
        fit = fit_law(flops, losses)
        measured = truth + rng.normal(0, sigma)
        predicted = float(fit.predict(target))
        for kind, interval in (
            ("bootstrap", bootstrap_interval(fit, flops, losses, target, 0.95, 400, 0)),
            ("t_draws", prediction_interval(fit, target, 0.95, 4000, 0)),
            ("gaussian", gaussian_interval(fit, target)),
        ):
            if interval is not None:
                low, high = interval
                scores[kind].append(
                    ((high - low) / predicted, abs(predicted - measured) / measured, low <= measured <= high)
                )
    return {k: np.mean(np.asarray(v, dtype=float), axis=0) if v else None for k, v in scores.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[0.015, 0.007, 0.004])
    parser.add_argument("--designs", nargs="+", default=["5.9:6", "20:8", "35:8"], help="compute range:rungs")
    parser.add_argument("--ratio", type=float, default=5.6, help="the target's compute over the largest rung's")
    parser.add_argument("--law", type=float, nargs=3, default=LAW, metavar=("A", "B", "C"), help="the true law")
    parser.add_argument("--smallest", type=float, default=SMALLEST, help="the smallest rung's compute")
    args = parser.parse_args()
    print("sigma  range  rungs  | " + " | ".join(f"{k}: width  error  coverage" for k in KINDS))
    for sigma in args.sigmas:
        for design in args.designs:
            span, rungs = float(design.split(":")[0]), int(design.split(":")[1])
            s = trial_scores(span, rungs, args.ratio, sigma, args.trials, 0, tuple(args.law), args.smallest)
            cells = "  |  ".join("{:.3f}  {:.3f}  {:.2f}".format(*s[k]) if s[k] is not None else "none" for k in KINDS)
            print(f"{sigma:<6} {span:<6} {rungs:<6} | {cells}", flush=True)


if __name__ == "__main__":
    main()
