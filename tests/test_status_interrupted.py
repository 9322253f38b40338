"""`marin status` tells a step that an interrupted attempt left behind from one never run, and for a training
says at which step it stopped and where a rerun resumes.

The steps here write what a training writes before Ctrl-C reaches it (one `metrics.jsonl` line per step, a
checkpoint folder whose `metadata.json` makes it complete) and are then interrupted the way the local
backend interrupts a step's thread (`RunnerInterrupted`), through the step runner's real path: the step is
INTERRUPTED, keeps its attempt folder and no state, and its lease is released. A real training interrupted and resumed
is tests/test_executor_train_resume.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.execution.executor import ExecutorRunError
from marin.execution.interrupts import RunnerInterrupted
from tests.cli_support import marin


@dataclass(frozen=True)
class FakeTrainConfig:
    num_train_steps: int = 300
    """Steps the training would run."""
    steps_done: int = 0
    """Steps it logs before it is interrupted."""
    checkpoint_at: int | None = None
    """The step of the one checkpoint it completes, if any."""
    output_path: str = THIS_OUTPUT_PATH
    """The step's folder (its attempt's, while it runs)."""


def interrupted_training(config: FakeTrainConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "metrics.jsonl"), "w") as f:
        for step in range(config.steps_done):
            f.write(json.dumps({"step": step, "loss": 5.0 - step / 100}) + "\n")
    if config.checkpoint_at is not None:
        folder = os.path.join(config.output_path, "checkpoints", f"step-{config.checkpoint_at}")
        os.makedirs(folder)
        with open(os.path.join(folder, "metadata.json"), "w") as f:
            json.dump({"step": config.checkpoint_at, "is_temporary": False}, f)
    raise RunnerInterrupted()


def test_status_says_where_an_interrupted_training_stopped_and_where_a_rerun_resumes(tmp_path):
    prefix = str(tmp_path / "lab")
    steps = [
        ExecutorStep(
            "checkpoints/resumable", interrupted_training, FakeTrainConfig(steps_done=versioned(61), checkpoint_at=50)
        ),
        ExecutorStep("checkpoints/early", interrupted_training, FakeTrainConfig(steps_done=versioned(61))),
    ]
    with pytest.raises(ExecutorRunError, match="2 step"):
        Executor(prefix, backend="local", experiment_name="interrupted", max_concurrent=1).run(steps)
    out = marin("status", prefix).stdout
    lines = {line.split()[1].rsplit("-", 1)[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines["checkpoints/resumable"].split()[0] == "interrupted", out
    assert lines["checkpoints/resumable"].endswith(
        "(at step 60 of 300; a rerun resumes from the checkpoint of step 50)"
    )
    assert lines["checkpoints/early"].endswith(
        "(at step 60 of 300; no checkpoint yet: a rerun starts again from step 0)"
    )
    assert "not run" not in out and "2 interrupted)" in out
