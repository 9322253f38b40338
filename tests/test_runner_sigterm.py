"""SIGTERM to a process running a step (Ray stopping a worker, a node shutting down) is not a step failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from marin.execution.records import StepInfo
from marin.execution.status import read_status
from marin.execution.step_runner import StepTask, execute_step
from marin.storage.layout import lease_path
from tests.cluster_steps import ProbeConfig, probe, read_lines
from tests.ray_nodes import REPO

RUNNER = """
import sys
from marin.execution.records import StepInfo
from marin.execution.step_runner import StepTask, execute_step
from tests.cluster_steps import ProbeConfig, probe
out, inv = sys.argv[1], sys.argv[2]
config = ProbeConfig(tag="t", invocations=inv, sleep_s=60.0, output_path=out)
execute_step(StepTask("sig/step", out, probe, config, StepInfo(name="sig/step"), capture="process"))
"""


def test_sigterm_releases_the_lease_and_leaves_the_step_for_the_next_runner(tmp_path):
    out, inv = str(tmp_path / "step"), str(tmp_path / "inv.jsonl")
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, out, inv], cwd=REPO)
    deadline = time.monotonic() + 60
    while not read_lines(inv):
        assert proc.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert read_status(out) == "RUNNING"
    assert not os.path.exists(lease_path(out))

    config = ProbeConfig(tag="t", invocations=inv, sleep_s=0.0, output_path=out)
    outcome = execute_step(StepTask("sig/step", out, probe, config, StepInfo(name="sig/step")))
    assert outcome.status == "SUCCESS" and outcome.attempt == 2
    assert len(read_lines(inv)) == 2
