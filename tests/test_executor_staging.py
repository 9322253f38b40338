"""Attempt-scoped staging as a step sees it: every field naming its own output is re-rooted at the
attempt's folder, what it records about paths is where they are published, and records keep the final path."""

from __future__ import annotations

import json
import os

from marin.execution import Executor, ExecutorStep
from marin.storage import list_dir, read_bytes
from marin.storage.staging import published_path
from tests.staging_steps import SelfPathsConfig, self_paths_step


def test_every_field_naming_the_own_output_is_staged_and_published_to_the_final_folder(tmp_path):
    source = tmp_path / "lab" / "raw" / "data.txt"
    step = ExecutorStep("staged/self", self_paths_step, SelfPathsConfig(source=str(source)))
    (out,) = Executor(str(tmp_path / "lab"), backend="local").run([step]).values()
    assert read_bytes(os.path.join(out, "ckpt", "step-1.bin")) == b"weights"
    provenance = json.loads(read_bytes(os.path.join(out, "provenance.json")))
    assert provenance["source"] == os.path.relpath(source, out) == "../../raw/data.txt"
    assert provenance["seen_output"].startswith(out + "/.executor_attempt.001-")
    assert published_path(provenance["seen_output"]) == out
    info = json.loads(read_bytes(os.path.join(out, ".executor_info")))
    assert info["config"]["output_path"] == out and info["config"]["checkpoint_dir"] == f"{out}/ckpt"
    assert not [n for n in list_dir(out) if n.startswith(".executor_attempt.")]
    manifest = json.loads(read_bytes(os.path.join(out, ".executor_manifest.json")))
    assert sorted(f["path"] for f in manifest["files"]) == ["ckpt/step-1.bin", "provenance.json"]


def test_published_path_maps_only_paths_inside_an_attempt_folder():
    assert published_path("gs://b/lab/t-1/.executor_attempt.003-ab12cd34/ckpt/x") == "gs://b/lab/t-1/ckpt/x"
    assert published_path("/lab/t-1/.executor_attempt.003-ab12cd34") == "/lab/t-1"
    assert published_path("/lab/t-1/ckpt") == "/lab/t-1/ckpt"


def test_a_running_trainings_checkpoints_are_found_in_its_latest_attempt_folder(tmp_path):
    from marin.training.checkpoints import list_checkpoints

    train = tmp_path / "train-1a2b3c4d"
    for attempt, steps in (("001-aaaaaaaa", [2]), ("002-bbbbbbbb", [4, 6])):
        for step in steps:
            folder = train / f".executor_attempt.{attempt}" / "checkpoints" / f"step-{step}"
            folder.mkdir(parents=True)
            (folder / "metadata.json").write_text(json.dumps({"step": step}))
    found = list_checkpoints(str(train))
    assert [step for step, _ in found] == [4, 6]
    assert published_path(found[-1][1]) == f"{train}/checkpoints/step-6"
