"""What a run costs before it is paid: the model's FLOP count, device-time estimates, and `marin plan`'s table.

The FLOP count is checked against Levanter's own (`levanter.utils.flop_utils.lm_flops_per_token`, written
independently); the plan of the shipped isoFLOP ladder is run through the real CLI.
"""

from __future__ import annotations

import re

import pytest

from experiments.tutorial import tiny_ladder
from marin.training.config import LlamaModelConfig
from marin.training.cost import (
    CostSettings,
    device_of,
    estimate,
    forward_flops_per_token,
    realised,
    training_flops,
)
from tests.cli_support import marin


def levanter_training_flops(model: LlamaModelConfig, vocab: int, tokens: float) -> float:
    from levanter.utils.flop_utils import lm_flops_per_token

    per_token = lm_flops_per_token(
        model.hidden_dim,
        model.intermediate_dim,
        model.num_layers,
        model.num_kv_heads,
        model.num_heads,
        model.seq_len,
        vocab,
        glu=True,
    )
    return 3 * per_token * tokens


@pytest.mark.parametrize(
    "model",
    [
        LlamaModelConfig(),
        LlamaModelConfig(
            hidden_dim=256, intermediate_dim=1024, num_layers=8, num_heads=8, num_kv_heads=2, seq_len=1024
        ),
        LlamaModelConfig(hidden_dim=16, intermediate_dim=64, num_layers=2, num_heads=1, num_kv_heads=1),
    ],
)
def test_the_flop_count_agrees_with_levanters_within_two_percent(model):
    """Levanter also counts the causal mask (3·seq_len per head and layer), which matters only at tiny widths."""
    ours = training_flops(model, 1024, 1e6)
    assert ours["flops"] == pytest.approx(levanter_training_flops(model, 1024, 1e6), rel=0.02)
    assert ours["flops_6nd"] == 6 * model.parameter_count(1024) * 1e6
    parts = forward_flops_per_token(model, 1024)
    assert parts["total"] == parts["matmul"] + parts["attention"] + parts["logits"]


def test_device_time_is_flops_over_peak_times_mfu_on_the_device_the_step_asks_for():
    settings = CostSettings(mfu=0.5)
    assert device_of({"gpu": 8, "accelerator_type": "H100"}, settings) == ("nvidia-h100", 8.0)
    assert device_of({"tpu": 4, "hosts": 2}, settings) == ("tpu-v4", 8.0)
    assert device_of({"cpu": 2}, settings) == ("cpu-core", 2.0)
    est = estimate(989e12 * 0.5 * 3600 * 8, {"gpu": 8, "accelerator_type": "H100"}, settings)
    assert est["device_hours"] == pytest.approx(8.0) and est["wall_hours"] == pytest.approx(1.0)
    after = realised(est, 989e12 * 0.5 * 3600 * 8, 2 * 3600 * 8)
    assert after["realised_mfu"] == pytest.approx(0.25) and after["estimate_ratio"] == pytest.approx(2.0)


def test_the_assumptions_are_configurable_and_checked(monkeypatch):
    monkeypatch.setenv("MARIN_MFU", "0.3")
    monkeypatch.setenv("MARIN_DEVICE_PEAKS", '{"cpu-core": 2e10}')
    settings = CostSettings.from_env()
    assert settings.mfu == 0.3 and settings.devices["cpu-core"] == 2e10
    monkeypatch.setenv("MARIN_MFU", "1.5")
    with pytest.raises(ValueError, match=r"MARIN_MFU='1.5'.*mfu must be in \(0, 1\]"):
        CostSettings.from_env()


def test_marin_plan_of_the_isoflop_ladder_prints_each_train_steps_flops_and_hours_and_the_total(tmp_path):
    from experiments.tutorial.isoflop_ladder import VOCAB_SIZE, build

    result = marin("plan", "experiments/tutorial/isoflop_ladder.py", "--prefix", str(tmp_path / "lab"))
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    _, ladder = build()
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s+run\s+(checkpoints/\S+)-[0-9a-f]{8}\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+1 cpu-core\s+(\S+)$", line)
        if m:
            rows[m[1]] = (float(m[2]), float(m[3]), float(m[4]))
    assert len(rows) == len(ladder.trains) == 10
    total = 0.0
    for trained in ladder.trains:
        flops, six_nd, hours = rows[trained.name]
        c = trained.config
        tokens = c.num_train_steps * c.train_batch_size * c.model.seq_len
        assert flops == pytest.approx(levanter_training_flops(c.model, VOCAB_SIZE, tokens), rel=0.05)
        assert six_nd == pytest.approx(6 * c.model.parameter_count(VOCAB_SIZE) * tokens, rel=0.01)
        assert hours > 0
        total += flops
    m = re.search(r"total, what would run \(10 train, 10 evaluate\): FLOPs (\S+), (\S+) estimated device-hours", out)
    assert m and float(m[1]) >= total * 0.999 and float(m[2]) > 0
    assert "MFU 0.40" in out and "cpu-core 5e+10 FLOP/s" in out
    evaluations = [line for line in out.splitlines() if re.match(r"\s+run\s+evaluation/\S+\s+\d", line)]
    assert len(evaluations) == 10 and all(line.split()[3:6] == ["?", "?", "?"] for line in evaluations)
    assert "?: an evaluation's tokens (and so its FLOPs) are counted once the tokenize steps it reads have run" in out


def test_marin_plan_of_the_loss_law_ladder_runs_as_its_docstring_says_and_costs_its_rungs(tmp_path):
    result = marin("plan", "experiments/tutorial/tiny_ladder.py", "--prefix", str(tmp_path / "lab"))
    assert result.returncode == 0, result.stderr[-3000:]
    rungs = len(tiny_ladder.SIZES)
    assert re.search(
        rf"total, what would run \({rungs} train, {rungs} evaluate\): FLOPs \S+, \S+ estimated device-hours",
        result.stdout,
    )
