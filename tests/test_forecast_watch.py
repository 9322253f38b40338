"""The forecast of a target's whole curve, and the watch that holds a running target to it (no training here;
tests/test_ladder_broken_runs.py trains the real ones)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from marin.evaluation.forecast_curve import forecast_curve, window_mean
from marin.training.forecast_watch import OffForecast, Watch, band_at, read_band


def family_curve(flops: float, steps: int) -> list[float]:
    """A training curve of a ladder's family: at each fraction f, a·C^(−b)·(1 + 3(1 − f)²) + 1.5."""
    f = (np.arange(steps) + 1) / steps
    return list(40.0 * flops**-0.1 * (1 + 3 * (1 - f) ** 2) + 1.5)


def test_the_targets_curve_is_forecast_from_the_rungs_curves_at_every_fraction():
    flops = [1e10, 3e10, 1e11, 3e11, 1e12]
    curves = [family_curve(c, 200 * (i + 1)) for i, c in enumerate(flops)]
    target = 1e13
    curve = forecast_curve(flops, curves, target)
    truth = family_curve(target, 2000)
    assert [p["fraction"] for p in curve] == pytest.approx([0.05 * k for k in range(1, 21)])
    for point in curve:
        assert point["loss"] == pytest.approx(window_mean(truth, point["fraction"], 0.025), rel=0.01)
        assert point["low"] < point["loss"] < point["high"]
    assert forecast_curve(flops[:3], curves[:3], target) is None


BAND = [{"fraction": f, "loss": 3.0, "low": 2.9, "high": 3.1} for f in (0.1, 0.5, 1.0)]


def watch(stop: bool, tmp_path=None) -> Watch:
    return Watch(
        band=BAND,
        num_train_steps=100,
        every=5,
        patience=3,
        stop=stop,
        flops_per_step=1e9,
        output_path=str(tmp_path) if tmp_path else None,
    )


def test_the_band_is_interpolated_and_nothing_is_compared_before_its_first_point():
    band = [
        {"fraction": 0.2, "loss": 4.0, "low": 3.8, "high": 4.2},
        {"fraction": 0.4, "loss": 3.0, "low": 2.8, "high": 3.2},
    ]
    assert band_at(band, 0.1) is None
    assert band_at(band, 0.3) == pytest.approx((3.5, 3.3, 3.7))
    assert band_at(band, 0.9) == (3.0, 2.8, 3.2)


def test_a_run_inside_its_band_is_never_flagged():
    w = watch(stop=True)
    for step in range(100):
        w.feed(step, 3.0 + 0.05 * math.sin(step))
    assert w.feed(99, 3.0) is None
    assert w.flagged_at is None and len(w.comparisons) == 19 and not any(c["outside"] for c in w.comparisons)


def test_a_run_outside_its_band_for_patience_comparisons_is_stopped_with_the_compute_saved(tmp_path):
    w = watch(stop=True, tmp_path=tmp_path)
    with pytest.raises(
        OffForecast, match=r"stopped \(stop_off_forecast\): 75 of 100 steps \(75%, 7\.5e\+10 FLOPs\) not spent"
    ):
        for step in range(100):
            w.feed(step, 3.0 if step < 10 else 3.5)
            w.raise_if_stopped()
    record = json.loads((tmp_path / "forecast_watch.json").read_text())
    assert record["flagged"] and record["flagged_at_step"] == 24 and record["saved"]["steps"] == 75
    assert [c["outside"] for c in record["comparisons"]] == [False, True, True, True]


def test_a_loss_that_is_not_finite_is_outside_the_band_and_a_watch_that_does_not_stop_only_flags():
    w = watch(stop=False)
    figures = [w.feed(step, None if step >= 20 else 3.0) for step in range(100)]
    assert w.flagged_at == 34 and figures[34]["forecast/off"] == 1 and figures[39]["forecast/outside"] == 1
    assert len(w.comparisons) == 19 and w.summary()["saved"]["steps"] == 0


def test_a_forecast_without_a_curve_is_an_early_error_naming_the_field(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train\.watch_forecast: .*forecast\.json does not exist"):
        read_band(str(tmp_path))
    (tmp_path / "forecast.json").write_text(json.dumps({"prediction": {"loss": 3.0, "curve": None}}))
    with pytest.raises(ValueError, match=r"train\.watch_forecast: .* holds no predicted curve"):
        read_band(str(tmp_path))


def test_stopping_off_the_forecast_without_a_forecast_is_an_error_naming_the_field():
    from tests.training_fixtures import tiny_train_config

    with pytest.raises(ValueError, match=r"train\.stop_off_forecast needs train\.watch_forecast"):
        tiny_train_config("out", {"d": "data"}, stop_off_forecast=True)


def test_a_ladder_asked_to_stop_off_forecast_watches_its_target_only_and_leaves_the_rest_unchanged(tmp_path):
    from experiments.defaults_training import scaling_ladder
    from marin.execution import Executor

    plain = scaling_ladder("tiny", "/data/tokenized", sizes=[32, 48, 64], vocab_size=512, target=96)
    stopped = scaling_ladder(
        "tiny", "/data/tokenized", sizes=[32, 48, 64], vocab_size=512, target=96, stop_off_forecast=True
    )
    target = stopped.target.train.config
    assert target.watch_forecast.step is stopped.forecast and target.stop_off_forecast
    assert plain.target.train.config.watch_forecast is None
    executor = Executor(str(tmp_path), backend="local")
    plain_plan = executor.plan([*plain.steps, plain.target.train])
    stopped_plan = executor.plan([*stopped.steps, stopped.target.train])
    for a, b in zip(plain.steps, stopped.steps, strict=True):
        assert plain_plan[a] == stopped_plan[b]
    assert plain_plan[plain.target.train] != stopped_plan[stopped.target.train]


def test_the_step_page_says_a_run_left_its_forecast_loudly_with_the_compute_saved(tmp_path):
    import fsspec

    from marin.browser.summaries import watch_summary

    w = watch(stop=True, tmp_path=tmp_path)
    with pytest.raises(OffForecast):
        for step in range(100):
            w.feed(step, 3.0 if step < 10 else 3.5)
            w.raise_if_stopped()
    path = tmp_path / "forecast_watch.json"
    html = watch_summary(fsspec.filesystem("file"), str(path), path.stat().st_size)
    assert "OFF ITS FORECAST: 3 comparisons in a row outside the band, flagged at step 24; stopped: 75 steps" in html
    assert html.count(">outside<") == 3 and html.count(">inside<") == 1
