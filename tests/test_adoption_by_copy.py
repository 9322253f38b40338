"""A paused runner's open file handles never reach a published output (local storage).

The runner that takes a step over resumes from a *copy* of the paused runner's attempt folder, so the
files the paused runner still holds open are not the ones published. Each round: a real runner
process opens `data.txt` of its step and writes to it, is stopped (SIGSTOP) past its lease, a second
runner takes the step over and publishes it, the first is continued (SIGCONT) and writes again
through its handle; the published bytes must still be exactly the manifest's.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

from marin.execution import Executor
from marin.storage import join, list_dir, read_bytes, read_text
from marin.storage.manifest import compute_manifest
from tests.append_dag import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = 20
FAST_LEASES = {"MARIN_LEASE_HEARTBEAT_S": "0.1", "MARIN_LEASE_TIMEOUT_S": "0.5"}


def start(prefix: str, hold_dir: str, marks: str, *mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.append_dag", prefix, hold_dir, marks, str(ROUNDS), *mode],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, **FAST_LEASES),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_mark(marks: str, line: str, runners: tuple[subprocess.Popen, ...], timeout: float = 120) -> None:
    """Waits for `line` in MARKS; fails at once, with the runners' output, if one exits before writing it."""
    deadline = time.monotonic() + timeout
    while True:
        exited = any(p.poll() is not None for p in runners)
        if os.path.exists(marks) and line in open(marks).read().splitlines():
            return
        if exited or time.monotonic() > deadline:
            for p in runners:
                if p.poll() is None:
                    p.kill()
            logs = [p.communicate()[0] for p in runners]
            raise AssertionError(f"never marked: {line}; runners' exit codes {[p.returncode for p in runners]}: {logs}")
        time.sleep(0.02)


def assert_published_bytes_match_the_manifest(out: str) -> None:
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
    assert manifest["files"] == compute_manifest(out)["files"], read_bytes(join(out, "data.txt"))
    for entry in manifest["files"]:
        assert hashlib.sha256(read_bytes(join(out, entry["path"]))).hexdigest() == entry["sha256"]
    assert [n for n in list_dir(out) if not n.startswith(".executor_")] == ["data.txt"]


def test_a_paused_runner_writing_through_an_open_handle_never_changes_a_published_output(tmp_path):
    prefix, hold_dir, marks = str(tmp_path / "prefix"), str(tmp_path / "hold"), str(tmp_path / "marks")
    os.makedirs(hold_dir)
    for i in range(ROUNDS):
        open(os.path.join(hold_dir, f"hold-{i}"), "w").close()
    outputs = list(Executor(prefix, backend="local").plan(build(hold_dir, marks, ROUNDS)).values())
    first, second = start(prefix, hold_dir, marks), start(prefix, hold_dir, marks, "follow")
    runners = (first, second)
    try:
        for i, out in enumerate(outputs):
            wait_for_mark(marks, f"started {i} {first.pid}", runners)
            os.kill(first.pid, signal.SIGSTOP)
            try:
                os.unlink(os.path.join(hold_dir, f"hold-{i}"))
                open(os.path.join(hold_dir, f"go-{i}"), "w").close()
                wait_for_mark(marks, f"published {i} {second.pid}", (second,))
            finally:
                os.kill(first.pid, signal.SIGCONT)
            wait_for_mark(marks, f"wrote {i} {first.pid}", (first,))
            assert_published_bytes_match_the_manifest(out)
        logs = [p.communicate(timeout=120)[0] for p in (first, second)]
        assert first.returncode == 0 and second.returncode == 0, logs
        assert logs[1].count("took over the stale lease") == ROUNDS, logs[1]
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
    for out in outputs:
        assert_published_bytes_match_the_manifest(out)
