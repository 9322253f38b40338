"""What a run cost, measured beside what it was estimated to cost: `cost.json` of real train and evaluate steps.

The training is the shared reference run of tests/training_fixtures.py (trained once per process); the
evaluation scores its final checkpoint on the fixture corpus's held-out split.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from marin.training.cost import CostSettings, estimate, evaluation_flops, training_flops
from tests.training_fixtures import corpus, reference_run, tiny_train_config


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "training"


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_training_records_its_estimate_and_the_device_seconds_it_took(root):
    run = reference_run(root)
    cost = json.loads((run / "cost.json").read_text())
    config = tiny_train_config(str(run), {"plays_a": "unused"})
    vocab = json.loads((run / "train_info.json").read_text())["vocab_size"]
    work = training_flops(config.model, vocab, 40 * 8 * 64)
    assert cost["kind"] == "train" and cost["steps_run"] == 40 and cost["first_step"] == 0
    planned = estimate(work["flops"], {"cpu": 1}, CostSettings())
    est = cost["estimate"]
    assert est["flops"] == pytest.approx(work["flops"]) and est["flops_6nd"] == pytest.approx(work["flops_6nd"])
    assert (est["device"], est["devices"], est["mfu"]) == ("cpu-core", 1.0, 0.4)
    assert est["device_seconds"] == pytest.approx(planned["device_seconds"])

    measured = cost["measured"]
    metrics = _metrics(run)
    started = (run / "volatile_files.txt").stat().st_mtime  # the train step's first write
    ended = (run / "cost.json").stat().st_mtime
    assert measured["wall_seconds"] >= metrics[-1]["elapsed_s"], "the step's time covers its training loop"
    assert ended - measured["wall_seconds"] <= started + 0.05, "and starts before the step wrote anything"
    assert measured["step_seconds"] == pytest.approx(sum(m["duration_s"] for m in metrics))
    assert 0 < measured["step_seconds"] <= measured["wall_seconds"]
    assert measured["device_seconds"] == pytest.approx(measured["wall_seconds"])  # one cpu-core asked for
    assert measured["realised_flops_per_s"] == pytest.approx(work["flops"] / measured["device_seconds"])
    assert measured["realised_mfu"] == pytest.approx(measured["realised_flops_per_s"] / 5e10)
    assert measured["estimate_ratio"] == pytest.approx(measured["device_seconds"] / est["device_seconds"])
    assert measured["step_tokens_per_s"] == pytest.approx(40 * 8 * 64 / measured["step_seconds"])
    print(
        f"\nreference run: {work['flops']:.3g} FLOPs, estimated {est['device_seconds']:.3g} device-s, measured "
        f"{measured['wall_seconds']:.1f} s ({measured['step_seconds']:.1f} s in steps), realised MFU "
        f"{measured['realised_mfu']:.2e} of a cpu-core's 5e10 FLOP/s, ratio {measured['estimate_ratio']:.3g}"
    )


def test_a_resumed_training_counts_only_the_steps_it_ran(root, tmp_path):
    """The cost record of an attempt that resumed at step 20: the estimate and throughput are of 20 steps."""
    from marin.training.train import _write_cost

    run = reference_run(root)
    copy = tmp_path / "resumed"
    copy.mkdir()
    shutil.copy(run / "metrics.jsonl", copy / "metrics.jsonl")
    vocab = json.loads((run / "train_info.json").read_text())["vocab_size"]
    config = tiny_train_config(str(copy), {"plays_a": "unused"})
    _write_cost(config, vocab, 20, 12.5)
    cost = json.loads((copy / "cost.json").read_text())
    assert (cost["first_step"], cost["steps_run"], cost["num_train_steps"]) == (20, 20, 40)
    assert cost["estimate"]["tokens"] == 20 * 8 * 64
    assert cost["measured"]["wall_seconds"] == 12.5
    metrics = _metrics(run)
    assert cost["measured"]["step_seconds"] == pytest.approx(sum(m["duration_s"] for m in metrics[20:]))


def test_an_evaluation_records_its_forward_flops_and_the_seconds_it_took(root, tmp_path):
    from marin.evaluation.evaluate import EvalConfig, evaluate
    from marin.storage.manifest import VOLATILE_LIST

    run = reference_run(root)
    data = corpus(root / "corpus")
    out = tmp_path / "eval"
    begun = time.monotonic()
    results = evaluate(
        EvalConfig(checkpoint=str(run), datasets={"plays_a": str(data["plays_a"])}, output_path=str(out))
    )
    took = time.monotonic() - begun
    cost = json.loads((out / "cost.json").read_text())
    info = json.loads((run / "train_info.json").read_text())
    tokens = results["datasets"]["plays_a"]["tokens"]
    work = evaluation_flops(tiny_train_config(str(run), {"plays_a": "unused"}).model, info["vocab_size"], tokens)
    assert cost["kind"] == "evaluate" and cost["estimate"]["tokens"] == tokens
    assert cost["estimate"]["flops"] == pytest.approx(work["flops"])
    assert 0 < cost["measured"]["wall_seconds"] <= took
    assert cost["measured"]["estimate_ratio"] == pytest.approx(
        cost["measured"]["device_seconds"] / cost["estimate"]["device_seconds"]
    )
    assert (out / VOLATILE_LIST).read_text().split() == ["cost.json"], "its timings vary between identical runs"


def test_a_malformed_mfu_fails_the_training_before_it_writes_anything(root, tmp_path, monkeypatch):
    from marin.training.train import train

    data = corpus(root / "corpus")
    monkeypatch.setenv("MARIN_MFU", "40")
    out = tmp_path / "never"
    with pytest.raises(ValueError, match=r"MARIN_MFU='40'.*mfu must be in \(0, 1\]"):
        train(tiny_train_config(str(out), {"plays_a": str(data["plays_a"])}))
    assert not out.exists()
