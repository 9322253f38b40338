"""Trainings of the tiny reference model on a layout of forced CPU devices, for tests/test_mesh_layouts.py.

    python -m tests.mesh_runs DEVICES JOBS.json

`--xla_force_host_platform_device_count` must be set before jax is imported, so each device count needs
a process of its own (the test's own process is the one-device one). JOBS.json is a list of jobs, run
in order, each training the same model and data for `steps` steps on the layout `mesh` (MeshConfig
fields):

- `{"prefix": P, ...}`: the experiment `mesh` (one train step) run by the executor under prefix P, so
  that `marin verify` can compare its record with another run's;
- `{"describe_to": file, "mesh": ...}`: no training; Levanter's mesh for that layout, as JSON;
- `{"out": folder, "resume_from": [prefix, k], ...}`: `train()` into a folder of its own, starting from
  a copy of checkpoint `step-k` of the experiment under `prefix` (waiting until that run has succeeded,
  since another process may be training it): Levanter resumes from the copy, on this layout.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
import sys
import time
from pathlib import Path

STEPS = 8
CHECKPOINT_EVERY = 4


def train_step(data: str, mesh: dict, steps: int = STEPS):
    from experiments.defaults_training import default_train
    from marin.training.config import MeshConfig
    from tests.training_fixtures import tiny_train_config

    reference = tiny_train_config("unused", {"plays_a": data})
    return default_train(
        "mesh",
        data,
        model=reference.model,
        optimizer=reference.optimizer,
        train_batch_size=reference.train_batch_size,
        num_train_steps=steps,
        seed=reference.seed,
        max_eval_batches=1,
        checkpoint_every_steps=CHECKPOINT_EVERY,
        wandb_mode="disabled",
        mesh=MeshConfig(**mesh),
    )


def train_output(prefix: str, timeout_s: float = 900.0) -> Path:
    """The train step's output under `prefix`, once it has succeeded."""
    from marin.execution.status import read_statuses
    from marin.storage.layout import State

    deadline = time.monotonic() + timeout_s
    while True:
        found = glob.glob(os.path.join(prefix, "checkpoints", "mesh-*"))
        if found and read_statuses(found) == [State.SUCCESS]:
            return Path(found[0])
        if time.monotonic() > deadline:
            raise TimeoutError(f"no successful train step under {prefix}")
        time.sleep(0.5)


def describe_mesh(mesh: dict, out: str) -> None:
    """Levanter's own view of the layout `mesh` maps to on this process's devices, written as JSON."""
    from marin.training.config import MeshConfig
    from marin.training.mesh import checked_trainer_config, layout_for
    from tests.training_fixtures import tiny_train_config

    config = tiny_train_config("unused", {"d": "unused"}, mesh=MeshConfig(**mesh))
    trainer = checked_trainer_config(config, train_batch_size=config.train_batch_size)
    import jax

    ours = layout_for(config, jax.device_count())
    shape = dict(trainer.device_mesh.shape)
    Path(out).write_text(json.dumps({"levanter": shape, "batch_split": trainer.data_axis_size, "marin": vars(ours)}))


def run_job(job: dict) -> None:
    mesh = {k: tuple(v) if isinstance(v, list) else v for k, v in job.get("mesh", {}).items()}
    if "describe_to" in job:
        return describe_mesh(mesh, job["describe_to"])
    step = train_step(job["data"], mesh, job.get("steps", STEPS))
    started = time.monotonic()
    if "prefix" in job:
        from marin.execution import Executor

        Executor(job["prefix"], backend="local", experiment_name="mesh").run([step])
        where = job["prefix"]
    else:
        from marin.training.train import train

        source, k = job["resume_from"]
        out = Path(job["out"])
        shutil.copytree(train_output(source) / "checkpoints" / f"step-{k}", out / "checkpoints" / f"step-{k}")
        train(dataclasses.replace(step.config, output_path=str(out), hf_export=False))
        where = str(out)
    print(f"mesh_runs: {where} with {mesh or 'FSDP'} took {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    devices, jobs_file = sys.argv[1], sys.argv[2]
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    import jax

    assert jax.device_count() == int(devices), jax.devices()
    for job in json.loads(Path(jobs_file).read_text()):
        run_job(job)
