"""isoFLOP analysis on synthetic Chinchilla-like losses with a known optimum, its step, and the forecast check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation.isoflop import bootstrap, fit_isoflop

# Chinchilla's fitted law (Hoffmann et al. 2022): L(N, D) = E + A / N^alpha + B / D^beta.
E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28
G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))


def chinchilla(n, d):
    return E + A / n**ALPHA + B / d**BETA


def optimum(flops: float) -> tuple[float, float]:
    """The exact compute-optimal (N, D) of the law at `flops` = 6·N·D."""
    n = G * (flops / 6) ** (BETA / (ALPHA + BETA))
    return n, flops / (6 * n)


def ladder_points(budgets, factors, noise: float, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    points = []
    for c in budgets:
        n0, _ = optimum(c)
        for f in factors:
            n = n0 * f
            points.append({"budget": c, "params": n, "loss": chinchilla(n, c / (6 * n)) + rng.normal(0, noise)})
    return points


def test_isoflop_recovers_the_compute_optimal_laws_and_forecasts_within_its_interval():
    points = ladder_points([1e18, 1e19, 1e20, 1e21], np.geomspace(1 / 8, 8, 7), noise=0.003)
    fit = fit_isoflop(points)
    assert fit.notes == [] and len(fit.usable) == 4
    assert fit.params_law[1] == pytest.approx(BETA / (ALPHA + BETA), abs=0.01)
    assert fit.tokens_law[1] == pytest.approx(ALPHA / (ALPHA + BETA), abs=0.01)
    assert fit.params_law[1] + fit.tokens_law[1] == pytest.approx(1.0, abs=1e-9)
    target = 1e23
    n_true, d_true = optimum(target)
    predicted = fit.predict(target)
    assert predicted["params"] == pytest.approx(n_true, rel=0.1)
    assert predicted["tokens"] == pytest.approx(d_true, rel=0.1)
    assert predicted["loss"] == pytest.approx(chinchilla(n_true, d_true), abs=0.01)
    intervals, note = bootstrap(points, fit, target, samples=40, seed=0, confidence=0.95)
    assert note is None
    low, high = intervals["loss"]
    assert low < predicted["loss"] < high and low <= chinchilla(n_true, d_true) <= high
    assert intervals["params"][0] < predicted["params"] < intervals["params"][1]


def test_a_budget_whose_optimum_lies_outside_the_sizes_tried_is_set_aside_and_named():
    points = ladder_points([1e18, 1e19, 1e20], [0.25, 1, 4], noise=0.0)
    points += [p for p in ladder_points([1e21], [1 / 64, 1 / 32, 1 / 16], noise=0.0)]
    fit = fit_isoflop(points)
    assert [b.usable for b in fit.budgets] == [True, True, True, False]
    assert "budget 1e+21" in fit.notes[0] and "larger than every size tried" in fit.notes[0]
    assert fit.params_law[1] == pytest.approx(BETA / (ALPHA + BETA), abs=0.02)

    only_one = ladder_points([1e18], [0.25, 1, 4], 0.0) + ladder_points([1e19], [8, 16, 32], 0.0)
    fit = fit_isoflop(only_one)
    assert fit.predict(1e22) is None
    assert "smaller than every size tried" in fit.notes[0]
    assert "the rungs do not constrain N_opt(C), so there is no prediction" in fit.notes[-1]


def test_an_unconstrained_ladder_still_writes_its_forecast_and_plot_saying_why(tmp_path):
    from marin.evaluation.isoflop_forecast import IsoflopForecastConfig, isoflop_forecast

    points = ladder_points([1e18], [4, 8, 16], 0.0) + ladder_points([1e19], [8, 16, 32], 0.0)
    out = isoflop_forecast(
        IsoflopForecastConfig(
            evaluations=write_results(tmp_path, points),
            budgets=[p["budget"] for p in points],
            output_path=str(tmp_path / "fc"),
            target_flops=1e21,
        )
    )
    assert out["constrained"] is False and out["prediction"] is None
    assert "so there is no prediction" in out["notes"][-1] and out["laws"]["params_opt"] is None
    assert (tmp_path / "fc/forecast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_three_sizes_per_budget_fit_exactly_and_the_forecast_says_there_is_no_interval():
    points = ladder_points([1e18, 1e19, 1e20], [0.3, 1, 3], noise=0.01, seed=1)
    fit = fit_isoflop(points)
    intervals, note = bootstrap(points, fit, 1e22, samples=20, seed=0, confidence=0.9)
    assert intervals is None and "3 sizes each" in note


def test_the_loss_interval_is_for_one_run_at_the_target_and_a_confidence_interval_is_narrower():
    points = ladder_points([1e18, 1e19, 1e20, 1e21], [0.3, 0.6, 1.6, 3.2], noise=0.01, seed=2)
    fit = fit_isoflop(points)
    target = 1e22
    truth = chinchilla(*optimum(target))
    runs = np.random.default_rng(5).normal(truth, 0.01, size=200)
    predicted, _ = bootstrap(points, fit, target, samples=300, seed=0, confidence=0.95)
    fitted, _ = bootstrap(points, fit, target, samples=300, seed=0, confidence=0.95, interval="confidence")
    (low, high), (fit_low, fit_high) = predicted["loss"], fitted["loss"]
    assert low < fit_low and fit_high < high
    covered = int(((runs > low) & (runs < high)).sum())
    assert covered >= 190, (low, high, covered)
    assert high - low > 2 * 1.96 * 0.01
    with pytest.raises(TypeError, match="isoflop.interval"):
        bootstrap(points, fit, target, samples=10, seed=0, confidence=0.95, interval="t_draws")


def write_results(root: Path, points: list[dict]) -> list[str]:
    paths = []
    for i, p in enumerate(points):
        folder = root / f"rung{i}"
        folder.mkdir(parents=True)
        tokens = p["budget"] / (6 * p["params"])
        results = {
            "checkpoint": f"ckpt{i}",
            "parameter_count": p["params"],
            "tokens": tokens,
            "flops": p["budget"],
            "macro_loss": p["loss"],
            "datasets": {"held": {"loss": p["loss"]}},
        }
        (folder / "results.json").write_text(json.dumps(results))
        paths.append(str(folder))
    return paths


def test_the_step_writes_the_forecast_and_chooses_the_candidate_nearest_the_optimum(tmp_path):
    from experiments.defaults_training import ladder_model
    from marin.evaluation.isoflop_forecast import IsoflopForecastConfig, isoflop_forecast

    points = ladder_points([1e18, 1e19, 1e20], np.geomspace(1 / 4, 4, 5), noise=0.002)
    candidates = [ladder_model(w) for w in (256, 512, 1024, 2048, 4096)]
    target = 1e21
    out = isoflop_forecast(
        IsoflopForecastConfig(
            evaluations=write_results(tmp_path, points),
            budgets=[p["budget"] for p in points],
            output_path=str(tmp_path / "fc"),
            target_flops=target,
            candidates=candidates,
            vocab_size=32000,
            tokens_per_step=256 * 2048,
            samples=30,
        )
    )
    assert out["constrained"] and out["notes"] == []
    prediction = out["prediction"]
    assert prediction["params"] == pytest.approx(optimum(target)[0], rel=0.1)
    chosen = prediction["config"]
    distances = [abs(math.log(m.parameter_count(32000) / prediction["params"])) for m in candidates]
    assert chosen["params"] == candidates[int(np.argmin(distances))].parameter_count(32000)
    assert chosen["steps"] == round(target / (6 * chosen["params"]) / (256 * 2048))
    cost = prediction["cost"]
    assert cost["flops_6nd"] == pytest.approx(6 * chosen["params"] * chosen["steps"] * 256 * 2048)
    assert cost["device_hours"]["nvidia-h100"] == pytest.approx(cost["flops"] / (989e12 * 0.4) / 3600)
    assert prediction["interval"]["loss"][0] < prediction["loss"] < prediction["interval"]["loss"][1]
    assert json.loads((tmp_path / "fc/forecast.json").read_text()) == out
    assert (tmp_path / "fc/forecast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_later_run_checks_the_forecast_against_the_measured_loss(tmp_path):
    from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check
    from marin.execution import Executor, ExecutorStep, this_output_path

    forecast_dir, target_dir = tmp_path / "forecast", tmp_path / "target-eval"
    forecast_dir.mkdir()
    target_dir.mkdir()
    forecast = {
        "metric": "loss",
        "dataset": "held",
        "prediction": {"flops": 1e21, "loss": 2.30, "interval": {"loss": [2.25, 2.36]}, "confidence": 0.9},
    }
    (forecast_dir / "forecast.json").write_text(json.dumps(forecast))
    (target_dir / "results.json").write_text(
        json.dumps({"flops": 1.05e21, "step": 99, "macro_loss": 9.0, "datasets": {"held": {"loss": 2.33}}})
    )
    check_step = ExecutorStep(
        name="forecast/check",
        fn=forecast_check,
        config=ForecastCheckConfig(
            forecast=str(forecast_dir), evaluation=str(target_dir), output_path=this_output_path()
        ),
    )
    paths = Executor(str(tmp_path / "lab"), backend="local").run([check_step])
    check = json.loads((Path(paths[check_step]) / "check.json").read_text())
    assert check["forecast"] == 2.30 and check["measured"] == 2.33 and check["within_interval"]
    assert check["error"] == pytest.approx(0.03) and check["interval"] == [2.25, 2.36] and check["notes"] == []

    (target_dir / "results.json").write_text(
        json.dumps({"flops": 3e21, "step": 99, "datasets": {"held": {"loss": 2.5}}})
    )
    from marin.evaluation.forecast_check import compare

    loss_law = {"metric": "loss", "dataset": "held", "prediction": {"flops": 1e21, "loss": 2.3, "interval": [2.2, 2.4]}}
    check = compare(loss_law, json.loads((target_dir / "results.json").read_text()))
    assert check["within_interval"] is False and "3.00x the forecast's compute" in check["notes"][0]
    with pytest.raises(ValueError, match="the forecast made no prediction"):
        compare({"prediction": None, "notes": ["only 1 of 2 budgets"]}, {})


def _forecast_and_target(tmp_path, forecast_age_s: float, train_age_s: float):
    """A finished forecast step (forecast.json, record, manifest) and a target run's train and eval folders,
    the forecast written `forecast_age_s` and the target's attempt begun `train_age_s` seconds ago."""
    import hashlib
    import os
    import time

    forecast_dir, train_dir, eval_dir = tmp_path / "forecast-1a2b", tmp_path / "target", tmp_path / "target-eval"
    for d in (forecast_dir, train_dir, eval_dir):
        d.mkdir()
    text = json.dumps(
        {"metric": "loss", "dataset": None, "prediction": {"flops": 1e12, "loss": 3.0, "interval": [2.9, 3.1]}}
    )
    (forecast_dir / "forecast.json").write_text(text)
    (forecast_dir / ".executor_info").write_text(json.dumps({"name": "forecast/tiny", "hash": "1a2b3c4d"}))
    sha = hashlib.sha256(text.encode()).hexdigest()
    (forecast_dir / ".executor_manifest.json").write_text(
        json.dumps({"files": [{"path": "forecast.json", "sha256": sha}]})
    )
    (train_dir / ".executor_info").write_text(json.dumps({"name": "checkpoints/target"}))
    (eval_dir / "results.json").write_text(json.dumps({"flops": 1e12, "step": 9, "macro_loss": 3.02, "datasets": {}}))
    now = time.time()
    os.utime(forecast_dir / "forecast.json", (now - forecast_age_s, now - forecast_age_s))
    os.utime(train_dir / ".executor_info", (now - train_age_s, now - train_age_s))
    return forecast_dir, train_dir, eval_dir, sha


