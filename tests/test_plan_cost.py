"""What a run costs before it is paid: the model's FLOP count, device-time estimates, and `marin plan`'s table.

The FLOP count is checked against Levanter's own (`levanter.utils.flop_utils.lm_flops_per_token`, written
independently); the plan of the shipped isoFLOP ladder is run through the real CLI.
"""

from __future__ import annotations

import json
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

ROW = (
    r"\s+(?P<action>run|skip)\s+(?P<step>\S+)-[0-9a-f]{8}\s+\S+\s+\S+\s+(?P<flops>\S+)\s+(?P<six_nd>\S+)\s+"
    r"(?P<device>1 cpu-core)\s+(?P<time>\d.*?)\s{2}(?P<basis>peak x MFU|measured)$"
)
"""A row of `marin plan`'s cost table (a costed step with known tokens)."""
TOTAL = (
    r"(?m)total, what would run \({train} train, {evaluate} evaluate\): FLOPs \(model\) (?P<flops>\S+), "
    r"FLOPs \(6·N·D\) (?P<six_nd>\S+), est. device time (?P<time>.+)$"
)
"""The cost table's total line."""
UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def seconds_of(words: str) -> float:
    """`2 min 5 s` -> 125.0: the plan's durations read back."""
    parts = words.split()
    assert len(parts) % 2 == 0 and all(unit in UNITS for unit in parts[1::2]), words
    return sum(float(n) * UNITS[unit] for n, unit in zip(parts[::2], parts[1::2], strict=True))


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
        m = re.match(ROW, line)
        if m and m["step"].startswith("checkpoints/"):
            rows[m["step"]] = (float(m["flops"]), float(m["six_nd"]), seconds_of(m["time"]))
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
    m = re.search(TOTAL.format(train=10, evaluate=10), out)
    assert m and float(m["flops"]) >= total * 0.999 and seconds_of(m["time"]) > 0
    assert "MFU 0.40" in out and "cpu-core 5e+10 FLOP/s" in out
    evaluations = [line for line in out.splitlines() if re.match(r"\s+run\s+evaluation/\S+\s+\d", line)]
    assert len(evaluations) == 10 and all(line.split()[3:6] == ["?", "?", "?"] for line in evaluations)
    assert "?: an evaluation's tokens (and so its FLOPs) are counted once the tokenize steps it reads have run" in out


def test_marin_plan_of_the_loss_law_ladder_runs_as_its_docstring_says_and_costs_its_rungs(tmp_path):
    result = marin("plan", "experiments/tutorial/tiny_ladder.py", "--prefix", str(tmp_path / "lab"))
    assert result.returncode == 0, result.stderr[-3000:]
    rungs = len(tiny_ladder.SIZES)
    assert re.search(TOTAL.format(train=rungs, evaluate=rungs), result.stdout)


def test_plan_times_read_as_durations_and_follow_what_this_machine_measured(tmp_path):
    """The tutorial's plan before any run: peak x MFU, in seconds. A finished training of the same kind on the
    same device (its `cost.json`, written by the step library's own writer, beside the planned step) replaces
    the assumption: its rate over the training steps plus its overhead around them."""
    from experiments.tutorial.tiny_lm import build
    from marin.training.cost import cost_record, duration_words, write_cost_record

    prefix = str(tmp_path / "lab")
    before = marin("plan", "experiments/tutorial/tiny_lm.py", "--prefix", prefix)
    assert before.returncode == 0, before.stderr[-3000:]
    rows = [m for m in map(lambda line: re.match(ROW, line), before.stdout.splitlines()) if m]
    assert [(m["step"], m["basis"]) for m in rows] == [("checkpoints/tiny-shakespeare", "peak x MFU")]
    flops = float(rows[0]["flops"])
    assert seconds_of(rows[0]["time"]) == pytest.approx(flops / (5e10 * 0.4), rel=0.01)
    assert "device-h" not in before.stdout and "e-0" not in before.stdout

    trained = build()["train"].config
    work = training_flops(trained.model, 1024, 3 * 16 * trained.model.seq_len)
    record = cost_record(
        kind="train", work=work, resources={"cpu": 1}, wall_seconds=40.0, step_seconds=10.0, extra={"steps_run": 3}
    )
    earlier = f"{prefix}/checkpoints/tiny-shakespeare-0123abcd"
    write_cost_record(earlier, record)
    rate = work["flops"] / 10.0
    after = marin("plan", "experiments/tutorial/tiny_lm.py", "--prefix", prefix)
    assert after.returncode == 0, after.stderr[-3000:]
    rows = [m for m in map(lambda line: re.match(ROW, line), after.stdout.splitlines()) if m]
    assert [(m["step"], m["basis"]) for m in rows] == [("checkpoints/tiny-shakespeare", "measured")]
    expected = 30.0 + flops / rate
    assert rows[0]["time"] == duration_words(expected), after.stdout
    assert re.search(TOTAL.format(train=1, evaluate=1), after.stdout)["time"] == duration_words(expected)
    assert (
        f"measured (train on cpu-core): {rate:.3g} FLOP/s (model) per device over the training steps "
        f"(MFU {rate / 5e10:.2g} of the assumed peak) + 30.0 s per run around them; median of 1 run(s) in "
        f"{prefix}/checkpoints/"
    ) in after.stdout
    assert "not measured yet" not in after.stdout
    assert json.loads(open(f"{earlier}/cost.json").read())["estimate"]["basis"] == "peak x MFU"


def test_durations_read_in_the_unit_that_fits():
    from marin.training.cost import duration_words

    assert [duration_words(s) for s in (0.25, 4.44, 125, 3 * 3600 + 600, 4 * 86400 + 7200, None)] == [
        "250 ms",
        "4.4 s",
        "2 min 5 s",
        "3 h 10 min",
        "4 d 2 h",
        "?",
    ]
