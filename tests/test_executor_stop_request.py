"""Ctrl-C under the local backend asks the running steps to stop: a step that honours the request stops by
itself (and keeps its work) while the others are interrupted at once; a second Ctrl-C interrupts it too.
Under the Ray backend Ctrl-C cancels the steps' tasks, and a worker whose step honours the request takes the
cancel as that request. A real driver process gets real SIGINTs; the steps are plain loops (the training
that honours the request is tested in test_executor_train_resume.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from marin.execution import Executor
from tests.stop_request_dag import build

REPO = Path(__file__).resolve().parents[1]


def start(prefix: str, started: Path, *extra: str, ray_address: str | None = None) -> subprocess.Popen:
    started.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.stop_request_dag", prefix, str(started), *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while len(list(started.iterdir())) < 2:
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the steps did not start within 300 s"
        time.sleep(0.05)
    return proc


def output_of(proc: subprocess.Popen, timeout: float = 120) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the run did not end within {timeout:.0f} s:\n{proc.communicate()[0]}") from None


def outcomes(prefix: str, stubborn: bool) -> dict[str, str]:
    executor = Executor(prefix, backend="local", experiment_name="stop")
    plan = executor.plan_dag(build("unused", stubborn))
    runs = Path(executor.record_path(plan).replace(".json", ".runs.jsonl")).read_text().splitlines()
    return {name.split("-")[0]: s["outcome"] for name, s in json.loads(runs[-1])["steps"].items()}


def saved(prefix: str) -> list[Path]:
    return list(Path(prefix).glob("stop/keeper-*/.executor_attempt.*/saved.txt"))


def test_a_step_that_honours_the_stop_request_stops_by_itself_and_keeps_its_work(tmp_path):
    prefix = str(tmp_path / "lab")
    proc = start(prefix, tmp_path / "started")
    os.kill(proc.pid, signal.SIGINT)
    log = output_of(proc)
    assert proc.returncode == -signal.SIGINT, log[-3000:]  # KeyboardInterrupt out of Executor.run
    assert (
        "Ctrl-C: stop/keeper: saving a checkpoint" in log
        and "saving a checkpoint at the end of the current training step" in log
    )
    assert "did not stop in time" not in log
    assert len(saved(prefix)) == 1  # it had its second to save: the interrupt was not injected into it
    assert outcomes(prefix, False) == {"stop/keeper": "INTERRUPTED", "stop/plain": "INTERRUPTED"}


def test_a_second_ctrl_c_interrupts_a_step_that_is_still_stopping(tmp_path):
    prefix = str(tmp_path / "lab")
    proc = start(prefix, tmp_path / "started", "stubborn")
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(2.0)
    assert proc.poll() is None  # the stubborn step is given its grace
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    log = output_of(proc)
    assert time.monotonic() - t0 < 30, log[-3000:]
    assert proc.returncode == -signal.SIGINT, log[-3000:]  # KeyboardInterrupt out of Executor.run
    assert "second Ctrl-C: not waiting for the checkpoint" in log
    assert not saved(prefix)
    assert outcomes(prefix, True) == {"stop/keeper": "INTERRUPTED", "stop/plain": "INTERRUPTED"}


def test_under_ray_ctrl_c_reaches_the_workers_as_the_stop_request_and_the_honouring_step_keeps_its_work(
    tmp_path, ray_cluster
):
    """The driver joins the session's Ray cluster (as `--ray_address` does) rather than starting one."""
    prefix = str(tmp_path / "lab")
    proc = start(prefix, tmp_path / "started", "ray", ray_address=ray_cluster.get_runtime_context().gcs_address)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the driver's whole process group
    log = output_of(proc)
    assert proc.returncode != 0 and "interrupted: 2 step(s) left unfinished" in log, log[-3000:]
    assert "Ctrl-C: cancelling 2 Ray task(s)" in log, log[-3000:]
    assert len(saved(prefix)) == 1, log[-3000:]  # the keeper's worker set its stop request; it saved and stopped
    assert outcomes(prefix, False) == {"stop/keeper": "INTERRUPTED", "stop/plain": "INTERRUPTED"}
    for step in Path(prefix).glob("stop/*-*"):
        assert not (step / ".executor_status").exists() and not (step / ".executor_lease").exists()


def test_a_ctrl_c_during_a_steps_hand_over_is_raised_once_the_runner_has_recorded_it():
    from marin.execution.interrupts import ctrl_c_guarded_submissions

    recorded = []
    with ctrl_c_guarded_submissions() as guard:
        try:
            with guard.handing_over():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler has run by now: it held the interrupt back
                recorded.append("handle")
        except KeyboardInterrupt:
            recorded.append("interrupted")
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
            recorded.append("not interrupted")
        except KeyboardInterrupt:
            recorded.append("interrupted at once")
    assert recorded == ["handle", "interrupted", "interrupted at once"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigterm_during_a_steps_hand_over_is_raised_once_the_runner_has_recorded_it():
    from marin.execution.interrupts import ctrl_c_guarded_submissions, sigterm_interrupts_the_run

    recorded = []
    with sigterm_interrupts_the_run(), ctrl_c_guarded_submissions() as guard:
        try:
            with guard.handing_over():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                recorded.append("handle")
        except KeyboardInterrupt:
            recorded.append("interrupted")
    assert recorded == ["handle", "interrupted"]