def test_the_check_names_the_forecasts_record_and_that_it_was_written_before_the_target_started(tmp_path):
    from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check

    forecast_dir, train_dir, eval_dir, sha = _forecast_and_target(tmp_path, forecast_age_s=600, train_age_s=300)
    out = tmp_path / "check"
    forecast_check(
        ForecastCheckConfig(
            forecast=str(forecast_dir), evaluation=str(eval_dir), train=str(train_dir), output_path=str(out)
        )
    )
    check = json.loads((out / "check.json").read_text())
    assert check["forecast_record"] == {"step": "forecast/tiny", "hash": "1a2b3c4d", "forecast_sha256": sha}
    assert check["preregistered"] is True and check["within_interval"] is True
    times = json.loads((out / "preregistration.json").read_text())
    assert times["forecast_written_at"] < times["target_started_at"]
    assert (out / "volatile_files.txt").read_text() == "preregistration.json\n"


def test_a_forecast_written_after_the_target_run_started_is_refused(tmp_path):
    from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check

    forecast_dir, train_dir, eval_dir, _ = _forecast_and_target(tmp_path, forecast_age_s=60, train_age_s=300)
    out = tmp_path / "check"
    config = ForecastCheckConfig(
        forecast=str(forecast_dir), evaluation=str(eval_dir), train=str(train_dir), output_path=str(out)
    )
    with pytest.raises(ValueError, match=r"forecast\.json was written at .*, after the target run .* started at"):
        forecast_check(config)
    assert not (out / "check.json").exists()


