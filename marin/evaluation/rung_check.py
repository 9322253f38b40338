"""Which rungs of a ladder are off their family, and why, before the forecast's fit uses them.

A ladder's forecast is only as good as its rungs: one rung trained with a broken learning rate, or on
broken data, pulls the law and its interval wherever it lies, and nothing in the fit says so (a fit of
a, b, c through eight points absorbs one bad point into a wrong bend). Each rung is checked two ways:

* its training curve (the train step's `metrics.jsonl`, per-step training loss): **diverged** (a loss
  that is not finite, or a run that ended no lower than it began), **loss spike** (after the warm-up,
  a loss that gives back more than half of the progress the run had made), **plateau** (the second
  half of the run bought less than `plateau_fraction` of the run's drop: it stopped learning);
* its final held-out loss against what the other rungs predict for it: the law is refitted without each
  rung in turn (leave-one-out); the rung whose removal leaves the others closest to a law (the smallest
  residual standard deviation) is the suspect, and its distance from the others' prediction is measured
  in units of that fit's own uncertainty at the rung: its residual standard deviation, the noise of the
  rungs without it, which the suspect cannot inflate (measured against the noise of all the rungs, one
  broken rung widens the band enough to hide itself, and bends the others' refits enough to frame a
  healthy neighbour), combined with the uncertainty of the refitted law at the rung's compute. The second
  term matters at the ends of the ladder: the smallest and the largest rung are predicted by
  extrapolating the others, and with the residual noise alone a healthy end rung of an unseen seed fell
  5.3 units off its law (docs/evaluation.md). A suspect further than `band_sigmas` is **off the law**. The noise has a floor (`min_noise_fraction` of the
  predicted loss) so that rungs lying almost exactly on a law do not make a tiny wobble an outlier. The
  check is then repeated without the flagged rung, so a second broken rung is found the same way. The law
  check needs `MIN_LAW_RUNGS` rungs; a ladder with fewer is checked by its curves alone, and says so.

The thresholds were set so that the shipped ladder's rungs (docs/evaluation.md) are all inside the band,
with a margin, and a rung trained at 30x its learning rate is outside it.
"""

from __future__ import annotations

import json
import math
import posixpath
from dataclasses import dataclass
from typing import Literal

from marin.storage import read_text

Reason = Literal["diverged", "loss spike", "plateau", "off the law"]

MIN_LAW_RUNGS = 5
"""Rungs the leave-one-out check needs: each refit then has four points for three parameters."""
MIN_CURVE_POINTS = 8
"""Logged steps a curve needs before a spike or a plateau is read from it (divergence needs one)."""


def train_curve(evaluation: str, results: dict) -> list[float | None] | None:
    """The training losses of the rung's train step (its `metrics.jsonl`), None where there is none; a
    step whose loss was not finite (metrics.jsonl leaves it out) is None."""
    train_output = results.get("train_output")
    if not isinstance(train_output, str):
        return None
    if "://" not in train_output and not train_output.startswith("/"):
        protocol, _, plain = evaluation.rpartition("://")
        joined = posixpath.normpath(posixpath.join(plain, train_output))
        train_output = f"{protocol}://{joined}" if protocol else joined
    text = read_text(posixpath.join(train_output, "metrics.jsonl"))
    if text is None:
        return None
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line.get("loss") for line in sorted(lines, key=lambda line: line["step"])]


@dataclass(frozen=True, kw_only=True)
class RungCheckSettings:
    """How far a rung may lie from its family before it is named."""

    band_sigmas: float = 5.0
    """A rung whose held-out loss is further than this many noise units from its leave-one-out
    prediction is off the law."""
    min_noise_fraction: float = 0.005
    """The noise unit is at least this fraction of the rung's predicted loss."""
    spike_fraction: float = 0.5
    """A loss spike gives back more than this fraction of the progress made so far (first loss minus
    the lowest loss before it)."""
    plateau_fraction: float = 0.02
    """A plateau: the second half of the run lowered the loss by less than this fraction of the drop from
    the first logged loss to the last."""
    warmup_fraction: float = 0.1
    """The first steps, where the loss may rise while the learning rate warms up, are not read for spikes."""


