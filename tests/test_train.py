"""The train step on real Levanter training (tiny Llama, CPU): layout, determinism, resume, phases, errors."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marin.training.config import LlamaModelConfig, TrainConfig
from tests.training_fixtures import PHASE_LR, corpus, reference_run, tiny_train_config

REPO = Path(__file__).resolve().parents[1]
TIMING = ("tokens_per_second", "duration_s", "elapsed_s", "cpu_s")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "training"


def checkpoint_digests(checkpoint: Path) -> dict[str, str]:
    """sha256 of every file of a checkpoint; metadata.json without its wall-clock timestamp."""
    out = {}
    for path in sorted(p for p in checkpoint.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "metadata.json":
            meta = json.loads(data)
            meta.pop("timestamp")
            data = json.dumps(meta, sort_keys=True).encode()
        out[str(path.relative_to(checkpoint))] = hashlib.sha256(data).hexdigest()
    return out


def metrics_without_timing(run: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def final_checkpoint(run: Path) -> Path:
    return Path(json.loads((run / "train_info.json").read_text())["final_checkpoint"])


def read_params(checkpoint: Path, model: LlamaModelConfig, tokenizer: Path) -> dict[str, np.ndarray]:
    import jax

    from marin.training.model_io import device_mesh, load_model

    with device_mesh():
        tree = load_model(str(checkpoint), model, str(tokenizer))
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return {jax.tree_util.keystr(path): np.asarray(getattr(leaf, "array", leaf)) for path, leaf in leaves}


def test_run_leaves_checkpoints_hf_export_metrics_and_offline_wandb_in_its_folder(root):
    run = reference_run(root)
    info = json.loads((run / "train_info.json").read_text())
    assert info["complete"] and info["final_step"] == 39
    kept = {p.name for p in (run / "checkpoints").iterdir()}
    assert kept == {f"step-{s}" for s in (*range(4, 39, 4), 39)}
    assert (run / "checkpoints/step-39/metadata.json").exists()
    assert {p.name for p in (run / "hf/step-39").iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(40))
    assert {"loss", "lr", "tokens", "tokens_per_second"} <= set(lines[-1])
    assert lines[-1]["tokens"] == 40 * 8 * 64
    assert lines[-1]["loss"] < lines[0]["loss"]
    assert "eval_loss" in lines[0] and "eval_bpb" in lines[-1]
    assert list((run / "wandb").rglob("offline-run-*")), "the offline W&B run folder lives in the step output"
    assert list((run / "wandb").rglob("run-*.wandb")), "W&B's run log is copied in, so `wandb sync` works on it"
    links = [str(p) for p in (run / "wandb").rglob("*") if p.is_symlink()]
    assert not links, f"W&B's links (rewritten while other steps run) stay out of the step output: {links}"
    params = read_params(final_checkpoint(run), LlamaModelConfig(**info["model"]), Path(info["tokenizer"]))
    assert sum(a.size for a in params.values()) == info["parameter_count"]


def test_two_runs_with_one_seed_give_identical_checkpoints_and_metrics(root):
    from marin.training.train import train

    run = reference_run(root)
    data = corpus(root / "corpus")
    again = root / "again"
    train(tiny_train_config(str(again), {"plays_a": str(data["plays_a"])}))
    assert checkpoint_digests(final_checkpoint(again)) == checkpoint_digests(final_checkpoint(run))
    assert checkpoint_digests(again / "checkpoints/step-8") == checkpoint_digests(run / "checkpoints/step-8")
    assert (again / "hf/step-39/model.safetensors").read_bytes() == (run / "hf/step-39/model.safetensors").read_bytes()
    assert metrics_without_timing(again) == metrics_without_timing(run)


def test_killed_run_resumes_from_its_last_checkpoint_and_ends_like_an_uninterrupted_run(root):
    from marin.training.checkpoints import list_checkpoints
    from marin.training.train import train

    run = reference_run(root)
    data = corpus(root / "corpus")
    killed = root / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.training_fixtures", str(killed), str(data["plays_a"])],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 420
        while not (killed / "checkpoints/step-8/metadata.json").exists():
            assert proc.poll() is None, "the training subprocess died before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint after 420 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    steps_at_kill = [step for step, _ in list_checkpoints(str(killed))]
    assert 39 not in steps_at_kill, "the run finished before it was killed: the test proves nothing"
    assert (
        not (killed / "train_info.json").exists()
        or not json.loads((killed / "train_info.json").read_text())["complete"]
    )

    train(tiny_train_config(str(killed), {"plays_a": str(data["plays_a"])}, wandb_mode="disabled"))
    assert checkpoint_digests(final_checkpoint(killed)) == checkpoint_digests(final_checkpoint(run))
    assert metrics_without_timing(killed) == metrics_without_timing(run)


def test_a_checkpoint_committed_before_its_steps_metrics_is_not_resumed_from(root):
    """The on-disk state of a run killed after step 8's checkpoint committed but before step 8's line was
    written (the two race: Levanter commits checkpoints in the background), made from the reference run."""
    import shutil

    from marin.training.checkpoints import list_checkpoints
    from marin.training.train import train

    run = reference_run(root)
    data = corpus(root / "corpus")
    ahead = root / "ahead"
    shutil.copytree(run / "checkpoints", ahead / "checkpoints")
    for step, path in list_checkpoints(str(ahead)):
        if step > 8:
            shutil.rmtree(path)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (ahead / "metrics.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["step"] < 8))

    train(tiny_train_config(str(ahead), {"plays_a": str(data["plays_a"])}, wandb_mode="disabled"))
    assert checkpoint_digests(ahead / "checkpoints/step-8") == checkpoint_digests(run / "checkpoints/step-8")
    assert checkpoint_digests(final_checkpoint(ahead)) == checkpoint_digests(final_checkpoint(run))
    assert metrics_without_timing(ahead) == metrics_without_timing(run)


def test_phase_two_starts_from_phase_one_parameters_with_a_new_mixture_and_length(root):
    from marin.training.config import OptimizerConfig
    from marin.training.train import train

    run = reference_run(root)
    data = corpus(root / "corpus")
    phase = root / "phase2"
    base = tiny_train_config(str(phase), {"plays_a": str(data["plays_a"])})
    # Adam with beta1 = beta2 = 0 and no weight decay is sign descent: each of the two steps moves every
    # parameter by exactly lr * sign(gradient) (or not at all where the gradient is zero), so
    # |phase-2 params - phase-1 params| <= 2 lr holds only if phase 2 started from phase 1's final
    # parameters (a fresh initialisation is ~0.02 away from them, 20 times more). Parameters with a
    # gradient far below Adam's epsilon move less, hence the bound rather than an equality.
    train(
        TrainConfig(
            data={"plays_a": str(data["plays_a"]), "plays_b": str(data["plays_b"])},
            weights={"plays_a": 0.3, "plays_b": 0.7},
            output_path=str(phase),
            model=LlamaModelConfig(**{**base.model.__dict__, "seq_len": 32}),
            optimizer=OptimizerConfig(
                learning_rate=PHASE_LR, weight_decay=0.0, beta1=0.0, beta2=0.0, warmup=0.0, lr_schedule="constant"
            ),
            train_batch_size=4,
            num_train_steps=2,
            initialize_from=str(run),
            wandb_mode="disabled",
        )
    )
    record = json.loads((phase / "phase.json").read_text())
    assert record["parent"] == str(run) and record["parent_checkpoint"].endswith("step-39")
    assert json.loads((phase / "train_info.json").read_text())["parent"] == str(run)
    info = json.loads((run / "train_info.json").read_text())
    model = LlamaModelConfig(**info["model"])
    before = read_params(final_checkpoint(run), model, Path(info["tokenizer"]))
    after = read_params(final_checkpoint(phase), model, Path(info["tokenizer"]))
    assert before.keys() == after.keys()
    moved = np.concatenate([np.abs(after[k] - before[k]).ravel() for k in before])
    assert moved.max() <= 2 * PHASE_LR * 1.01
    assert np.quantile(moved, 0.9) > PHASE_LR, "phase 2 did train: many parameters took whole sign steps"


def test_model_whose_heads_do_not_divide_the_width_is_an_error_naming_the_field():
    with pytest.raises(ValueError, match=r"model\.num_heads=5 does not divide model\.hidden_dim=64"):
        LlamaModelConfig(hidden_dim=64, num_heads=5, num_kv_heads=5)
    with pytest.raises(ValueError, match=r"model\.num_kv_heads=3 does not divide model\.num_heads=4"):
        LlamaModelConfig(hidden_dim=64, num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match=r"train\.num_train_steps must be > 0"):
        TrainConfig(data={"a": "x"}, output_path="y", num_train_steps=0)
    with pytest.raises(ValueError, match=r"train\.num_train_steps must be >= 2"):
        TrainConfig(data={"a": "x"}, output_path="y", num_train_steps=1)


def test_missing_tokenized_dataset_fails_naming_it_before_any_output(tmp_path):
    from marin.training.train import train

    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match=r"train\.data\['web'\]: .*nowhere/train is not a finished"):
        train(TrainConfig(data={"web": str(tmp_path / "nowhere")}, output_path=str(out)))
    assert not out.exists()


def test_too_little_data_for_the_steps_is_an_error_naming_the_dataset_before_training(root, tmp_path):
    from marin.training.train import train

    data = corpus(root / "corpus")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"train\.data\['plays_a'\] holds \d+ sequences .* raise train\.epochs to \d+"):
        train(tiny_train_config(str(out), {"plays_a": str(data["plays_a"])}, num_train_steps=100_000))
    assert not out.exists()
