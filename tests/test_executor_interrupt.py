"""Ctrl-C: the running steps stop promptly on both backends, their leases are released, no step stays
RUNNING, the run's line is appended to `.runs.jsonl`, one line says what was left, and a rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from marin.execution import Executor
from marin.storage import join, read_bytes, read_text
from tests.interrupt_dag import build, build_mixed

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(
    prefix: str, started: str, release: str, backend: str, *extra: str, ray_address: str | None = None
) -> subprocess.Popen:
    """The run as a terminal starts it: SIGINT at its default even where this process inherited it ignored
    (a shell's background job), so that Python turns it into KeyboardInterrupt. With `ray_address` the run
    joins that Ray cluster; without, `ray` and `auto` start a local one as a user's run does."""
    env = dict(os.environ, PYTHONPATH=REPO, RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return subprocess.Popen(
        [sys.executable, "-m", "tests.interrupt_dag", prefix, started, release, backend, *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float, what: str) -> str:
    """The run's output once it exits; one still running after `timeout` is killed with every process it
    started (its Ray cluster included), so that a failing test leaves nothing behind."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{what} did not end within {timeout:.0f} s:\n{proc.communicate()[0]}")


def wait_for_file(path: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen, times: int = 1) -> tuple[str, float]:
    t0 = time.monotonic()
    for _ in range(times):
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.05)
    log = finish(proc, 120, "the run after Ctrl-C")
    return log, time.monotonic() - t0


def check_left_for_a_rerun(prefix: str, started: str, release: str, log: str) -> None:
    executor = Executor(prefix, backend="local", experiment_name="interrupt")
    plan = executor.plan_dag(build(started, release))
    first, second = (p.output_path for p in plan.steps)
    assert "interrupted: 2 step(s) left unfinished (interrupt/first-" in log, log
    assert "run the same command again to resume" in log
    assert read_text(join(first, ".executor_status")) is None
    assert read_bytes(join(first, ".executor_lease")) is None
    assert read_text(join(second, ".executor_status")) is None
    runs = read_text(executor.record_path(plan).replace(".json", ".runs.jsonl")).splitlines()
    outcomes = {name.split("-")[0]: s["outcome"] for name, s in json.loads(runs[-1])["steps"].items()}
    assert outcomes == {"interrupt/first": "INTERRUPTED", "interrupt/second": "NOT_RUN"}


@pytest.mark.parametrize("backend", ["local", "ray", "auto"])
def test_ctrl_c_stops_the_running_step_releases_its_lease_and_a_rerun_resumes(tmp_path, backend, request):
    """Under `ray` the run joins the session's Ray cluster; the mixed test below starts one of its own."""
    prefix, started, release = str(tmp_path / "lab"), str(tmp_path / "started"), str(tmp_path / "release")
    address = request.getfixturevalue("ray_cluster").get_runtime_context().gcs_address if backend == "ray" else None
    proc = start(prefix, started, release, backend, ray_address=address)
    wait_for_file(started)
    log, took = interrupt(proc)
    assert proc.returncode == 130, log
    assert took < 30, f"took {took:.1f} s to stop"
    check_left_for_a_rerun(prefix, started, release, log)
    open(release, "w").close()
    rerun = start(prefix, started, release, "local")
    rerun_log = finish(rerun, 240, "the rerun")
    assert rerun.returncode == 0, rerun_log
    executor = Executor(prefix, backend="local", experiment_name="interrupt")
    first, second = executor.plan(build(started, release)).values()
    assert read_text(join(first, ".executor_status")) == read_text(join(second, ".executor_status")) == "SUCCESS"
    assert read_text(join(first, "done.txt")) == "1 resumed=True"
    assert read_text(join(second, "done.txt")) == "2 resumed=False"


def test_a_second_ctrl_c_still_ends_cleanly_with_the_runs_line(tmp_path):
    prefix, started, release = str(tmp_path / "lab"), str(tmp_path / "started"), str(tmp_path / "release")
    proc = start(prefix, started, release, "local")
    wait_for_file(started)
    log, _ = interrupt(proc, times=2)
    assert proc.returncode in (130, -signal.SIGINT), log
    assert "Segmentation fault" not in log and "Fatal Python error" not in log
    check_left_for_a_rerun(prefix, started, release, log)


def test_ctrl_c_in_a_mixed_auto_run_stops_the_ray_step_and_the_same_command_completes_it(tmp_path, monkeypatch):
    """`auto` ran the plain step as a thread, then started Ray for the step that declares a CPU: Ctrl-C while
    that Ray task runs stops the driver (and its Ray) within seconds, leaves the plain step SUCCESS and the
    interrupted one without a status, and the same command run again completes it."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    prefix, started, release = str(tmp_path / "lab"), str(tmp_path / "started"), str(tmp_path / "release")
    proc = start(prefix, started, release, "auto", "mixed")
    deadline = time.monotonic() + 240
    while not os.path.exists(started):
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before its Ray step began:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, f"{started} never appeared"
        time.sleep(0.05)
    log, took = interrupt(proc)
    assert proc.returncode == 130, log
    assert took < 15, f"took {took:.1f} s to stop"
    executor = Executor(prefix, backend="local", experiment_name="interrupt")
    plain, on_ray = executor.plan(build_mixed(started, release)).values()
    assert read_text(join(plain, ".executor_status")) == "SUCCESS"
    assert read_text(join(on_ray, ".executor_status")) is None, log
    assert read_bytes(join(on_ray, ".executor_lease")) is None
    assert "interrupted: 1 step(s) left unfinished (interrupt/on-ray-" in log, log
    open(release, "w").close()
    rerun = start(prefix, started, release, "auto", "mixed")
    rerun_log = finish(rerun, 240, "the rerun")
    assert rerun.returncode == 0, rerun_log
    assert read_text(join(on_ray, ".executor_status")) == "SUCCESS"
    assert read_text(join(on_ray, "done.txt")) == "2 resumed=True"
    assert open(started).read().splitlines() == ["2", "2"]


def test_sigterm_to_a_local_run_interrupts_it_as_ctrl_c_releases_the_lease_and_a_rerun_resumes(tmp_path):
    """`kill PID` (a scheduler stopping the job): the step is put back, not left RUNNING under a dead lease."""
    prefix, started, release = str(tmp_path / "lab"), str(tmp_path / "started"), str(tmp_path / "release")
    proc = start(prefix, started, release, "local")
    wait_for_file(started)
    os.kill(proc.pid, signal.SIGTERM)
    log = finish(proc, 120, "the run after SIGTERM")
    assert proc.returncode == 128 + signal.SIGTERM, log
    check_left_for_a_rerun(prefix, started, release, log)
    status = subprocess.run(
        [sys.executable, "-m", "marin.cli", "status", prefix], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "RUNNING" not in status, status
    open(release, "w").close()
    rerun = start(prefix, started, release, "local")
    rerun_log = finish(rerun, 240, "the rerun")
    assert rerun.returncode == 0, rerun_log
    executor = Executor(prefix, backend="local", experiment_name="interrupt")
    first, _ = executor.plan(build(started, release)).values()
    assert read_text(join(first, "done.txt")) == "1 resumed=True"