def curve_reasons(losses: list[float | None], settings: RungCheckSettings = RungCheckSettings()) -> list[str]:
    """What a training curve shows, as 'reason: detail' lines (empty for a healthy curve).

    `losses` are the logged training losses in step order; None (or a non-finite value) is a step whose
    loss was not finite (metrics.jsonl leaves such a loss out)."""
    if not losses:
        return []
    bad = [i for i, v in enumerate(losses) if v is None or not math.isfinite(v)]
    if bad:
        return [f"diverged: the training loss is not finite from step {bad[0]} ({len(bad)} of {len(losses)} steps)"]
    values = [float(v) for v in losses if v is not None]
    first = values[0]
    tail = values[-max(1, len(values) // 10) :]
    end = sum(tail) / len(tail)
    if end >= first:
        return [f"diverged: the run ended at a training loss of {end:.3f}, no lower than its first {first:.3f}"]
    reasons = []
    if len(values) >= MIN_CURVE_POINTS:
        start = max(1, math.ceil(settings.warmup_fraction * len(values)))
        lowest = min(values[:start])
        for i in range(start, len(values)):
            progress = first - lowest
            if progress > 0 and values[i] - lowest > settings.spike_fraction * progress:
                reasons.append(
                    f"loss spike: at logged step {i} the training loss rose to {values[i]:.3f} from a low of "
                    f"{lowest:.3f}, giving back {(values[i] - lowest) / progress:.0%} of the run's progress"
                )
                break
            lowest = min(lowest, values[i])
        half = len(values) // 2
        quarter = max(1, len(values) // 8)
        mid = sum(values[half - quarter : half + quarter]) / len(values[half - quarter : half + quarter])
        drop = first - end
        if mid - end < settings.plateau_fraction * drop:
            reasons.append(
                f"plateau: the second half of the run lowered the training loss by {mid - end:.3f} nats, "
                f"under {settings.plateau_fraction:.0%} of its whole drop ({drop:.3f})"
            )
    return reasons


@dataclass(frozen=True)
class LawCheck:
    """The leave-one-out check of the rungs' final losses against their law."""

    flagged: dict[int, str]
    """Index of each rung outside the band -> 'off the law: detail'."""
    deviation: dict[int, float]
    """Each rung's leave-one-out residual (its loss minus the other rungs' prediction for it), in noise units,
    from the last round of the check (the one where no rung left was outside the band)."""
    noise: float | None
    """The noise unit of that last round (nats or bits, the metric's own), None when there were too few rungs."""
    note: str | None = None


def leave_one_out(flops: list[float], losses: list[float]) -> list[tuple[float, float, float]]:
    """For each point: its loss minus the law fitted to the others at its compute, that fit's residual sd,
    and the sd of the point's prediction (the residual sd and the refitted law's own uncertainty there)."""
    from marin.evaluation.scaling_law import fit_law

    whole = fit_law(flops, losses)
    out = []
    for i in range(len(flops)):
        rest = [j for j in range(len(flops)) if j != i]
        fit = fit_law([flops[j] for j in rest], [losses[j] for j in rest], start=whole)
        spread = math.hypot(fit.residual_sd, fit.parameter_sd(flops[i]))
        out.append((losses[i] - float(fit.predict(flops[i])), fit.residual_sd, spread))
    return out


def law_outliers(
    flops: list[float], losses: list[float], settings: RungCheckSettings = RungCheckSettings()
) -> LawCheck:
    """The rungs off the law, worst first, each named once the ones before it are set aside."""
    remaining = list(range(len(flops)))
    flagged: dict[int, str] = {}
    if len(remaining) < MIN_LAW_RUNGS:
        return LawCheck(
            {}, {}, None, f"{len(flops)} rungs: the law check needs {MIN_LAW_RUNGS} or more (curves checked only)"
        )
    while True:
        loo = leave_one_out([flops[i] for i in remaining], [losses[i] for i in remaining])
        units = [
            max(spread, settings.min_noise_fraction * abs(losses[i] - r))
            for i, (r, _, spread) in zip(remaining, loo, strict=True)
        ]
        scores = [r / u for (r, _, _), u in zip(loo, units, strict=True)]
        worst = min(range(len(remaining)), key=lambda k: loo[k][1])
        if abs(scores[worst]) <= settings.band_sigmas:
            return LawCheck(flagged, dict(zip(remaining, scores, strict=True)), units[worst])
        rung, residual = remaining[worst], loo[worst][0]
        flagged[rung] = (
            f"off the law: held-out loss {losses[rung]:.4f} against {losses[rung] - residual:.4f} predicted by the "
            f"other rungs ({residual:+.4f}, {scores[worst]:+.1f} noise units of {units[worst]:.4f}; the band is "
            f"±{settings.band_sigmas:g})"
        )
        remaining.remove(rung)
        if len(remaining) < MIN_LAW_RUNGS:
            return LawCheck(
                flagged,
                {},
                None,
                f"{len(remaining)} rungs left after setting aside the flagged: the rest are not checked against the law",
            )
