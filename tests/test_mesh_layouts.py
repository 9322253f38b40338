"""Device layouts: the tiny model on 1 and on 4 forced CPU devices (pure FSDP, and 2×2 data × model),
runs repeated byte for byte, migrated across layouts mid-run, and compared by `marin verify` by value.

One module fixture trains everything once: this process is the one-device side (it must see one CPU
device), a subprocess (tests/mesh_runs.py) the four-device side; they run at the same time and wait for
each other's checkpoints where a migration needs one. The four-device runs share a persistent jax
compilation cache, so a repeated layout costs seconds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from marin.storage import compute_manifest
from marin.tools.verify_values import compare_values
from marin.training.config import LlamaModelConfig, MeshConfig, TrainConfig
from marin.training.mesh import layout_for
from tests.cli_support import marin
from tests.mesh_runs import CHECKPOINT_EVERY, STEPS, run_job, train_output
from tests.training_fixtures import corpus, tiny_train_config

REPO = Path(__file__).resolve().parents[1]
LOSS_RTOL = 1e-5
"""Losses of another layout vs one device, relative (measured: <= 3e-7 over these 8 steps)."""
TP = {"model_axis_size": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    import jax

    assert jax.device_count() == 1, f"the one-device side runs in the test process, which sees {jax.devices()}"
    root = tmp_path_factory.mktemp("mesh")
    data = str(corpus(tmp_path_factory.getbasetemp() / "training" / "corpus")["plays_a"])
    prefixes = {name: str(root / name) for name in ("one", "fsdp", "fsdp_again", "tp", "tp_again")}
    # two four-device processes, one per layout: compiling is mostly single-threaded, so they overlap
    four = {
        "fsdp": [
            {"prefix": prefixes["fsdp"], "data": data},
            {"prefix": prefixes["fsdp_again"], "data": data},
            {"out": str(root / "one_to_four"), "data": data, "resume_from": [prefixes["one"], CHECKPOINT_EVERY]},
        ],
        "tp": [
            {"describe_to": str(root / "replicas.json"), "mesh": {"model_axis_size": 2, "replica_axis_size": 2}},
            {"prefix": prefixes["tp"], "data": data, "mesh": TP},
            {"prefix": prefixes["tp_again"], "data": data, "mesh": TP},
        ],
    }
    env = {
        **os.environ,
        "JAX_COMPILATION_CACHE_DIR": str(root / "jax-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }
    processes = {}
    for name, jobs in four.items():
        (root / f"{name}.json").write_text(json.dumps(jobs))
        with open(root / f"{name}.log", "w") as log:
            processes[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.mesh_runs", "4", str(root / f"{name}.json")],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
    try:
        run_job({"prefix": prefixes["one"], "data": data})
        while processes["fsdp"].poll() in (None, 0):  # a failed four-device process fails here, not in 15 min
            try:
                train_output(prefixes["fsdp"], timeout_s=1)
                break
            except TimeoutError:
                pass
        run_job({"out": str(root / "four_to_one"), "data": data, "resume_from": [prefixes["fsdp"], CHECKPOINT_EVERY]})
        codes = {name: process.wait(timeout=1200) for name, process in processes.items()}
    finally:
        for process in processes.values():
            process.kill()
    for name, rc in codes.items():
        assert rc == 0, (root / f"{name}.log").read_text()[-5000:]
    found = {name: train_output(prefix, timeout_s=0) for name, prefix in prefixes.items()}
    return {
        **found,
        "prefixes": prefixes,
        "replicas": root / "replicas.json",
        "one_to_four": root / "one_to_four",
        "four_to_one": root / "four_to_one",
    }


def losses(run: Path) -> dict[int, float]:
    return {line["step"]: line["loss"] for line in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}


def chunk_files(run: Path, array: str) -> list[str]:
    folder = run / "checkpoints" / f"step-{STEPS - 1}" / array
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_fsdp_and_2x2_layouts_shard_the_checkpoint_and_repeat_byte_for_byte(runs):
    q = "model/transformer/layers/stacked/self_attn/q_proj/weight"  # [layer, kv_head, q_per_kv, head_size, embed]
    assert chunk_files(runs["one"], q) == ["0.0.0.0.0"]
    assert chunk_files(runs["fsdp"], q) == [f"0.0.0.0.{i}" for i in range(4)]  # embed over data=4
    assert chunk_files(runs["tp"], q) == ["0.0.0.0.0", "0.0.0.0.1", "0.1.0.0.0", "0.1.0.0.1"]  # kv_head over model
    for layout in ("fsdp", "tp"):
        verify = marin("verify", runs["prefixes"][layout], runs["prefixes"][f"{layout}_again"])
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "identical  checkpoints/mesh" in verify.stdout and "all steps identical" in verify.stdout


def test_each_layout_follows_the_one_device_loss_curve_within_tolerance(runs):
    one = losses(runs["one"])
    assert sorted(one) == list(range(STEPS)) and one[STEPS - 1] < one[0]
    for layout in ("fsdp", "tp"):
        theirs = losses(runs[layout])
        assert sorted(theirs) == sorted(one)
        worst = max(abs(theirs[s] - one[s]) / abs(one[s]) for s in one)
        assert worst <= LOSS_RTOL, (layout, worst)


def test_verify_reads_tensors_not_chunk_files_and_names_the_largest_difference_per_tensor(runs):
    verify = marin("verify", runs["prefixes"]["one"], runs["prefixes"]["fsdp"])
    assert verify.returncode == 3, verify.stdout + verify.stderr
    assert "close      checkpoints/mesh" in verify.stdout
    assert "max |A-B|" in verify.stdout and f"checkpoints/step-{STEPS - 1}/model/" in verify.stdout
    assert "hf/step-7/model.safetensors:" in verify.stdout
    assert "no step differs; 1 within tolerance" in verify.stdout
    exact = marin("verify", runs["prefixes"]["one"], runs["prefixes"]["fsdp"], "--rtol", "0", "--atol", "0")
    assert exact.returncode == 1 and "differs    checkpoints/mesh" in exact.stdout
    assert "||A-B|| / ||B||" in exact.stdout


def test_a_run_migrates_from_one_device_to_four_and_back_with_the_same_data_order(runs):
    for migrated, source in (("one_to_four", "one"), ("four_to_one", "fsdp")):
        theirs, before = losses(runs[migrated]), losses(runs[source])
        first = min(theirs)
        assert first > 0 and sorted(theirs) == list(range(first, STEPS)), (migrated, sorted(theirs))
        # the first step after the restart sees the checkpoint's parameters and the batch of that step: the
        # loss matches the source run's to rounding, and no other step's batch would
        assert abs(theirs[first] - before[first]) <= 1e-6 * before[first], (migrated, theirs[first], before[first])
        assert all(abs(theirs[first] - before[s]) > 1e-4 for s in before if s != first)
        for s in theirs:
            assert abs(theirs[s] - before[s]) <= LOSS_RTOL * before[s], (migrated, s)
        final = f"checkpoints/step-{STEPS - 1}"
        a, b = runs[source] / final, runs[migrated] / final
        files_a = {f["path"] for f in compute_manifest(str(a))["files"]}
        files_b = {f["path"] for f in compute_manifest(str(b))["files"]}
        judged = compare_values(str(a), str(b), (files_a | files_b) - {"metadata.json"}, files_a, files_b)
        assert not judged.differs and judged.close, judged.differs


def test_replicas_and_model_axis_map_onto_levanters_mesh(runs):
    described = json.loads(runs["replicas"].read_text())
    assert described["levanter"] == {"replica": 2, "data": 1, "model": 2}
    assert described["marin"] == {"replica": 2, "data": 1, "model": 2} and described["batch_split"] == 2


def test_a_layout_that_does_not_fit_fails_naming_the_field(tmp_path_factory, tmp_path):
    from marin.training.train import train

    config = TrainConfig(data={"plays_a": "unused"}, output_path="unused", train_batch_size=8)
    assert layout_for(config, 4).describe() == "4 devices = replica 1 × data 4 × model 1"
    tp = TrainConfig(data={"d": "x"}, output_path="o", mesh=MeshConfig(model_axis_size=2, replica_axis_size=2))
    assert layout_for(tp, 8).describe() == "8 devices = replica 2 × data 2 × model 2"
    cases = [
        (
            dict(mesh=MeshConfig(model_axis_size=8, tensor_parallel_axes=("mlp",))),
            4,
            "train.mesh.model_axis_size: replica_axis_size=1 × model_axis_size=8 = 8 does not divide the 4 devices",
        ),
        (dict(mesh=MeshConfig(replica_axis_size=3)), 4, "train.mesh.replica_axis_size"),
        (dict(train_batch_size=6), 4, "train.train_batch_size=6 is not divisible"),
        (dict(per_device_parallelism=3), 4, "train.per_device_parallelism=3"),
        (dict(model=LlamaModelConfig(hidden_dim=36, num_heads=2, num_kv_heads=2)), 8, "train.mesh.fsdp_axes"),
    ]
    for fields, devices, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            layout_for(TrainConfig(data={"d": "x"}, output_path="o", **{"train_batch_size": 8, **fields}), devices)
    with pytest.raises(
        ValueError, match=r"train\.mesh\.model_axis_size=8 does not divide the model's 'heads' axis \(4\)"
    ):
        TrainConfig(data={"d": "x"}, output_path="o", mesh=MeshConfig(model_axis_size=8))
    with pytest.raises(ValueError, match=r"mesh\.tensor_parallel_axes names \['hidden'\]"):
        MeshConfig(model_axis_size=2, tensor_parallel_axes=("hidden",))
    data = corpus(tmp_path_factory.getbasetemp() / "training" / "corpus")["plays_a"]
    config = tiny_train_config(str(tmp_path / "out"), {"plays_a": str(data)}, wandb_mode="disabled")
    with pytest.raises(ValueError, match=r"train\.mesh\.model_axis_size: .* does not divide the 1 devices"):
        train(dataclasses.replace(config, mesh=MeshConfig(model_axis_size=2)))
    assert not list((tmp_path / "out").glob("checkpoints/step-*")), "nothing was trained"