def test_a_checkpoint_older_than_the_targets_record_dates_its_start(tmp_path):
    """A target whose first attempt (which left a checkpoint) began before the forecast is refused, though its
    latest attempt's record is newer than the forecast."""
    import os
    import time

    from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check

    forecast_dir, train_dir, eval_dir, _ = _forecast_and_target(tmp_path, forecast_age_s=600, train_age_s=300)
    meta = train_dir / "checkpoints" / "step-4" / "metadata.json"
    meta.parent.mkdir(parents=True)
    meta.write_text("{}")
    old = time.time() - 900
    os.utime(meta, (old, old))
    config = ForecastCheckConfig(
        forecast=str(forecast_dir), evaluation=str(eval_dir), train=str(train_dir), output_path=str(tmp_path / "c")
    )
    with pytest.raises(ValueError, match="it is not a forecast of that run"):
        forecast_check(config)


def test_a_loss_interval_wider_than_a_tenth_of_the_forecast_is_noted_and_a_narrower_one_is_not():
    from marin.evaluation.isoflop_forecast import loss_interval_note

    note = loss_interval_note(2.3388, (2.2674, 2.5679))
    assert note is not None and "13% of the forecast 2.34" in note and "wider than 10%" in note
    assert loss_interval_note(2.3388, (2.30, 2.50)) is None


