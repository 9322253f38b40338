"""The forecast step and the scaling-ladder helper (no training: synthetic evaluations and a plan)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation.forecast import ForecastConfig, forecast, law

A, B, C = 400.0, 0.15, 1.7


def write_evaluations(root: Path, flops, losses) -> list[str]:
    paths = []
    for i, (c, loss) in enumerate(zip(flops, losses, strict=True)):
        folder = root / f"rung{i}"
        folder.mkdir(parents=True)
        results = {
            "checkpoint": f"ckpt{i}",
            "parameter_count": 1000 * (i + 1),
            "tokens": 20000 * (i + 1),
            "flops": float(c),
            "macro_loss": float(loss),
            "macro_bpb": float(loss) / 2,
            "datasets": {"held": {"loss": float(loss), "bpb": float(loss) / 2}},
        }
        (folder / "results.json").write_text(json.dumps(results))
        paths.append(str(folder))
    return paths


def test_forecast_recovers_a_b_c_from_losses_drawn_from_a_known_law(tmp_path):
    rng = np.random.default_rng(3)
    flops = np.geomspace(1e15, 1e19, 8)
    losses = law(flops, A, B, C) + rng.normal(0, 0.002, len(flops))
    target = 1e21
    out = forecast(
        ForecastConfig(
            evaluations=write_evaluations(tmp_path, flops, losses),
            output_path=str(tmp_path / "fc"),
            target_flops=target,
            dataset="held",
        )
    )
    fit = out["fit"]
    assert fit["b"] == pytest.approx(B, abs=0.01)
    assert fit["c"] == pytest.approx(C, abs=0.03)
    assert fit["a"] == pytest.approx(A, rel=0.3)
    truth = law(target, A, B, C)
    low, high = out["prediction"]["interval"]
    assert low < out["prediction"]["loss"] < high
    assert low <= truth <= high
    assert abs(out["prediction"]["loss"] - truth) < 0.01
    assert max(abs(r["residual"]) for r in out["rungs"]) < 0.01
    written = json.loads((tmp_path / "fc/forecast.json").read_text())
    assert written["prediction"] == out["prediction"]
    assert (tmp_path / "fc/forecast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_forecast_fits_a_different_law_to_bits_per_byte(tmp_path):
    flops = np.geomspace(1e14, 1e18, 6)
    out = forecast(
        ForecastConfig(
            evaluations=write_evaluations(tmp_path, flops, law(flops, 50.0, 0.1, 0.5)),
            output_path=str(tmp_path / "fc"),
            target_flops=1e20,
            metric="bpb",
        )
    )
    assert out["fit"]["b"] == pytest.approx(0.1, abs=1e-3)
    assert out["fit"]["c"] == pytest.approx(0.25, abs=1e-3)


def test_three_rungs_fit_exactly_and_give_no_interval(tmp_path):
    flops = np.array([1e15, 1e16, 1e17])
    out = forecast(
        ForecastConfig(
            evaluations=write_evaluations(tmp_path, flops, law(flops, A, B, C)),
            output_path=str(tmp_path / "fc"),
            target_flops=1e18,
        )
    )
    assert out["prediction"]["interval"] is None and "3 rungs" in out["prediction"]["interval_note"]
    assert out["prediction"]["loss"] == pytest.approx(law(1e18, A, B, C), rel=1e-3)


def test_fewer_than_three_rungs_is_an_error_naming_the_field():
    with pytest.raises(ValueError, match=r"forecast\.evaluations needs at least 3 rungs"):
        ForecastConfig(evaluations=["a", "b"], output_path="x", target_flops=1e20)


def test_an_unknown_interval_method_is_an_error_naming_the_field():
    with pytest.raises(TypeError, match=r"ForecastConfig\.interval: expected Literal\['bootstrap', 't_draws'\]"):
        ForecastConfig(evaluations=["a", "b", "c"], output_path="x", target_flops=1e20, interval="gaussian")


def test_scaling_ladder_builds_compute_matched_rungs_each_evaluated_and_one_forecast(tmp_path):
    from experiments.defaults_training import scaling_ladder
    from marin.execution import Executor

    ladder = scaling_ladder("tiny", "/data/tokenized", sizes=[32, 64, 96], vocab_size=512, tokens_per_param=20)
    assert len(ladder.trains) == len(ladder.evaluations) == 3
    plan = Executor(str(tmp_path), backend="local").plan(ladder.steps)
    assert len(plan) == 7
    budgets = []
    for trained in ladder.trains:
        config = trained.config
        steps = config.num_train_steps
        tokens_per_step = config.train_batch_size * config.model.seq_len
        n = config.model.parameter_count(512)
        assert (steps - 1) * tokens_per_step < 20 * n <= steps * tokens_per_step
        budgets.append(6 * n * steps * tokens_per_step)
    assert budgets == sorted(budgets) and len(set(budgets)) == 3
    for trained, evaluation in zip(ladder.trains, ladder.evaluations, strict=True):
        assert evaluation.config.checkpoint.step is trained
    assert [e.step for e in ladder.forecast.config.evaluations] == ladder.evaluations
    assert ladder.forecast.config.target_flops == pytest.approx(10 * budgets[-1])
    with pytest.raises(ValueError, match="at least 3 rungs"):
        scaling_ladder("tiny", "/data/tokenized", sizes=[32, 64], vocab_size=512)


FOUR_CLOSE_FLOPS = np.geomspace(3e11, 2.5e12, 4)
FOUR_CLOSE_LOSSES = 9.0 * (FOUR_CLOSE_FLOPS / 1e11) ** -0.12 + np.array([0.004, -0.006, 0.005, -0.003])


def test_four_rungs_are_too_few_to_resample_and_the_forecast_says_so(tmp_path):
    out = forecast(
        ForecastConfig(
            evaluations=write_evaluations(tmp_path, FOUR_CLOSE_FLOPS, FOUR_CLOSE_LOSSES),
            output_path=str(tmp_path / "fc"),
            target_flops=2.5e13,
        )
    )
    assert out["prediction"]["interval"] is None and out["constrained"] is False
    assert "4 rungs leave 1 residual degree(s) of freedom" in out["prediction"]["interval_note"]


def test_a_fit_the_rungs_do_not_constrain_says_so_loudly_and_its_t_draws_stay_within_the_law(tmp_path, caplog):
    """Four close rungs on a nearly straight line in log-log (no visible bend), with the interval drawn
    from the parameters' covariance: the forecast is marked unconstrained in forecast.json, its
    interval_note and the log, and the draws are kept to the law's feasible region (no 3.5-342 interval)."""
    import logging

    flops, losses = FOUR_CLOSE_FLOPS, FOUR_CLOSE_LOSSES
    with caplog.at_level(logging.WARNING, logger="marin.evaluation.forecast"):
        out = forecast(
            ForecastConfig(
                evaluations=write_evaluations(tmp_path, flops, losses),
                output_path=str(tmp_path / "fc"),
                target_flops=2.5e13,
                interval="t_draws",
            )
        )
    assert out["constrained"] is False
    assert out["prediction"]["interval_note"].startswith("UNCONSTRAINED: ")
    assert any("UNCONSTRAINED" in r.getMessage() for r in caplog.records)
    low, high = out["prediction"]["interval"]
    assert 0 < low < out["prediction"]["loss"] < high < float(losses.max())
    assert json.loads((tmp_path / "fc/forecast.json").read_text())["notes"] == out["notes"]


def test_a_well_constrained_fit_has_no_notes(tmp_path):
    flops = np.geomspace(1e15, 1e19, 8)
    losses = law(flops, A, B, C) + np.random.default_rng(3).normal(0, 0.002, len(flops))
    out = forecast(
        ForecastConfig(
            evaluations=write_evaluations(tmp_path, flops, losses), output_path=str(tmp_path / "fc"), target_flops=1e20
        )
    )
    assert out["constrained"] is True and out["notes"] == [] and out["prediction"]["interval_note"] is None
    cost = out["prediction"]["cost"]
    assert cost["device_hours"]["nvidia-h100"] == pytest.approx(1e20 / (989e12 * 0.4) / 3600)


def test_c_on_its_bound_is_named_in_the_notes():
    from marin.evaluation.forecast import Fit, unconstrained_notes

    fit = Fit(a=9.0, b=0.1, c=0.0, reference_flops=1e12, covariance=None, c_ceiling=3.9)
    notes = unconstrained_notes(fit, 3.56, (3.51, 342.0), 4, 0.1)
    assert notes[0].startswith("UNCONSTRAINED: the irreducible loss c = 0 sits on its bound (0)")
    assert "wider than 10% of the forecast 3.56" in notes[1]
