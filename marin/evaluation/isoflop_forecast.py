"""The isoFLOP forecast step: from an isoFLOP ladder's evaluations to the configuration and loss of a target.

Each rung is an evaluate step's output (`results.json`: parameters, tokens, loss) and the nominal budget
it was trained for (a rung's steps are rounded, so its measured FLOPs only approximate the budget; the
budget groups the rungs). The analysis is `marin.evaluation.isoflop`. Given candidate model configs
(`candidates`), the step also picks the one to train at the target: the candidate whose parameter count
is nearest N_opt (in log), trained for D = C / (6·N) tokens, i.e. `steps` of `tokens_per_step`.

Before the fit, each rung's training curve (its train step's `metrics.jsonl`) is checked as the loss
forecast checks its rungs' (`marin.evaluation.rung_check.curve_reasons`: diverged, loss spike, plateau). A
flagged rung is named in `flagged_rungs` and its budget's table, and left out of the fit (`drop_flagged`),
with the prediction from every rung beside it (`prediction_other`). The leave-one-out check of final
losses against a law is the loss forecast's only: an isoFLOP budget's parabola through 3-5 sizes has too
few points left without one to say what that one should have been.

Output: `forecast.json` (per budget: rungs, parabola, optimum, whether usable; the laws; the prediction
with its bootstrap interval, the chosen configuration, and `notes` that say what the rungs do not
constrain) and `forecast.png` (the isoFLOP curves with their optima, and N_opt(C) out to the target).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import posixpath
from dataclasses import dataclass, field
from typing import Literal

from marin.evaluation.isoflop import IsoflopFit, bootstrap, fit_isoflop
from marin.stepkit.config import StepConfig, input_field, output_field, versioned_unless_default
from marin.storage import join, open_read, write_bytes, write_text
from marin.training.config import LlamaModelConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class IsoflopForecastConfig(StepConfig):
    """Fit the isoFLOP curves of a ladder and predict the optimal configuration at `target_flops`."""

    evaluations: list[str] = input_field("evaluation output", holds_any=("results.json",))
    """Evaluate steps' outputs, one per rung."""
    budgets: list[float]
    """The nominal budget (FLOPs) each rung was trained for, in the order of `evaluations`."""
    output_path: str = output_field()
    """This step's folder: `forecast.json`, `forecast.png`."""
    target_flops: float
    """Compute of the run to configure and forecast."""
    candidates: list[LlamaModelConfig] = field(default_factory=list)
    """Model configs to choose from at the target; empty: report N_opt and D_opt only."""
    vocab_size: int | None = None
    """The tokenizer's vocabulary size (sets the candidates' parameter counts)."""
    tokens_per_step: int | None = None
    """Tokens per training step of the target run (turns D_opt into steps)."""
    dataset: str | None = versioned_unless_default(None)
    """Which held-out set's loss to fit; None: the macro average."""
    confidence: float = versioned_unless_default(0.9)
    """Coverage of the bootstrap intervals."""
    samples: int = versioned_unless_default(200)
    """Bootstrap refits."""
    seed: int = versioned_unless_default(0)
    """Seed of the bootstrap."""
    interval: Literal["prediction", "confidence"] = "prediction"
    """The loss interval: "prediction" for one run at the target (the fit's uncertainty and a run's own
    noise: what the check compares), "confidence" for the fitted loss_opt(C) alone."""
    drop_flagged: bool = versioned_unless_default(True)
    """Fit the rungs whose training curve is not flagged (the prediction from every rung is kept beside it);
    False fits every rung and gives the prediction without the flagged ones beside it."""

    def validate(self) -> None:
        if len(self.evaluations) != len(self.budgets):
            raise ValueError(f"isoflop.budgets has {len(self.budgets)} entries for {len(self.evaluations)} evaluations")
        if len(set(self.budgets)) < 2:
            raise ValueError(f"isoflop.budgets needs at least 2 distinct budgets, got {sorted(set(self.budgets))}")
        if not self.target_flops > 0:
            raise ValueError(f"isoflop.target_flops must be > 0, got {self.target_flops}")
        if self.candidates and self.vocab_size is None:
            raise ValueError("isoflop.vocab_size is needed to count the candidates' parameters")
        if not 0 < self.confidence < 1:
            raise ValueError(f"isoflop.confidence must be in (0, 1), got {self.confidence}")


def target_cost(chosen: dict, vocab_size: int, tokens_per_step: int | None) -> dict:
    """What the chosen target run costs: its model's FLOPs (3x forward per token, 6·N·D beside) and device-hours
    on one CPU core and on one H100 at the assumed MFU (marin.training.cost)."""
    from marin.training.cost import CostSettings, estimate, training_flops

    tokens = chosen["steps"] * tokens_per_step if tokens_per_step and "steps" in chosen else chosen["tokens"]
    flops = training_flops(LlamaModelConfig(**chosen["model"]), vocab_size, tokens)
    settings = CostSettings()
    on = {name: estimate(flops["flops"], res, settings) for name, res in (("cpu", {"cpu": 1}), ("gpu", {"gpu": 1}))}
    return {
        **flops,
        "device_hours": {est["device"]: est["device_hours"] for est in on.values()},
        "mfu": settings.mfu,
        "peak_flops_per_s": {est["device"]: est["peak_flops_per_s"] for est in on.values()},
    }


