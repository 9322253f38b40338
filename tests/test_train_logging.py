"""A training leaves the process's logging as it found it, so steps run after it log each line once.

Levanter's `init_logging` replaces the root logger's handlers with its own console and file handlers. If
they stayed, a user running one experiment after another in the same process (or the test suite) would
get every log line of every later step twice in the step's log: once from the executor's handler and
once through Levanter's console handler, whose stream (sys.stderr while the training step ran) the
executor routes into the log of whichever step is logging.
"""

from __future__ import annotations

import logging
from pathlib import Path

from experiments.defaults_training import default_train
from marin.execution import Executor, ExecutorStep
from marin.training.config import LlamaModelConfig
from tests.executor_steps import CountConfig, count_step
from tests.training_fixtures import corpus


def test_a_step_run_after_a_training_logs_each_line_once(tmp_path):
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    data = str(corpus(tmp_path / "corpus")["plays_a"])
    model = LlamaModelConfig(seq_len=64, hidden_dim=32, intermediate_dim=64, num_heads=2, num_kv_heads=2)
    trained = default_train(
        "tiny",
        data,
        model=model,
        train_batch_size=8,
        num_train_steps=4,
        checkpoint_every_steps=2,
        hf_export=False,
        wandb_mode="disabled",
    )
    Executor(str(tmp_path / "lab"), backend="local").run([trained])
    assert root.handlers == handlers and root.level == level

    step = ExecutorStep("after/count", count_step, CountConfig(value=1))
    out = Path(Executor(str(tmp_path / "lab"), backend="local").run([step])[step])
    log = (out / ".executor_logs" / "001.log").read_text()
    assert log.count("log line from the step") == 1, log