def write_curves(paths: list[str], broken: int) -> None:
    """A falling training curve for each rung (its train step's metrics.jsonl); rung `broken` diverges."""
    for i, path in enumerate(paths):
        train = Path(path) / "train"
        train.mkdir()
        losses = 6.0 - 3.0 * (1 - np.exp(-np.arange(40) / 8)) + 0.01 * np.sin(np.arange(40))
        if i == broken:
            losses = 6.0 + 0.5 * np.arange(40)
        (train / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "loss": float(v)}) + "\n" for s, v in enumerate(losses))
        )
        results = json.loads((Path(path) / "results.json").read_text())
        (Path(path) / "results.json").write_text(json.dumps(results | {"train_output": "train"}))


def test_a_rung_whose_training_diverged_is_named_and_the_forecast_is_given_without_it_and_with_it(tmp_path):
    from marin.evaluation.isoflop_forecast import IsoflopForecastConfig, isoflop_forecast

    points = ladder_points([1e18, 1e19, 1e20], np.geomspace(1 / 4, 4, 5), noise=0.002)
    broken = 7
    points[broken] = points[broken] | {"loss": points[broken]["loss"] + 0.5}
    paths = write_results(tmp_path / "rungs", points)
    write_curves(paths, broken)

    def run(name: str, evaluations: list[str], budgets: list[float]) -> dict:
        config = IsoflopForecastConfig(
            evaluations=evaluations, budgets=budgets, output_path=str(tmp_path / name), target_flops=1e21, samples=30
        )
        return isoflop_forecast(config)

    out = run("fc", paths, [p["budget"] for p in points])
    (flagged,) = out["flagged_rungs"]
    assert flagged["evaluation"].endswith("rung7") and flagged["reasons"][0].startswith("diverged")
    in_fit = {r["evaluation"].rsplit("/", 1)[-1]: r["in_fit"] for b in out["budgets"] for r in b["rungs"]}
    assert [name for name, used in in_fit.items() if not used] == ["rung7"]
    clean = run(
        "clean",
        [p for i, p in enumerate(paths) if i != broken],
        [p["budget"] for i, p in enumerate(points) if i != broken],
    )
    assert clean["flagged_rungs"] == [] and clean["prediction_other"] is None
    assert out["prediction"]["loss"] == pytest.approx(clean["prediction"]["loss"])
    assert out["prediction"]["interval"] == clean["prediction"]["interval"]
    other = out["prediction_other"]
    assert other["rungs"] == "every rung, the flagged included"
    assert other["loss"] == pytest.approx(fit_isoflop(points).predict(1e21)["loss"])
    assert abs(other["loss"] - out["prediction"]["loss"]) > 1e-3
    written = json.loads((tmp_path / "fc" / "forecast.json").read_text())
    assert written["flagged_rungs"] == out["flagged_rungs"]
    from marin.browser.ladder import isoflop_summary

    page = isoflop_summary(written, 0, "fc", [])
    assert "FLAGGED rung ../rungs/rung7: diverged" in page and "with every rung, the flagged included" in page
