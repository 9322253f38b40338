"""The reference training as an executor step, for the test that kills it and reruns it:

python -m tests.train_resume_dag PREFIX TOKENIZED_DATASET
"""

from __future__ import annotations

import sys

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep
from marin.training.train import train
from tests.training_fixtures import tiny_train_config


def build(dataset: str) -> list[ExecutorStep]:
    config = tiny_train_config(THIS_OUTPUT_PATH, {"plays_a": dataset}, wandb_mode="disabled")
    return [ExecutorStep("train/resumed", train, config)]


if __name__ == "__main__":
    prefix, dataset = sys.argv[1:3]
    Executor(prefix, backend="local", experiment_name="train_resume").run(build(dataset))
