"""Training under the executor resumes across attempts: a runner killed after a checkpoint leaves it in
its attempt folder, and the next attempt (taking the dead runner's lease over at once, same host) starts
from it and publishes a complete run; a run stopped by Ctrl-C first saves a checkpoint of the step it
reached, so its rerun resumes from there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin.execution import Executor
from tests.train_resume_dag import build
from tests.training_fixtures import corpus

REPO = Path(__file__).resolve().parents[1]


def runner(prefix: str, dataset: str, *extra: str) -> subprocess.Popen:
    """The run as a terminal starts it (SIGINT at its default, so that Python turns it into
    KeyboardInterrupt even where this process inherited it ignored)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.train_resume_dag", prefix, dataset, *extra],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), RAY_AUTH_MODE="disabled"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        start_new_session=True,
    )


def output_of(proc: subprocess.Popen, timeout: float) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the run did not end within {timeout:.0f} s:\n{proc.communicate()[0][-3000:]}") from None


def test_a_killed_training_resumes_from_its_last_checkpoint_in_the_next_attempt(tmp_path):
    dataset = str(corpus(tmp_path / "corpus")["plays_a"])
    prefix = str(tmp_path / "lab")
    (out,) = Executor(prefix, backend="local").plan(build(dataset)).values()
    first = runner(prefix, dataset)
    try:
        deadline = time.monotonic() + 420
        while not list(Path(out).glob(".executor_attempt.*/checkpoints/step-8/metadata.json")):
            assert first.poll() is None, first.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "no checkpoint after 420 s"
            time.sleep(0.05)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    assert not (Path(out) / "checkpoints").exists()  # nothing published by the killed attempt
    second = runner(prefix, dataset)
    log = second.communicate(timeout=900)[0]
    assert second.returncode == 0, log[-3000:]
    assert "its process on this host is gone" in log
    attempt_log = (Path(out) / ".executor_logs" / "002.log").read_text()
    assert "resuming from the files of attempt 001-" in attempt_log
    assert ", resuming from " in attempt_log and "/checkpoints/step-" in attempt_log
    assert (Path(out) / ".executor_status").read_text() == "SUCCESS"
    info = json.loads((Path(out) / "train_info.json").read_text())
    assert info["complete"] and info["final_checkpoint"] == f"{out}/checkpoints/step-39"
    assert (Path(out) / "checkpoints" / "step-39" / "metadata.json").exists()
    assert not list(Path(out).glob(".executor_attempt.*"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "ray"])
def test_ctrl_c_saves_the_step_the_training_reached_and_the_rerun_resumes_from_it(tmp_path, backend):
    dataset = str(corpus(tmp_path / "corpus")["plays_a"])
    prefix = str(tmp_path / "lab")
    (out,) = Executor(prefix, backend="local").plan(build(dataset, long=True)).values()
    extra = ("long", "ray") if backend == "ray" else ("long",)
    first = runner(prefix, dataset, *extra)
    try:
        deadline = time.monotonic() + 420
        while len(list(Path(out).glob(".executor_attempt.*/metrics.jsonl"))) != 1 or (
            len(next(Path(out).glob(".executor_attempt.*/metrics.jsonl")).read_text().splitlines()) < 20
        ):
            assert first.poll() is None, first.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "not 20 steps trained after 420 s"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGINT)  # as a terminal sends it: the driver's process group
        log = output_of(first, 240)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode != 0 and "interrupted: 1 step(s) left unfinished" in log, log[-3000:]
    (attempt,) = Path(out).glob(".executor_attempt.*")
    steps = [json.loads(line)["step"] for line in (attempt / "metrics.jsonl").read_text().splitlines()]
    reached = steps[-1]
    assert steps == list(range(reached + 1)) and 0 < reached < 299
    # the step it reached is saved, and it is the only checkpoint (none periodic before the last step)
    assert sorted(p.name for p in attempt.glob("checkpoints/step-*")) == [f"step-{reached}"]
    assert (attempt / "checkpoints" / f"step-{reached}" / "metadata.json").exists()
    assert (
        "saves a checkpoint at the end of its current step" in log
        if backend == "ray"
        else ("saving a checkpoint at the end of the current training step" in log)
    )
    assert f"saved the checkpoint of step {reached}" in (Path(out) / ".executor_logs" / "001.log").read_text()

    second = runner(prefix, dataset, *extra)
    log = output_of(second, 900)
    assert second.returncode == 0, log[-3000:]
    attempt_log = (Path(out) / ".executor_logs" / "002.log").read_text()
    assert ", resuming from " in attempt_log and f"/checkpoints/step-{reached} -> " in attempt_log
    assert f"Resuming training from step {reached + 1}" in attempt_log
    assert "dropping" not in attempt_log
    assert (Path(out) / ".executor_status").read_text() == "SUCCESS"
    steps = [json.loads(line)["step"] for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(300))
    # the interrupt's checkpoint was temporary: the final one replaced it, as in an uninterrupted run
    assert sorted(p.name for p in (Path(out) / "checkpoints").iterdir()) == ["step-299"]
