"""Stopping a running step: Ctrl-C or SIGTERM to the driver under either backend, and SIGTERM from Ray.

A step interrupted by the user is not a failed step: it is left as it was before the attempt, its
lease released, for the next run to resume. Under the local backend the step runs in a thread of the
driver, which a KeyboardInterrupt does not reach, so the driver sends `RunnerInterrupted` into every
thread that runs step code (never into one that is publishing: that commit must finish or not start).
Under Ray, Ctrl-C cancels the tasks (KeyboardInterrupt in the worker) and the node or the dying driver
sends SIGTERM, which Ray turns into SystemExit inside the step; `sigterm_stops_the_runner` makes it a
`RunnerTerminated` instead, so that it is not recorded as the step failing.

SIGTERM to the driver itself (`kill PID`, a job scheduler, a container stopping) is what Ctrl-C is: while the
run's steps execute, `sigterm_interrupts_the_run` turns it into a KeyboardInterrupt in the driver's main
thread, so the running steps are interrupted, put back as they were and their leases released, the run's
line is appended to `.runs.jsonl`, and the process then exits with 143 (128 + SIGTERM, what a shell reports
for a process ended by SIGTERM; `interrupted_exit_code`). Without it the process would die at once, leaving
its steps RUNNING under the lease of a dead process until a rerun or the lease's staleness.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from marin.execution.lease import interrupt_thread


class RunnerInterrupted(BaseException):
    """Sent into a step's thread when the user interrupts the run (Ctrl-C) under the local backend."""


LEFT_FOR_RERUN = "interrupted (Ctrl-C or SIGTERM); a rerun resumes it"

_interruptible: dict[int, str] = {}
"""Threads running a step's own code (or waiting for its lease), by thread id: what Ctrl-C interrupts."""
_interruptible_lock = threading.Lock()


def interrupt_running_steps() -> list[str]:
    """Raises RunnerInterrupted in every thread of this process that runs a step's code; their names."""
    with _interruptible_lock:
        for thread_id in _interruptible:
            interrupt_thread(thread_id, RunnerInterrupted)
        return sorted(_interruptible.values())


def interruptible_now(name: str | None) -> None:
    """Marks this thread as running step `name`'s code (None: no longer; the commit is never interrupted)."""
    with _interruptible_lock:
        if name is None:
            _interruptible.pop(threading.get_ident(), None)
        else:
            _interruptible[threading.get_ident()] = name


class RunnerTerminated(BaseException):
    """SIGTERM reached the process running a step: the runner is being stopped, the step did not fail."""


@contextlib.contextmanager
def sigterm_stops_the_runner():
    """In a process's main thread (a Ray task), SIGTERM raises RunnerTerminated instead of SystemExit.

    Ray sends SIGTERM to a task's worker when the driver dies or the node shuts down, and its handler
    raises SystemExit inside the step, which would look like the step failing (FAILED, not rerun).
    """
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame):
        raise RunnerTerminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield previous
    finally:
        signal.signal(signal.SIGTERM, previous)


_terminated = threading.Event()
"""Set once SIGTERM interrupted a run of this process."""


@contextlib.contextmanager
def sigterm_interrupts_the_run() -> Iterator[None]:
    """In the driver's main thread, SIGTERM raises KeyboardInterrupt: the run stops as after a Ctrl-C.

    A second SIGTERM is a second Ctrl-C (the run stops waiting for its interrupted steps). Outside the main
    thread (a run started from another thread) signals cannot be handled, and nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminated.clear()

    def handler(signum, frame):
        _terminated.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_exit_code() -> int:
    """The exit status of a driver whose run was interrupted: 143 after SIGTERM, 130 after Ctrl-C."""
    return 128 + (signal.SIGTERM if _terminated.is_set() else signal.SIGINT)
