"""Stopping a running step: Ctrl-C under either backend, and SIGTERM from Ray.

A step interrupted by the user is not a failed step: it is left as it was before the attempt, its
lease released, for the next run to resume. Under the local backend the step runs in a thread of the
driver, which a KeyboardInterrupt does not reach, so the driver sends `RunnerInterrupted` into every
thread that runs step code (never into one that is publishing: that commit must finish or not start).
Under Ray, Ctrl-C cancels the tasks (KeyboardInterrupt in the worker) and the node or the dying driver
sends SIGTERM, which Ray turns into SystemExit inside the step; `sigterm_stops_the_runner` makes it a
`RunnerTerminated` instead, so that it is not recorded as the step failing.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from marin.execution.lease import interrupt_thread


class RunnerInterrupted(BaseException):
    """Sent into a step's thread when the user interrupts the run (Ctrl-C) under the local backend."""


LEFT_FOR_RERUN = "interrupted (Ctrl-C); a rerun resumes it"

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
