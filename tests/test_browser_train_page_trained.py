"""The train page over a real tiny training (the training tests' reference run, tests/training_fixtures.py,
trained once per process): the gradient norm Levanter logs each step, and MFU where the device's peak is
known (said not to be on a CPU)."""

from __future__ import annotations

import json
import math
import re
import shutil

import fsspec
import pytest

from marin.browser.summaries import CurveOptions, train_summary
from tests.training_fixtures import reference_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The training tests' reference run (40 steps of a tiny Llama on the CPU), trained once per process."""
    return reference_run(tmp_path_factory.getbasetemp() / "training")


def _hover_values(html: str, css: str, series: str) -> dict[int, float]:
    chart = html.split(f'class="plot {css}"', 1)[1].split("</svg>", 1)[0]
    found = re.findall(rf"<title>{re.escape(series)} @ (\d+): ([^<]+)</title>", chart)
    return {int(x): float(y) for x, y in found}


def test_a_real_training_logs_its_gradient_norm_and_the_page_draws_it_and_says_the_cpu_has_no_peak(trained):
    lines = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(40))
    norms = [line["grad_norm"] for line in lines]
    assert all(math.isfinite(n) and n > 0 for n in norms) and len(set(norms)) > 30
    assert all(line["param_norm"] > 0 for line in lines)
    info = json.loads((trained / "train_info.json").read_text())
    assert info["device_kind"] == "cpu" and info["device_count"] >= 1
    assert info["device_name"] is None and info["device_peak_flops_per_s"] is None
    assert info["model_flops_per_token"] > 6 * info["parameter_count"] / 2
    html = train_summary(fsspec.filesystem("file"), str(trained / "metrics.jsonl"), 1 << 20, CurveOptions())
    drawn = _hover_values(html, "grad-norm-curve", "grad_norm")
    assert drawn and all(abs(drawn[s] - norms[s]) <= 1e-4 * norms[s] for s in drawn)
    assert "not in this step&#x27;s metrics.jsonl: gradient norm" not in html
    assert 'class="plot mfu-curve"' not in html
    assert "MFU: not shown, no peak FLOP/s is known for the device this run trained on (cpu)" in html
    assert "achieved model FLOP/s, last step:" in html


def test_mfu_is_the_achieved_model_flops_over_the_named_devices_peak(trained, tmp_path):
    """The real run's files, with train_info.json saying what it would on four H100s (peak from cost.py)."""
    from marin.training.cost import DEVICES, peak_flops_of_device_kind

    copy = tmp_path / "train"
    copy.mkdir()
    shutil.copy(trained / "metrics.jsonl", copy / "metrics.jsonl")
    info = json.loads((trained / "train_info.json").read_text())
    name, peak = peak_flops_of_device_kind("NVIDIA H100 80GB HBM3")
    assert (name, peak) == ("nvidia-h100", DEVICES["nvidia-h100"])
    info.update(device_kind="NVIDIA H100 80GB HBM3", device_count=4, device_name=name, device_peak_flops_per_s=peak)
    (copy / "train_info.json").write_text(json.dumps(info))
    html = train_summary(fsspec.filesystem("file"), str(copy / "metrics.jsonl"), 1 << 20, CurveOptions())
    drawn = _hover_values(html, "mfu-curve", "mfu")
    lines = {line["step"]: line for line in map(json.loads, (copy / "metrics.jsonl").read_text().splitlines())}
    assert len(drawn) >= 20
    for step, mfu in drawn.items():
        expected = info["model_flops_per_token"] * lines[step]["tokens_per_second"] / (4 * peak)
        assert abs(mfu - expected) <= 1e-2 * expected  # the hover shows 3 significant digits
    assert "MFU = model FLOP/s" in html and "4 x NVIDIA H100 80GB HBM3" in html
