"""An isoFLOP ladder end to end through the executor: rungs trained and evaluated, the forecast fitted and
written; then a later run re-reads the forecast, trains the configuration it chose, evaluates it and
checks the forecast against the measured loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.execution import Executor
from marin.training.config import OptimizerConfig
from tests.training_fixtures import corpus

BUDGETS = [3e8, 6e8]
WIDTHS = [8, 16, 32]


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    from experiments.defaults_evaluation import isoflop_ladder

    data = corpus(tmp_path_factory.getbasetemp() / "training" / "corpus")
    prefix = str(tmp_path_factory.mktemp("isoflop") / "lab")
    ladder = isoflop_ladder(
        "iso-test",
        str(data["plays_a"]),
        budgets=BUDGETS,
        widths=WIDTHS,
        vocab_size=512,
        seq_len=32,
        train_batch_size=4,
        target_flops=1.2e9,
        optimizer=OptimizerConfig(learning_rate=1e-2, warmup=0.0),
        max_eval_documents=8,
        tokenizer=str(data["tokenizer"]),
        samples=50,
        wandb_mode="disabled",
        hf_export=False,
    )
    paths = Executor(prefix, backend="local").run([ladder.forecast])
    return prefix, ladder, paths, data


def test_without_a_target_the_forecast_is_for_ten_times_the_largest_rung_as_trained():
    from experiments.defaults_evaluation import isoflop_ladder

    ladder = isoflop_ladder(
        "iso-default", "/data/tokenized", budgets=BUDGETS, widths=WIDTHS, vocab_size=512, seq_len=32
    )
    trained = [
        6 * t.config.model.parameter_count(512) * t.config.num_train_steps * t.config.train_batch_size * 32
        for t in ladder.trains
    ]
    assert max(trained) != max(BUDGETS)
    assert ladder.forecast.config.target_flops == 10 * max(trained)


def test_the_ladder_trains_every_rung_and_writes_the_isoflop_forecast(ladder_run):
    prefix, ladder, paths, data = ladder_run
    assert len(ladder.trains) == len(ladder.evaluations) == 6
    out = Path(paths[ladder.forecast])
    forecast = json.loads((out / "forecast.json").read_text())
    assert (out / "forecast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [b["flops"] for b in forecast["budgets"]] == BUDGETS
    for budget in forecast["budgets"]:
        assert [r["params"] for r in budget["rungs"]] == sorted(r["params"] for r in budget["rungs"])
        assert len(budget["rungs"]) == 3 and budget["usable"] == (budget["note"] is None)
        assert all(abs(r["flops"] / budget["flops"] - 1) < 0.35 for r in budget["rungs"])
    assert forecast["constrained"] and forecast["prediction"]["config"]["steps"] >= 2
    assert any("exactly (3 sizes each)" in note for note in forecast["notes"])


def test_a_later_run_trains_the_chosen_configuration_scores_it_during_training_and_checks_the_forecast(ladder_run):
    """The target is trained with in-training lm-eval scores every 50 steps; the last one (at the end of
    training) equals the harness step's score of the final checkpoint: the same model, the same numbers."""
    from experiments.defaults_evaluation import default_harness, forecast_target, read_forecast

    prefix, ladder, paths, data = ladder_run
    forecast = read_forecast(paths[ladder.forecast])
    target = forecast_target(
        "iso-test",
        ladder,
        str(data["plays_a"]),
        forecast,
        harness_tasks=["shakespeare_next_line"],
        harness_every_steps=50,
        harness_limit=8,
    )
    scores = default_harness("iso-test-target", target.train, tasks=["shakespeare_next_line"], limit=8)
    later = Executor(prefix, backend="local").run([target.check, scores])
    check = json.loads((Path(later[target.check]) / "check.json").read_text())
    measured = json.loads((Path(later[target.evaluation]) / "results.json").read_text())
    assert check["forecast"] == forecast["prediction"]["loss"] and check["measured"] == measured["macro_loss"]
    assert check["error"] == pytest.approx(check["measured"] - check["forecast"])
    assert check["measured_flops"] == measured["flops"] and check["forecast_flops"] == 1.2e9
    assert check["interval"] is None and check["within_interval"] is None
    trained_dir = Path(later[target.train])
    trained = json.loads((trained_dir / "train_info.json").read_text())
    assert trained["model"] == forecast["prediction"]["config"]["model"]

    lines = [json.loads(line) for line in (trained_dir / "metrics.jsonl").read_text().splitlines()]
    key = "harness/shakespeare_next_line/acc"
    scored = [line["step"] for line in lines if key in line]
    steps = forecast["prediction"]["config"]["steps"]
    assert scored and all(step % 50 == 0 for step in scored[:-1]) and scored[-1] == lines[-1]["step"]
    final = json.loads((Path(later[scores]) / "metrics.json").read_text())["tasks"]["shakespeare_next_line"]
    assert final["documents"] == 8 and lines[-1][key] == final["metrics"]["acc"]
    assert lines[-1]["harness/shakespeare_next_line/acc_norm"] == final["metrics"]["acc_norm"]
    assert len(lines) == steps
