"""The reference training as an executor step, for the tests that kill or interrupt it and rerun it:

python -m tests.train_resume_dag PREFIX TOKENIZED_DATASET [long] [ray]

`long`: the Ctrl-C test's variant, long enough to be interrupted in mid-training, with no periodic
checkpoint before its last step (a checkpoint every 10,000 steps or 10 hours). `ray`: the training runs as
a Ray task (`--backend ray`, a local Ray the driver starts), as `default_train`'s steps do under `auto`.
"""

from __future__ import annotations

import sys

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep
from marin.training.train import train
from tests.training_fixtures import tiny_train_config

LONG = dict(num_train_steps=300, epochs=8, checkpoint_every_steps=10_000, checkpoint_every_minutes=600.0)


def build(dataset: str, long: bool = False) -> list[ExecutorStep]:
    config = tiny_train_config(THIS_OUTPUT_PATH, {"plays_a": dataset}, wandb_mode="disabled", **(LONG if long else {}))
    return [ExecutorStep("train/long" if long else "train/resumed", train, config)]


if __name__ == "__main__":
    prefix, dataset, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    backend = "ray" if "ray" in extra else "local"
    Executor(prefix, backend=backend, experiment_name="train_resume").run(build(dataset, "long" in extra))
