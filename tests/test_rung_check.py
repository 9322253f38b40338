"""Rungs off their family: the curve reasons, the leave-one-out law check, and the forecast that sets them aside.

No training here: curves and points shaped like the tutorial ladder's, the shipped ladder's own committed
rungs (benchmarks/results/), and synthetic evaluations for the forecast step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation.forecast import ForecastConfig, forecast, law
from marin.evaluation.rung_check import curve_reasons, law_outliers

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def healthy_curve(steps: int = 200, seed: int = 0) -> list[float]:
    """A training loss falling from ln(320) like a ladder rung's, with batch noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps) * 200 / steps
    return list(3.3 + 2.4 * (1 + t / 10) ** -0.8 + rng.normal(0, 0.08, steps))


def reasons_of(lines: list[str]) -> list[str]:
    return [line.split(":", 1)[0] for line in lines]


def test_a_healthy_curve_has_no_reason():
    for seed in range(5):
        assert curve_reasons(healthy_curve(seed=seed)) == []
    assert curve_reasons(healthy_curve(steps=4)) == []


def test_a_curve_with_a_loss_that_is_not_finite_diverged():
    curve = healthy_curve()
    curve[120:] = [None] * 80
    assert reasons_of(curve_reasons(curve)) == ["diverged"]
    assert "from step 120" in curve_reasons(curve)[0]
    curve = healthy_curve()
    curve[50] = math.nan
    assert reasons_of(curve_reasons(curve)) == ["diverged"]


def test_a_run_that_ends_no_lower_than_it_began_diverged():
    curve = healthy_curve()
    curve[100:] = [6.5] * 100
    assert reasons_of(curve_reasons(curve)) == ["diverged"]


def test_a_loss_that_gives_back_half_the_progress_is_a_spike():
    curve = healthy_curve()
    curve[150:156] = [5.2] * 6
    assert reasons_of(curve_reasons(curve)) == ["loss spike"]
    assert "logged step 150" in curve_reasons(curve)[0]


def test_a_run_that_stops_learning_halfway_is_a_plateau():
    curve = healthy_curve()
    curve[60:] = list(np.full(140, curve[60]) + np.random.default_rng(1).normal(0, 0.05, 140))
    assert reasons_of(curve_reasons(curve)) == ["plateau"]


SEED0 = [json.loads(line) for line in (RESULTS / "ladder_rungs_2026-12-03.jsonl").read_text().splitlines()]
"""The shipped tiny ladder's eight rungs, seed 0 (docs/evaluation.md's table)."""


def test_no_rung_of_the_shipped_ladders_committed_results_is_off_the_law():
    check = law_outliers([r["flops"] for r in SEED0], [r["loss"] for r in SEED0])
    assert check.flagged == {} and len(check.deviation) == 8
    assert max(abs(d) for d in check.deviation.values()) < 3
    design = [json.loads(line) for line in (RESULTS / "ladder_design_2026-12-02.jsonl").read_text().splitlines()]
    one_rate = sorted(
        (r for r in design if r["learning_rate"] == 0.01 and isinstance(r["heads"], str)), key=lambda r: r["flops_6nd"]
    )
    assert len(one_rate) == 8
    check = law_outliers([r["flops_6nd"] for r in one_rate], [r["held_out_loss"] for r in one_rate])
    assert check.flagged == {}


@pytest.mark.parametrize("broken", range(8))
def test_the_one_rung_moved_off_the_shipped_ladder_is_the_one_flagged(broken):
    losses = [r["loss"] * (1.1 if i == broken else 1.0) for i, r in enumerate(SEED0)]
    check = law_outliers([r["flops"] for r in SEED0], losses)
    assert list(check.flagged) == [broken]
    assert check.flagged[broken].startswith("off the law: ")


def test_too_few_rungs_for_the_law_check_say_so():
    check = law_outliers([1e10, 2e10, 4e10, 8e10], [3.0, 2.9, 2.8, 2.7])
    assert check.flagged == {} and "needs 5 or more" in check.note


def write_evaluations(root: Path, flops, losses) -> list[str]:
    paths = []
    for i, (c, loss) in enumerate(zip(flops, losses, strict=True)):
        folder = root / f"rung{i}"
        folder.mkdir(parents=True)
        results = {"checkpoint": f"ckpt{i}", "parameter_count": 1000, "tokens": 1000, "flops": float(c)}
        results |= {"macro_loss": float(loss), "macro_bpb": float(loss), "datasets": {}}
        (folder / "results.json").write_text(json.dumps(results))
        paths.append(str(folder))
    return paths


def test_the_forecast_names_the_broken_rung_and_gives_the_forecast_with_and_without_it(tmp_path):
    flops = np.array([r["flops"] for r in SEED0])
    losses = np.array([r["loss"] for r in SEED0])
    losses[3] += 0.4
    config = ForecastConfig(
        evaluations=write_evaluations(tmp_path, flops, losses),
        output_path=str(tmp_path / "fc"),
        target_flops=1.11e13,
        samples=100,
    )
    out = forecast(config)
    assert [f["evaluation"] for f in out["flagged_rungs"]] == ["../rung3"]
    assert out["flagged_rungs"][0]["reasons"][0].startswith("off the law")
    assert [r["in_fit"] for r in out["rungs"]] == [i != 3 for i in range(8)]
    without = forecast(
        ForecastConfig(
            evaluations=[p for i, p in enumerate(config.evaluations) if i != 3],
            output_path=str(tmp_path / "fc-clean"),
            target_flops=1.11e13,
            samples=100,
        )
    )
    assert out["prediction"]["loss"] == pytest.approx(without["prediction"]["loss"])
    other = out["prediction_other"]
    assert other["rungs"] == "every rung, the flagged included"
    everything = law(1.11e13, *(other["fit"][k] for k in "abc"))
    assert other["loss"] == pytest.approx(everything) and other["loss"] > out["prediction"]["loss"] + 0.01
    written = json.loads((tmp_path / "fc/forecast.json").read_text())
    assert written["flagged_rungs"] == out["flagged_rungs"]
    assert without["flagged_rungs"] == [] and without["prediction_other"] is None
