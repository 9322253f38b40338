"""Fencing: a runner that lost its lease never changes the output its successor published (DESIGN.md §11).

Runners are real processes paused with SIGSTOP past the lease timeout, on local storage and on the
GCS and S3 emulators; the output is then checked file by file against the new owner's pid.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

from marin.execution import Executor
from marin.execution.lease import Lease
from marin.execution.records import run_provenance, utc_now
from marin.execution.step_runner import execute_step
from marin.storage import join, list_dir, read_bytes, read_text
from marin.storage.manifest import compute_manifest
from tests.fencing_dag import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST_LEASES = {"MARIN_LEASE_HEARTBEAT_S": "0.3", "MARIN_LEASE_TIMEOUT_S": "2"}


def start_runner(prefix: str, hold: str, started: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fencing_dag", prefix, hold, started],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, **FAST_LEASES),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def started_pids(path: str) -> list[int]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def wait_until(predicate, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition never became true")


def output_of(prefix: str, hold: str, started: str) -> str:
    (out,) = Executor(prefix, backend="local").plan(build(hold, started)).values()
    return out


def published(out: str, pid: int) -> dict[str, bytes]:
    """Checks SUCCESS, the owner's pid in the files it wrote last, a manifest matching the bytes; returns them.

    The owner resumed from the earlier attempt's folder, so files that attempt finished may be there too.
    """
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    files = {n: read_bytes(join(out, n)) for n in list_dir(out) if not n.startswith(".executor_")}
    assert files["first.txt"] == files["second.txt"] == files[f"late-{pid}.txt"] == str(pid).encode(), files
    manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
    assert manifest["files"] == compute_manifest(out)["files"]
    assert sorted(e["path"] for e in manifest["files"]) == sorted(files)
    for entry in manifest["files"]:
        assert hashlib.sha256(files[entry["path"]]).hexdigest() == entry["sha256"]
    return files


def test_a_runner_stopped_mid_step_and_resumed_after_the_takeover_changes_nothing(tmp_path, prefix):
    hold, started = str(tmp_path / "hold"), str(tmp_path / "started")
    open(hold, "w").close()
    first = start_runner(prefix, hold, started)
    wait_until(lambda: len(started_pids(started)) == 1)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        os.unlink(hold)
        second = start_runner(prefix, hold, started)
        log = second.communicate(timeout=180)[0]
        assert second.returncode == 0, log
        assert "took over the stale lease" in log
        out = output_of(prefix, hold, started)
        before = published(out, second.pid)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    first_log = first.communicate(timeout=180)[0]
    assert first.returncode == 0, first_log
    assert "lease lost to another runner" in first_log
    assert published(out, second.pid) == before


def test_a_runner_paused_right_after_its_last_lease_check_publishes_nothing(tmp_path, prefix, monkeypatch):
    """The pause falls between the check and the moves: the window a check-then-write design leaves open."""
    hold, started = str(tmp_path / "hold"), str(tmp_path / "started")
    monkeypatch.setenv("MARIN_LEASE_HEARTBEAT_S", "1000")
    monkeypatch.setenv("MARIN_LEASE_TIMEOUT_S", "2")
    executor = Executor(prefix, backend="local")
    plan = executor.plan_dag(build(hold, started))
    (planned,) = plan.steps
    run = run_provenance(plan, utc_now(), "paused-runner", store=False)
    task = executor._task(planned, plan, force_run_failed=False, rerun=False, run=run, reuse=False, references={})
    checked, resume = threading.Event(), threading.Event()
    real_check = Lease.still_held

    def check_then_pause(lease):
        held = real_check(lease)
        if held and lease.path.startswith(planned.output_path) and started_pids(started) and not checked.is_set():
            checked.set()
            resume.wait(180)
        return held

    monkeypatch.setattr(Lease, "still_held", check_then_pause)
    outcome = {}
    paused = threading.Thread(target=lambda: outcome.setdefault("first", execute_step(task)))
    paused.start()
    assert checked.wait(120), "the first runner never reached its last lease check"
    second = start_runner(prefix, hold, started)
    log = second.communicate(timeout=180)[0]
    assert second.returncode == 0, log
    before = published(planned.output_path, second.pid)
    resume.set()
    paused.join(120)
    assert outcome["first"].status == "RAN_ELSEWHERE"
    assert published(planned.output_path, second.pid) == before
