"""Training under the executor resumes across attempts: a runner killed after a checkpoint leaves it in
its attempt folder, and the next attempt (taking the dead runner's lease over at once, same host) starts
from it and publishes a complete run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from marin.execution import Executor
from tests.train_resume_dag import build
from tests.training_fixtures import corpus

REPO = Path(__file__).resolve().parents[1]


def runner(prefix: str, dataset: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.train_resume_dag", prefix, dataset],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


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
