"""A process that used Levanter's data loaders and checkpointer exits cleanly, every time.

The loaders' daemon threads free jax arrays; one still running while the interpreter finalises aborts the
process (SIGABRT) after a step has written SUCCESS, and Levanter's checkpointer deletes replaced checkpoints
in a daemon thread nobody waits for (marin.training.levanter_process).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from marin.training.levanter_process import (
    live_checkpointers,
    prepare_levanter_process,
    stop_background_iterators,
    wait_for_checkpointers,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = 30


def test_background_iterators_are_stopped_and_joined():
    from levanter.utils.background_iterable import BackgroundIterator

    prepare_levanter_process()
    iterator = BackgroundIterator(lambda: itertools.count(), max_capacity=2)
    assert next(iterator) == 0 and iterator.thread.is_alive()
    stop_background_iterators(timeout_s=10)
    assert not iterator.thread.is_alive()


def test_a_checkpoint_levanter_queued_for_deletion_is_gone_when_the_wait_returns(tmp_path):
    """A real Levanter checkpointer asked to delete a replaced checkpoint of 3000 files (its daemon thread
    does it): once `wait_for_checkpointers` returns, nothing of it is left."""
    from levanter.checkpoint import Checkpointer

    prepare_levanter_process()
    earlier = live_checkpointers()
    checkpointer = Checkpointer(str(tmp_path), None, [])
    replaced = tmp_path / "step-3"
    for i in range(30):
        (replaced / f"part-{i}").mkdir(parents=True)
        for j in range(100):
            (replaced / f"part-{i}" / f"chunk-{j}").write_bytes(b"x")
    checkpointer._rm_checkpoint("step-3")
    wait_for_checkpointers(exclude=earlier)
    assert not replaced.exists()
    assert checkpointer in live_checkpointers() - earlier


def _start(out: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.exit_runs", out, *extra],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run_pairs(tmp_path, runs: int, *extra: str) -> list[tuple[int, str]]:
    """(exit code, output) of `runs` processes of tests.exit_runs, two at a time; a run that exited 0
    without writing its result counts as exit code None."""
    results = []
    for pair in range(runs // 2):
        outs = [str(tmp_path / f"run-{pair}-{i}.txt") for i in range(2)]
        procs = [_start(out, *extra) for out in outs]
        for out, proc in zip(outs, procs, strict=True):
            log = proc.communicate(timeout=600)[0]
            code = proc.returncode if proc.returncode != 0 or os.path.exists(out) else None
            results.append((code, log[-2000:]))
    return results


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 30 processes of about 12 s of CPU each (Levanter's imports), two at a time
def test_thirty_short_training_processes_all_exit_with_code_zero(tmp_path):
    """30 processes (two at a time) that each import Levanter, run a jitted train step on batches from two
    Levanter data loaders still prefetching at exit, with eight more background iterators making and
    dropping jax arrays as fast as they can, write their result and exit: every exit code is 0."""
    results = _run_pairs(tmp_path, RUNS, "--stress", "8")
    failures = [f"exit code {code}\n{log}" for code, log in results if code != 0]
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)


@pytest.mark.slow
def test_without_the_exit_hook_the_same_process_aborts(tmp_path):
    """The control: the processes above without `prepare_levanter_process()` abort at exit (SIGABRT,
    "terminate called after throwing an instance of ''"), so the test above would see the defect."""
    results = _run_pairs(tmp_path, 4, "--stress", "8", "--without-hook")
    aborted = [log for code, log in results if code == -6]
    assert aborted, [code for code, _ in results]
    assert all("FATAL: exception not rethrown" in log for log in aborted)
