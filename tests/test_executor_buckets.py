"""The executor on bucket emulators, under races, kill -9 at the worst moments, and injected faults.

Runners are separate processes (`python -m tests.lease_dag`) talking HTTP to fake-gcs-server, through
the fault proxy where a test needs to see, hold or break their requests. The invariant checked after
every scenario: each step is SUCCESS, and no SUCCESS step has a manifest other than its files.
(The generic executor suite, tests/test_executor_*.py, also runs on gcs and s3 through `prefix`.)
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from urllib.parse import unquote

import pytest

from marin.execution import Executor
from marin.execution.status import read_statuses
from marin.storage import compute_manifest, join, list_dir, read_bytes
from marin.storage.layout import manifest_path
from marin.storage.staging import attempts, staging_path
from tests.emulators import STORES
from tests.executor_steps import invocations
from tests.lease_dag import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKETS = ["gcs", "s3"]
FAST_LEASES = {"MARIN_LEASE_HEARTBEAT_S": "0.3", "MARIN_LEASE_TIMEOUT_S": "2"}


def start_runner(prefix: str, counter: str, n: int, sleep_s: float, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lease_dag", prefix, counter, str(n), str(sleep_s)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout_s: float = 240) -> str:
    log = proc.communicate(timeout=timeout_s)[0]
    assert proc.returncode == 0, log[-4000:]
    return log


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def output_paths(prefix: str, counter: str, n: int) -> list[str]:
    return list(Executor(prefix, backend="local", experiment_name="race").plan(build(counter, n)).values())


def assert_success_means_manifest_matches(paths: list[str]) -> None:
    """Every step is SUCCESS and its manifest lists exactly its files, sizes and hashes."""
    states = read_statuses(paths)
    assert states == ["SUCCESS"] * len(paths), collections.Counter(states)
    for out in paths:
        manifest = json.loads(read_bytes(manifest_path(out)))
        assert manifest == compute_manifest(out), out


def upload_of(name: str, heartbeat: bool = False):
    """A proxy predicate: an upload of an object called `name` (heartbeat: one with a version precondition).

    GCS: a multipart POST naming the object in its body, `ifGenerationMatch=<generation>`; S3: a PUT
    to the object's path, `If-Match: <etag>`.
    """

    def match(request) -> bool:
        if request.method == "POST" and f'/{name}"'.encode() in request.body:
            return not heartbeat or re.search(r"ifGenerationMatch=[1-9]", request.path) is not None
        if request.method == "PUT" and unquote(request.path.split("?")[0]).endswith(f"/{name}"):
            return not heartbeat or "if-match" in request.headers
        return False

    return match


def held_object_path(request, paths: list[str], name: str) -> str:
    """The step folder (of `paths`) whose `name` object (in it, or in its attempt's staging folder) the held
    request was uploading."""
    key_of = {p: p.split("/", 3)[3] for p in paths}
    if request.method == "POST":
        key = re.search(rb'"name": "([^"]+)"', request.body).group(1).decode()
    else:
        key = unquote(request.path.split("?")[0]).split("/", 2)[2]
    found = [
        p
        for p in paths
        if key.endswith(f"/{name}")
        and (key == f"{key_of[p]}/{name}" or key.startswith(f"{key_of[p]}/.executor_attempt."))
    ]
    assert len(found) == 1, (request.method, request.path)
    return found[0]


def test_eight_runners_race_on_a_50_step_experiment_on_gcs_and_each_step_runs_once(tmp_path, bucket_prefix):
    prefix, counter = bucket_prefix("gcs"), str(tmp_path / "calls")
    procs = [start_runner(prefix, counter, 50, 0.02) for _ in range(8)]
    for proc in procs:
        finish(proc)
    paths = output_paths(prefix, counter, 50)
    calls = collections.Counter(invocations(counter))
    assert sorted(calls) == sorted(paths)
    assert set(calls.values()) == {1}, [p for p, c in calls.items() if c > 1]
    assert_success_means_manifest_matches(paths)


@pytest.mark.parametrize("store", BUCKETS)
def test_runner_killed_after_its_files_but_before_the_manifest_is_redone(
    tmp_path, bucket_prefix, fault_endpoint, store
):
    prefix, counter = bucket_prefix(store), str(tmp_path / "calls")
    proxy = fault_endpoint(store)
    manifest_upload = proxy.hold(upload_of(".executor_manifest.json"))
    first = start_runner(prefix, counter, 6, 0, FAST_LEASES)
    assert manifest_upload.hit.wait(120), "the runner never wrote a manifest"
    kill9(first)
    manifest_upload.release(drop=True)
    paths = output_paths(prefix, counter, 6)
    held = held_object_path(manifest_upload.request, paths, ".executor_manifest.json")
    assert read_statuses([held]) == ["RUNNING"]
    (attempt,) = attempts(held)
    assert read_bytes(f"{staging_path(held, attempt)}/out.json") is not None
    assert read_bytes(f"{held}/out.json") is None and read_bytes(manifest_path(held)) is None
    finish(start_runner(prefix, counter, 6, 0, FAST_LEASES))
    assert_success_means_manifest_matches(paths)
    assert set(invocations(counter)) == set(paths)


@pytest.mark.parametrize("store", BUCKETS)
def test_runner_killed_between_heartbeats_is_taken_over_once_its_lease_is_stale(
    tmp_path, bucket_prefix, fault_endpoint, store
):
    prefix, counter = bucket_prefix(store), str(tmp_path / "calls")
    proxy = fault_endpoint(store)
    heartbeat = proxy.watch(upload_of(".executor_lease", heartbeat=True))
    first = start_runner(prefix, counter, 1, 60, FAST_LEASES)
    assert heartbeat.hit.wait(120), "the runner never refreshed its lease"
    deadline = time.monotonic() + 120
    while not invocations(counter):  # heartbeats start with the lease, before RUNNING is published
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    kill9(first)
    (out,) = paths = output_paths(prefix, counter, 1)
    assert read_statuses(paths) == ["RUNNING"]
    log = finish(start_runner(prefix, counter, 1, 0, FAST_LEASES))
    assert "took over the stale lease" in log
    assert invocations(counter) == [out, out]
    assert_success_means_manifest_matches(paths)


@pytest.mark.parametrize("store", BUCKETS)
def test_200_step_experiment_completes_with_5_percent_faults_on_every_request(
    tmp_path, bucket_prefix, fault_endpoint, store
):
    prefix, counter = bucket_prefix(store), str(tmp_path / "calls")
    proxy = fault_endpoint(store, error_rate=0.025, reset_rate=0.025, seed=11)
    steps = build(counter, 200)
    executor = Executor(prefix, backend="local", experiment_name="faults", max_concurrent=16)
    paths = list(executor.run(steps).values())
    faults = proxy.counts["errors"] + proxy.counts["resets_before"] + proxy.counts["resets_after"]
    assert faults > 0.03 * proxy.counts["requests"], proxy.counts
    proxy.configure()
    calls = collections.Counter(invocations(counter))
    assert sorted(calls) == sorted(paths) and set(calls.values()) == {1}
    assert_success_means_manifest_matches(paths)


@pytest.mark.parametrize("store", STORES)
def test_a_released_lease_is_never_refreshed_into_lost(bucket_prefix, store):
    """The keeper may still hold a lease the step just released: refreshing it must not mark it lost."""
    from marin.execution.lease import Lease, new_owner_id, try_acquire

    lease = try_acquire(join(bucket_prefix(store), "step/.executor_lease"), new_owner_id())
    assert isinstance(lease, Lease)
    lease.release()
    assert read_bytes(lease.path) is None
    assert lease.refresh() and not lease.lost.is_set()


def test_hello_world_script_runs_on_the_gcs_emulator_then_runs_nothing(bucket_prefix):
    prefix = bucket_prefix("gcs")
    cmd = [sys.executable, "experiments/tutorial/hello_world.py", "--prefix", prefix, "--backend", "local"]
    env = dict(os.environ, PYTHONPATH=REPO)
    first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 steps: 2 SUCCESS" in first.stdout
    stats = [n for n in list_dir(join(prefix, "hello")) if n.startswith("stats-")]
    assert len(stats) == 1
    assert json.loads(read_bytes(join(prefix, "hello", stats[0], "stats.json")))["documents"] == 1000
    second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert "nothing to run: every step already succeeded" in second.stdout, second.stdout[-3000:]


@pytest.mark.parametrize("store", BUCKETS)
def test_a_no_op_rerun_reads_each_steps_status_and_one_record_per_step_function(
    tmp_path, bucket_prefix, fault_endpoint, store
):
    """Statuses decide a no-op rerun: one request per step, plus one `.executor_info` per step function for
    the code check, plus a few for the run itself, not a record per step (each a round trip on a bucket)."""
    prefix, counter, n = bucket_prefix(store), str(tmp_path / "calls"), 30
    steps = build(counter, n)
    Executor(prefix, backend="local", experiment_name="noop").run(steps)
    proxy = fault_endpoint(store)
    result = Executor(prefix, backend="local", experiment_name="noop").run(steps)
    assert set(result.statuses().values()) == {"SKIPPED"}
    assert proxy.kinds["read .executor_status"] == n, proxy.kinds
    assert proxy.kinds["read .executor_info"] == 1, proxy.kinds
    assert proxy.counts["requests"] <= n + 6, proxy.kinds
