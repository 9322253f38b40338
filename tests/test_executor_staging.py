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


def test_the_config_resolved_once_is_rebased_to_the_attempt_folder_in_one_pass():
    from dataclasses import dataclass, field

    from marin.execution import output_path_of, this_output_path
    from marin.execution.authoring import ResolvedPath, rebase
    from marin.execution.config_values import encode
    from marin.execution.planning import instantiate_config, plan_steps

    @dataclass(frozen=True)
    class Config:
        inputs: list = field(default_factory=list)
        output_path: str = this_output_path()
        checkpoints: str = this_output_path("ckpt")

    up = ExecutorStep("up", lambda c: None, Config())
    down = ExecutorStep("down", lambda c: None, Config(inputs=[output_path_of(up, "x")]))
    plan = plan_steps([down], "/lab")
    out, up_out = plan[down].output_path, plan[up].output_path
    config = instantiate_config(plan[down], plan)
    assert config is instantiate_config(plan[down], plan)  # built once: the record's and every attempt's
    assert type(config.checkpoints) is ResolvedPath and config.checkpoints == f"{out}/ckpt"
    assert encode(config)["inputs"] == [f"{up_out}/x"] and type(encode(config)["output_path"]) is str
    attempt = rebase(config, {out: f"{out}/.a", up_out: "/elsewhere/up"}, f"{out}/.a")
    assert (attempt.output_path, attempt.checkpoints, attempt.inputs) == (
        f"{out}/.a",
        f"{out}/.a/ckpt",
        ["/elsewhere/up/x"],
    )
    assert all(type(v) is str for v in (attempt.output_path, attempt.checkpoints, *attempt.inputs))
