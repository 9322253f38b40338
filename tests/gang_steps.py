"""The gang tests' (and the preemption benchmark's) inputs: a tiny train step on 2 hosts of 2 CPU devices.

Also the way they read a checkpoint: by its tensors (tensorstore), since a 4-device run and a 1-device run
lay their chunks out differently, and by its files' bytes (identical runs on one layout).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import sys

from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, ResourceConfig
from marin.training.train import train
from tests.training_fixtures import tiny_train_config

HOSTS = 2
DEVICES_PER_HOST = 2
FORCED_DEVICES = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={DEVICES_PER_HOST}"}
STEPS = 24
CHECKPOINT_EVERY = 4


def gang_config(output_path=THIS_OUTPUT_PATH, data: str = "", **overrides):
    """The tutorial family's smallest model, a global batch of 8 sequences, no W&B, no HF export."""
    fields = dict(
        num_train_steps=STEPS,
        checkpoint_every_steps=CHECKPOINT_EVERY,
        wandb_mode="disabled",
        hf_export=False,
        steps_per_eval=0,
    )
    fields.update(overrides)
    return tiny_train_config(output_path, {"plays_a": data}, **fields)


def gang_step(data: str, compile_cache: str | None = None, **overrides) -> ExecutorStep:
    """The gang's train step; `compile_cache`: a jax compilation cache the hosts share (a restart then skips
    compiling: the same programs, so the same bytes)."""
    env = dict(FORCED_DEVICES)
    if compile_cache:
        env.update(JAX_COMPILATION_CACHE_DIR=compile_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    return ExecutorStep(
        "train/gang",
        train,
        gang_config(data=data, **overrides),
        resources=ResourceConfig(hosts=HOSTS, cpu=1, env=env),
    )


def checkpoint_files(checkpoint: str) -> dict[str, str]:
    """sha256 of every file of a checkpoint folder (any storage), by relative path, but its metadata.json."""
    from marin.storage import url_to_fs

    fs, plain = url_to_fs(checkpoint)
    fs.invalidate_cache()
    out = {}
    for path in sorted(fs.find(plain)):
        rel = posixpath.relpath(path, plain)
        if rel != "metadata.json":
            out[rel] = hashlib.sha256(fs.cat_file(path)).hexdigest()
    return out


def checkpoint_tensors(checkpoint: str) -> dict[str, object]:
    """Every array of a local Levanter checkpoint folder, read with tensorstore, by relative path."""
    import tensorstore as ts

    arrays = {}
    for root, _dirs, files in os.walk(checkpoint):
        if ".zarray" in files:
            spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": root}}
            arrays[os.path.relpath(root, checkpoint)] = ts.open(spec).result().read().result()
    return arrays


if __name__ == "__main__":
    # python -m tests.gang_steps OUTPUT DATA: the same training as one process (whatever devices it sees)
    train(gang_config(sys.argv[1], sys.argv[2]))