def choose_config(
    candidates: list[LlamaModelConfig], vocab_size: int, flops: float, params_opt: float, tokens_per_step: int | None
) -> dict:
    """The candidate nearest N_opt (log distance), with its tokens (and steps) for `flops`."""
    best = min(candidates, key=lambda m: abs(math.log(m.parameter_count(vocab_size) / params_opt)))
    n = best.parameter_count(vocab_size)
    tokens = flops / (6 * n)
    out = {"model": dataclasses.asdict(best), "params": n, "tokens": tokens}
    if tokens_per_step:
        out["steps"] = max(2, round(tokens / tokens_per_step))
        out["tokens_per_step"] = tokens_per_step
    return out


def _rung(path: str, dataset: str | None) -> dict:
    from marin.evaluation.rung_check import curve_reasons, train_curve

    with open_read(posixpath.join(path, "results.json"), "r") as f:
        results = json.load(f)
    curve = train_curve(path, results)
    flags = curve_reasons(curve) if curve is not None else []
    if dataset is None:
        loss = results["macro_loss"]
    elif dataset in results["datasets"]:
        loss = results["datasets"][dataset]["loss"]
    else:
        raise KeyError(f"isoflop.dataset {dataset!r} is not in {path}/results.json (has {sorted(results['datasets'])})")
    return {
        "params": results["parameter_count"],
        "tokens": results["tokens"],
        "flops": results["flops"],
        "loss": loss,
        "flags": flags,
        "curve_checked": curve is not None,
    }


def _fit_without(points: list[dict], flagged: list[dict]) -> tuple[list[dict], str | None]:
    """The rungs to fit without the `flagged` ones: a budget left with fewer than 3 sizes is left out whole.
    None of them (and a note) when fewer than 2 budgets would be left."""
    kept = [p for p in points if not p["flags"]]
    sizes: dict[float, set] = {}
    for p in kept:
        sizes.setdefault(p["budget"], set()).add(p["params"])
    short = sorted(b for b in {p["budget"] for p in points} if len(sizes.get(b, ())) < 3)
    kept = [p for p in kept if p["budget"] not in short]
    note = (
        f"budgets {', '.join(f'{b:.3g}' for b in short)} have fewer than 3 sizes left without the flagged "
        "rungs and are left out of the fit"
        if short
        else None
    )
    if len({p["budget"] for p in kept}) < 2:
        return (
            [],
            f"{len(flagged)} rung(s) flagged: fewer than 2 budgets are left without them, so the fit uses every rung",
        )
    return kept, note


def loss_interval_note(loss: float, interval, max_fraction: float = 0.1) -> str | None:
    """A note when the loss interval is wider than `max_fraction` of the forecast loss, else None."""
    low, high = interval
    if high - low <= max_fraction * loss:
        return None
    return (
        f"the {low:.3g}-{high:.3g} loss interval is {(high - low) / loss:.0%} of the forecast {loss:.3g}, "
        f"wider than {max_fraction:.0%}: a rough forecast"
    )


