"""Lease identity and lease settings, with real runner processes.

Two runners on one host name in different PID namespaces (containers sharing a host name, host
networking) see each other's pids as gone or as someone else: neither may take the other's live
lease early. The second namespace is real (`unshare --pid --fork --mount-proc`, as root).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

import pytest

from marin.execution import Executor
from marin.storage import join, read_text
from tests.executor_steps import invocations
from tests.lease_dag import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from tests.lease_dag import main
sys.exit(main(sys.argv[1:]))
"""
NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def runner(prefix: str, counter: str, release: str, log: str, in_namespace: bool) -> subprocess.Popen:
    command = [sys.executable, "-c", RUNNER, prefix, counter, "1", "0", "local", release]
    return subprocess.Popen(
        (NAMESPACE if in_namespace else []) + command,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO),
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )


def wait_until(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.05)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("holder_in_namespace", [False, True], ids=["taker-in-namespace", "holder-in-namespace"])
def test_a_runner_in_another_pid_namespace_waits_for_a_live_lease(tmp_path, holder_in_namespace):
    prefix, counter, release = str(tmp_path / "prefix"), str(tmp_path / "calls"), str(tmp_path / "release")
    first_log, second_log = str(tmp_path / "first.log"), str(tmp_path / "second.log")
    first = runner(prefix, counter, release, first_log, in_namespace=holder_in_namespace)
    try:
        wait_until(lambda: len(invocations(counter)) == 1)
        second = runner(prefix, counter, release, second_log, in_namespace=not holder_in_namespace)
        wait_until(lambda: "running elsewhere" in read(second_log) or len(invocations(counter)) > 1)
        time.sleep(2.0)  # several more polls of the lease, each of which could take it over
        assert len(invocations(counter)) == 1, read(second_log)
    finally:
        open(release, "w").close()
    assert first.wait(timeout=120) == 0, read(first_log)
    assert second.wait(timeout=120) == 0, read(second_log)
    assert "took over" not in read(second_log)
    (out,) = Executor(prefix, backend="local").plan(build(counter, 1)).values()
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    assert collections.Counter(invocations(counter)) == {out: 1}


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MARIN_LEASE_HEARTBEAT_S", "abc"), ("MARIN_LEASE_TIMEOUT_S", "nan"), ("MARIN_LEASE_TIMEOUT_S", "0")],
)
def test_a_bad_lease_setting_stops_the_run_before_anything_runs(tmp_path, variable, value):
    prefix, counter = str(tmp_path / "prefix"), str(tmp_path / "calls")
    done = subprocess.run(
        [sys.executable, "-m", "tests.lease_dag", prefix, counter, "1", "0"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, **{variable: value}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert f"{variable}={value!r}: must be a finite number of seconds > 0" in done.stderr
    assert invocations(counter) == [] and not os.path.exists(prefix)
