"""The train step's summary: both evaluations labelled for what they are, evaluations as points, throughput,
a log-y toggle, and what metrics.jsonl lacks said so, over files written as the train and evaluation steps
write them (marin/training/metrics.py, marin/evaluation/evaluate.py), read through the real local filesystem.
The gradient norm and MFU of a real training are in tests/test_browser_train_page_trained.py."""

from __future__ import annotations

import json
import re

import fsspec

from marin.browser.summaries import CurveOptions, results_summary, train_summary


def _write_train(folder, max_eval_batches=4):
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for step in range(20):
        row = {"step": step, "loss": 5.0 - step * 0.1, "lr": 1e-3, "tokens": 1024 * (step + 1)}
        row["tokens_per_second"] = 5000.0 + step
        if step % 5 == 4:
            row["eval_loss"], row["eval_bpb"] = 4.9 - step * 0.1, 3.0 - step * 0.05
        rows.append(row)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / ".executor_info").write_text(json.dumps({"config": {"max_eval_batches": max_eval_batches}}))
    return str(folder / "metrics.jsonl"), (folder / "metrics.jsonl").stat().st_size


def test_in_training_evaluations_are_labelled_points_with_throughput_and_a_log_y_toggle(tmp_path):
    fs = fsspec.filesystem("file")
    path, size = _write_train(tmp_path / "train")
    html = train_summary(fs, path, size, CurveOptions())
    loss = html.split('class="plot loss-curve"', 1)[1].split("</svg>", 1)[0]
    assert loss.count('class="marker eval"') == 4  # four evaluations, drawn as points
    assert 'data-series="eval_loss (in-training eval, 4 batches)"' in loss
    assert 'polyline class="line' not in loss.split('data-series="eval_loss', 1)[1][:200]
    assert "first 4 batches of packed sequences" in html and "differ from these" in html
    assert 'class="plot lr-curve"' in html and 'class="plot throughput-curve"' in html
    assert "not in this step&#x27;s metrics.jsonl: gradient norm" in html
    assert "MFU: not shown, train_info.json does not record the device" in html
    assert re.search(r'href="\?logy=1">log</a>', html)
    logged = train_summary(fs, path, size, CurveOptions.from_query(None, None, logy="1"))
    assert "loss (log)" in logged and "tokens / s (log)" in logged
    assert "loss (log)" not in html


def test_the_evaluation_steps_results_say_they_are_a_different_computation(tmp_path):
    results = {"checkpoint": "../ckpt/step-19", "step": 19, "datasets": {"heldout": {"loss": 4.61, "bpb": 2.81}}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    html = results_summary(fsspec.filesystem("file"), str(tmp_path / "results.json"), 200)
    assert "Scored by this evaluation step" in html and "max_eval_batches" in html


def test_a_constant_series_up_to_float_noise_draws_at_once(tmp_path):
    """A learning rate of 3e-3 logged as 0.003 and 0.0030000000000000005 once looped forever in the ticks."""
    from marin.browser.svg import nice_ticks

    assert nice_ticks(0.003, 0.003 + 4e-19) == [] or len(nice_ticks(0.003, 0.003 + 4e-19)) <= 2
    rows = [{"step": s, "loss": 3.0 - s / 10, "lr": 0.003 if s % 2 else 0.0030000000000000005} for s in range(10)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = train_summary(fsspec.filesystem("file"), str(tmp_path / "metrics.jsonl"), 10_000, CurveOptions())
    assert 'class="plot lr-curve"' in html


def test_device_kinds_map_to_the_cost_tables_peaks_and_a_cpu_to_none():
    from marin.training.cost import DEVICES, peak_flops_of_device_kind

    assert peak_flops_of_device_kind("TPU v5 lite") == ("tpu-v5e", DEVICES["tpu-v5e"])
    assert peak_flops_of_device_kind("TPU v5p") == ("tpu-v5p", DEVICES["tpu-v5p"])
    assert peak_flops_of_device_kind("TPU v4") == ("tpu-v4", DEVICES["tpu-v4"])
    assert peak_flops_of_device_kind("NVIDIA H200") == ("nvidia-h200", DEVICES["nvidia-h200"])
    assert peak_flops_of_device_kind("cpu") == (None, None)
    assert peak_flops_of_device_kind("Some Future Chip") == (None, None)