def isoflop_forecast(config: IsoflopForecastConfig) -> dict:
    """Read the rungs, fit, predict at the target, write `forecast.json` and `forecast.png`."""
    from marin.storage.paths import portable_path

    points = []
    for path, budget in zip(config.evaluations, config.budgets, strict=True):
        points.append(
            {
                "budget": float(budget),
                "evaluation": portable_path(path, config.output_path),
                **_rung(path, config.dataset),
            }
        )
    flagged = [p for p in points if p["flags"]]
    used, other, flag_notes = points, None, []
    if flagged:
        for p in flagged:
            logger.warning("isoFLOP rung %s flagged: %s", p["evaluation"], "; ".join(p["flags"]))
        kept, note = _fit_without(points, flagged)
        flag_notes = [note] if note else []
        if kept:
            used, other = (kept, points) if config.drop_flagged else (points, kept)
    fit = fit_isoflop(used)
    predicted = fit.predict(config.target_flops)
    intervals, interval_note = (None, None)
    if predicted is not None:
        intervals, interval_note = bootstrap(
            used, fit, config.target_flops, config.samples, config.seed, config.confidence, config.interval
        )
    notes = flag_notes + list(fit.notes) + ([interval_note] if interval_note else [])
    prediction_other = None
    if other is not None:
        other_prediction = fit_isoflop(other).predict(config.target_flops)
        prediction_other = {
            "rungs": "every rung, the flagged included" if other is points else "the rungs not flagged",
            **(other_prediction or {"note": "no prediction: the rungs do not constrain the laws"}),
        }
    largest = max(config.budgets)
    if predicted is not None and config.target_flops > 100 * largest:
        notes.append(
            f"the target is {math.log10(config.target_flops / largest):.1f} decades beyond the largest budget: "
            "the laws are extrapolated far"
        )
    if intervals is not None and intervals["params"][1] > 10 * intervals["params"][0]:
        notes.append("the N_opt interval spans more than 10x: the rungs hardly constrain the model size")
    wide = loss_interval_note(predicted["loss"], intervals["loss"]) if intervals is not None else None
    if wide:
        notes.append(wide)
    prediction = None
    if predicted is not None:
        prediction = {
            "flops": config.target_flops,
            **predicted,
            "interval": {k: list(v) for k, v in intervals.items()} if intervals else None,
            "confidence": config.confidence,
            "interval_kind": config.interval,
        }
        if config.candidates:
            prediction["config"] = choose_config(
                config.candidates, config.vocab_size, config.target_flops, predicted["params"], config.tokens_per_step
            )
            prediction["cost"] = target_cost(prediction["config"], config.vocab_size, config.tokens_per_step)
    out = {
        "kind": "isoflop",
        "metric": "loss",
        "dataset": config.dataset,
        "budgets": [
            {
                "flops": b.flops,
                "rungs": [p | {"in_fit": p in used} for p in points if p["budget"] == b.flops],
                "parabola_in_ln_params": list(b.coefficients),
                "params_opt": b.params_opt,
                "tokens_opt": b.tokens_opt,
                "loss_opt": b.loss_opt,
                "usable": b.usable,
                "note": b.note,
            }
            for b in fit.budgets
        ],
        "laws": {
            "params_opt": {"k": fit.params_law[0], "exponent": fit.params_law[1]} if fit.params_law else None,
            "tokens_opt": {"k": fit.tokens_law[0], "exponent": fit.tokens_law[1]} if fit.tokens_law else None,
            "loss_opt": fit.loss_law,
        },
        "prediction": prediction,
        "prediction_other": prediction_other,
        "flagged_rungs": [
            {"evaluation": p["evaluation"], "budget": p["budget"], "params": p["params"], "reasons": p["flags"]}
            for p in flagged
        ],
        "constrained": prediction is not None,
        "notes": notes,
    }
    write_text(join(config.output_path, "forecast.json"), json.dumps(out, indent=2, sort_keys=True) + "\n")
    write_bytes(join(config.output_path, "forecast.png"), plot(fit, config.target_flops, prediction))
    logger.info("isoFLOP forecast at %.3g FLOPs: %s; notes: %s", config.target_flops, prediction, notes)
    return out


def plot(fit: IsoflopFit, target_flops: float, prediction: dict | None) -> bytes:
    """Left: loss against N per budget, the parabolas and their optima. Right: N_opt(C) out to the target."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=100)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(fit.budgets)))
    for b, color in zip(fit.budgets, colors, strict=True):
        grid = np.geomspace(min(b.params) / 1.3, max(b.params) * 1.3, 100)
        left.scatter(b.params, b.losses, color=color, zorder=3)
        left.plot(grid, b.curve(grid), color=color, ls="-" if b.usable else ":", label=f"C = {b.flops:.2g}")
        if b.usable:
            left.plot([b.params_opt], [b.loss_opt], "x", color="black")
    left.set_xscale("log")
    left.set_xlabel("parameters N")
    left.set_ylabel("held-out loss")
    left.set_title("isoFLOP curves")
    left.legend(fontsize=8)
    usable = fit.usable
    right.scatter(
        [b.flops for b in usable], [b.params_opt for b in usable], color="tab:orange", zorder=3, label="optima"
    )
    if fit.params_law is not None:
        k, a = fit.params_law
        grid = np.geomspace(min(b.flops for b in usable) / 2, target_flops * 2, 100)
        right.plot(grid, k * grid**a, color="tab:blue", label=f"N_opt = {k:.3g}·C^{a:.3f}")
    if prediction is not None:
        interval = (prediction.get("interval") or {}).get("params")
        yerr = [[prediction["params"] - interval[0]], [interval[1] - prediction["params"]]] if interval else None
        right.errorbar(
            [target_flops],
            [prediction["params"]],
            yerr=yerr,
            fmt="*",
            color="tab:red",
            markersize=12,
            capsize=4,
            label=f"target: N = {prediction['params']:.3g}, loss {prediction['loss']:.3f}",
        )
    if not usable:
        right.text(
            0.5,
            0.5,
            "no budget has an optimum\nwithin the sizes tried",
            ha="center",
            va="center",
            transform=right.transAxes,
        )
    right.set_xscale("log")
    if usable:
        right.set_yscale("log")
    right.set_xlabel("compute C = 6·N·D (FLOPs)")
    right.set_ylabel("optimal parameters")
    right.set_title("compute-optimal model size")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
