"""Leases: many runners on one experiment, a runner killed mid-step, a lease stolen from a slow runner."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time

from marin.execution import Executor
from marin.storage import join, read_bytes, read_text
from tests.executor_steps import invocations
from tests.lease_dag import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST_LEASES = {"MARIN_LEASE_HEARTBEAT_S": "0.3", "MARIN_LEASE_TIMEOUT_S": "2"}


def runner(prefix, counter, n, sleep_s, env=None, wait_for=None):
    extra = ["local", wait_for] if wait_for else []
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lease_dag", prefix, counter, str(n), str(sleep_s), *extra],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def statuses(prefix, steps):
    paths = Executor(prefix, backend="local").plan(steps)
    return {read_text(join(p, ".executor_status")) for p in paths.values()}, paths


def manifests_match(paths):
    import hashlib

    for out in paths:
        manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
        for entry in manifest["files"]:
            data = read_bytes(join(out, entry["path"]))
            assert data is not None and hashlib.sha256(data).hexdigest() == entry["sha256"], (out, entry)


def test_eight_racing_runners_run_every_step_exactly_once(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    procs = [runner(prefix, counter, 20, 0.05) for _ in range(8)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    steps = build(counter, 20)
    states, paths = statuses(prefix, steps)
    assert states == {"SUCCESS"}
    calls = collections.Counter(invocations(counter))
    assert sorted(calls) == sorted(paths.values()) and set(calls.values()) == {1}
    manifests_match(paths.values())


def wait_for(predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    raise AssertionError("condition never became true")


def test_runner_killed_mid_step_is_taken_over_after_the_lease_goes_stale(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    first = runner(prefix, counter, 1, 30, FAST_LEASES)
    wait_for(lambda: len(invocations(counter)) == 1)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    steps = build(counter, 1)
    (out,) = Executor(prefix, backend="local").plan(steps).values()
    assert read_text(join(out, ".executor_status")) == "RUNNING"
    assert read_bytes(join(out, ".executor_lease")) is not None
    second = runner(prefix, counter, 1, 0, FAST_LEASES)
    log = second.communicate(timeout=120)[0]
    assert second.returncode == 0, log
    assert "took over the stale lease" in log
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    assert invocations(counter) == [out, out]
    manifests_match([out])


def test_lease_stolen_from_a_slow_runner_is_never_marked_success_by_it(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    slow_env = {"MARIN_LEASE_HEARTBEAT_S": "1000", "MARIN_LEASE_TIMEOUT_S": "1000"}
    release = str(tmp_path / "let-the-slow-runner-finish")
    slow = runner(prefix, counter, 1, 0, slow_env, wait_for=release)
    wait_for(lambda: len(invocations(counter)) == 1)
    time.sleep(2.5)
    thief = runner(prefix, counter, 1, 0, {"MARIN_LEASE_HEARTBEAT_S": "0.3", "MARIN_LEASE_TIMEOUT_S": "2"})
    thief_log = thief.communicate(timeout=120)[0]
    open(release, "w").close()
    slow_log = slow.communicate(timeout=120)[0]
    assert thief.returncode == 0 and slow.returncode == 0, (thief_log, slow_log)
    steps = build(counter, 1)
    executor = Executor(prefix, backend="local", experiment_name="race")
    (out,) = executor.plan(steps).values()
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    runs = [
        json.loads(line)
        for line in read_text(
            executor.record_path(executor.plan_dag(steps)).replace(".json", ".runs.jsonl")
        ).splitlines()
    ]
    outcomes = sorted(next(iter(r["steps"].values()))["outcome"] for r in runs)
    assert outcomes == ["RAN_ELSEWHERE", "SUCCESS"]
    assert "lease lost to another runner" in slow_log
    manifests_match([out])
