"""A train step whose resources ask for a GPU or TPU refuses to train on the CPU (this machine has none)."""

from __future__ import annotations

import pytest

from marin.execution import Executor, ExecutorStep, ResourceConfig, this_output_path
from marin.execution.executor import ExecutorRunError
from marin.training.accelerator import check_accelerator, required_accelerator
from marin.training.config import TrainConfig
from marin.training.train import train


def test_train_step_asking_for_a_gpu_fails_naming_the_fix_before_training(tmp_path):
    data = tmp_path / "tokenized"
    (data / "train").mkdir(parents=True)  # never read: the check comes before the inputs'
    step = ExecutorStep(
        name="checkpoints/needs-a-gpu",
        fn=train,
        config=TrainConfig(data={"plays": str(data)}, output_path=this_output_path(), num_train_steps=2),
        resources=ResourceConfig(cpu=1, gpu=1),
    )
    with pytest.raises(ExecutorRunError) as failed:
        Executor(str(tmp_path / "prefix"), backend="local").run([step])
    error = failed.value.outcomes[step].error
    assert error.startswith("RuntimeError: train step needs-a-gpu-"), error
    assert "needs a GPU (its ResourceConfig asks for gpu=1), but jax 0.7.2 sees only cpu devices" in error
    assert "refusing to train on the cpu" in error and "uv sync --frozen --extra gpu" in error
    assert not list((tmp_path / "prefix").rglob("train_info.json")), "nothing was trained or written"


def test_tpu_resources_or_require_accelerator_refuse_the_cpu_and_plain_steps_do_not():
    with pytest.raises(RuntimeError, match=r"needs a TPU \(its ResourceConfig asks for tpu=4\).*--extra tpu"):
        check_accelerator("train step x", {"cpu": 1, "gpu": 0, "tpu": 4})
    with pytest.raises(RuntimeError, match="require_accelerator=True.*--extra gpu.*--extra tpu"):
        check_accelerator("train step x", None, require_any=True)
    assert check_accelerator("train step x", {"cpu": 1, "gpu": 0, "tpu": None}) is None
    assert required_accelerator({"gpu": 0.5}, False) == "gpu"
