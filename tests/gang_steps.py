"""The gang tests' (and the preemption benchmark's) inputs: a tiny train step on 2 hosts of 2 CPU devices.

Also the ways they compare runs: a checkpoint by its tensors (tensorstore), since a 4-device run and a
1-device run lay their chunks out differently, and a finished step by its manifest (identical layouts).
"""

from __future__ import annotations

import json
import os

from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, ResourceConfig
from marin.training.train import train
from tests.training_fixtures import tiny_train_config

HOSTS = 2
DEVICES_PER_HOST = 2
FORCED_DEVICES = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={DEVICES_PER_HOST}"}
STEPS = 40
CHECKPOINT_EVERY = 4


def gang_step(data: str, compile_cache: str | None = None) -> ExecutorStep:
    """The reference training of tests/training_fixtures.py (W&B offline, HF export) on a gang of 2 hosts.

    `compile_cache`: a jax compilation cache the hosts share (a restart then skips compiling: the same
    programs, so the same bytes)."""
    env = dict(FORCED_DEVICES)
    if compile_cache:
        env.update(JAX_COMPILATION_CACHE_DIR=compile_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    config = tiny_train_config(THIS_OUTPUT_PATH, {"plays_a": data})
    assert (config.num_train_steps, config.checkpoint_every_steps) == (STEPS, CHECKPOINT_EVERY)
    return ExecutorStep("train/gang", train, config, resources=ResourceConfig(hosts=HOSTS, cpu=1, env=env))


def attempt_file(out: str, name: str) -> str:
    """`name` in the running attempt's folder of the step at `out` (where a running step writes)."""
    from marin.storage.staging import attempts, staging_path

    names = attempts(out)
    return f"{staging_path(out, names[-1])}/{name}" if names else f"{out}/{name}"


def metric_steps(out: str) -> list[int]:
    """The steps in the running attempt's metrics.jsonl."""
    from marin.storage import read_bytes

    data = read_bytes(attempt_file(out, "metrics.jsonl")) or b""
    return [json.loads(line)["step"] for line in data.decode().splitlines() if line.strip()]


def reproducible_files(out: str) -> dict[str, str]:
    """sha256 by path of every file of a finished step's manifest that is not declared volatile."""
    from marin.storage import read_bytes
    from marin.storage.layout import MANIFEST_FILE

    manifest = json.loads(read_bytes(f"{out}/{MANIFEST_FILE}"))
    return {f["path"]: f["sha256"] for f in manifest["files"] if not f.get("volatile")}


def checkpoint_tensors(checkpoint: str) -> dict[str, object]:
    """Every array of a local Levanter checkpoint folder, read with tensorstore, by relative path."""
    import tensorstore as ts

    arrays = {}
    for root, _dirs, files in os.walk(checkpoint):
        if ".zarray" in files:
            spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": root}}
            arrays[os.path.relpath(root, checkpoint)] = ts.open(spec).result().read().result()
    return arrays


def fail_on_host_1(config) -> None:
    """A gang step whose host 1 raises while host 0 waits, as if in a collective, for ever."""
    import time

    from marin.stepkit.gang import gang_member

    if gang_member().host == 1:
        raise ValueError("a bad shard on host 1")
    time.sleep(3600)
