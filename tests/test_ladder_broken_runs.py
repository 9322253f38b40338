"""Broken runs caught on real trainings: a rung off its family flagged by the forecast step, and a target
stopped by its watch.

The healthy runs are the shared reference run (tests/training_fixtures.py: 40 steps, peak rate 3e-3) and
its checkpoints; the broken one (trained once, watched and stopped, then also evaluated as a rung) trains the same
model at a peak rate of 1.0, 30x the tiny ladder's own
rate for its width (3.3e-2 at width 32, `tiny_ladder.LEARNING_RATES`). Real training, evaluation and
forecast steps; only the band of the watched runs is not a ladder's: training rungs of four sizes to
forecast a curve costs minutes, so the band is the reference run's own training curve ± 5 % (the schema
of the forecast step's `prediction.curve`, which tests/test_forecast_watch.py checks on its own).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.evaluation.evaluate import EvalConfig, evaluate
from marin.evaluation.forecast import ForecastConfig, forecast
from marin.evaluation.forecast_curve import FRACTIONS, window_mean
from marin.training.config import OptimizerConfig
from marin.training.forecast_watch import OffForecast
from marin.training.train import train
from tests.training_fixtures import corpus, reference_run, tiny_train_config

pytestmark = pytest.mark.slow  # trains: in make test-slow (docs/testing.md)

BROKEN = OptimizerConfig(learning_rate=1.0, warmup=0.1)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "training"


@pytest.fixture(scope="module")
def stopped(root, tmp_path_factory) -> tuple[Path, Exception]:
    """The reference config at 30x its rate, watched against the reference run's curve and stopped (the
    broken target of the watch test, and the broken rung of the forecast test)."""
    data = {"plays_a": str(corpus(root / "corpus")["plays_a"])}
    band = band_file(tmp_path_factory.mktemp("forecast"), reference_run(root))
    run = tmp_path_factory.mktemp("stopped") / "broken"
    with pytest.raises(OffForecast) as raised:
        train(
            tiny_train_config(
                str(run), data, optimizer=BROKEN, watch_forecast=band, stop_off_forecast=True, wandb_mode="disabled"
            )
        )
    return run, raised.value


def losses(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def band_file(folder: Path, reference: Path) -> str:
    """A forecast folder whose curve is the reference run's own training curve ± 5 %."""
    curve = [line["loss"] for line in losses(reference)]
    points = []
    for f in FRACTIONS:
        mean = window_mean(curve, f, 0.025)
        points.append({"fraction": f, "loss": mean, "low": 0.95 * mean, "high": 1.05 * mean})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "forecast.json").write_text(json.dumps({"prediction": {"flops": 6.6e9, "loss": 5.3, "curve": points}}))
    return str(folder)


def test_the_rung_trained_at_30x_its_rate_is_the_one_flagged_and_the_forecast_is_given_without_it(
    root, stopped, tmp_path
):
    data = corpus(root / "corpus")
    reference = reference_run(root)
    broken, _ = stopped
    evaluations = []
    for name, checkpoint in [
        *((f"ref{s}", reference / "checkpoints" / f"step-{s}") for s in (8, 16, 24)),
        ("ref39", reference),
        ("broken", broken),
    ]:
        out = tmp_path / "evaluation" / name
        evaluate(EvalConfig(checkpoint=str(checkpoint), datasets={"a": str(data["plays_a"])}, output_path=str(out)))
        evaluations.append(str(out))
    out = forecast(
        ForecastConfig(evaluations=evaluations, output_path=str(tmp_path / "forecast"), target_flops=3e10, samples=50)
    )
    assert [f["evaluation"] for f in out["flagged_rungs"]] == ["../evaluation/broken"]
    reasons = out["flagged_rungs"][0]["reasons"]
    assert reasons[0].startswith("diverged: the run ended at a training loss of") and len(reasons) == 2
    assert reasons[1].startswith("off the law: ")
    assert out["rung_check"]["curves_checked"] == 5
    assert [r["in_fit"] for r in out["rungs"]].count(False) == 1
    assert out["prediction_other"]["rungs"] == "every rung, the flagged included"
    assert out["prediction_other"]["loss"] != pytest.approx(out["prediction"]["loss"], rel=1e-3)


def test_a_target_at_30x_its_rate_is_stopped_before_30_percent_and_the_healthy_one_runs_to_the_end(
    root, stopped, tmp_path
):
    broken, raised = stopped
    assert "stopped (stop_off_forecast):" in str(raised) and " of 40 steps" in str(raised)
    record = json.loads((broken / "forecast_watch.json").read_text())
    assert record["flagged"] and record["flagged_at_step"] < 12 and record["saved"]["fraction_of_run"] > 0.7
    lines = losses(broken)
    assert len(lines) < 12 and any(line.get("forecast/off") == 1 for line in lines)
    assert (
        not (broken / "train_info.json").exists()
        or not json.loads((broken / "train_info.json").read_text())["complete"]
    )

    data = {"plays_a": str(corpus(root / "corpus")["plays_a"])}
    band = band_file(tmp_path / "forecast", reference_run(root))
    healthy = tmp_path / "healthy"
    train(
        tiny_train_config(
            str(healthy), data, seed=8, watch_forecast=band, stop_off_forecast=True, wandb_mode="disabled"
        )
    )
    record = json.loads((healthy / "forecast_watch.json").read_text())
    assert not record["flagged"] and len(record["comparisons"]) == 20, record["comparisons"]
    lines = losses(healthy)
    assert len(lines) == 40 and sum("forecast/loss" in line for line in lines) == 20
    assert json.loads((healthy / "train_info.json").read_text())["complete"]
