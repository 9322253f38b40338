"""Stopping a running step: Ctrl-C or SIGTERM to the driver under either backend, and SIGTERM from Ray.

A step interrupted by the user is not a failed step: it is left as it was before the attempt, its
lease released, for the next run to resume. Under the local backend the step runs in a thread of the
driver, which a KeyboardInterrupt does not reach, so the driver sends `RunnerInterrupted` into every
thread that runs step code (never into one that is publishing: that commit must finish or not start).
It first sets the stop request of `marin.stepkit.stop`: a step that honours it (a training, which saves a
checkpoint at the end of its current step and then raises `RunnerInterrupted` itself) is given up to
STOP_GRACE_S to stop by itself, the others are interrupted at once; a second Ctrl-C interrupts all.
Under Ray, Ctrl-C cancels the tasks (KeyboardInterrupt in the worker) and the node or the dying driver
sends SIGTERM, which Ray turns into SystemExit inside the step; `sigterm_stops_the_runner` makes it a
`RunnerTerminated` instead, so that it is not recorded as the step failing. Ray cancels a task by
simulating a SIGINT in its worker's main thread (`_thread.interrupt_main`), and a Ray worker is another
process, which the driver's stop request does not reach: there `sigint_stops_honouring_steps` turns the
first such interrupt into the worker's own stop request when the task's step honours it (a training saves
its checkpoint and stops as under the local backend); a second one, or one reaching a step that does not
honour the request, is the KeyboardInterrupt it always was. The driver waits up to STOP_GRACE_S for its
cancelled Ray tasks.

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
from typing import Literal

from marin.execution.lease import interrupt_thread
from marin.stepkit.stop import (
    RunnerInterrupted,
    clear_stop_request,
    request_stop,
    stop_requested,
    threads_honouring_stop,
)

__all__ = ["RunnerInterrupted"]


LEFT_FOR_RERUN = "interrupted (Ctrl-C or SIGTERM); a rerun resumes it"

_interruptible: dict[int, str] = {}
"""Threads running a step's own code (or waiting for its lease), by thread id: what Ctrl-C interrupts."""
_interruptible_lock = threading.Lock()


STOP_GRACE_S = 60.0
"""After Ctrl-C, how long a step that honours the stop request (a training: it saves a checkpoint at the end
of its current step) has to stop by itself before it is interrupted like any other."""


def ask_running_steps_to_stop() -> list[str]:
    """Sets the stop request (marin.stepkit.stop); the names of the steps of this process that honour it."""
    request_stop()
    return steps_stopping()


def steps_stopping() -> list[str]:
    """The names of the steps whose thread honours the stop request now (they have not stopped yet)."""
    honouring = threads_honouring_stop()
    with _interruptible_lock:
        return sorted(name for thread_id, name in _interruptible.items() if thread_id in honouring)


def interrupt_running_steps(which: Literal["all", "not_stopping", "stopping"] = "all") -> list[str]:
    """Raises RunnerInterrupted in the threads of this process that run a step's code: all of them, those
    that do not honour the stop request, or those that honour it and have not stopped; their names."""
    honouring = threads_honouring_stop() if which != "all" else set()
    with _interruptible_lock:
        interrupted = []
        for thread_id, name in _interruptible.items():
            if which == "all" or (thread_id in honouring) == (which == "stopping"):
                interrupt_thread(thread_id, RunnerInterrupted)
                interrupted.append(name)
        return sorted(interrupted)


def interruptible_now(name: str | None) -> None:
    """Marks this thread as running step `name`'s code (None: no longer; the commit is never interrupted)."""
    with _interruptible_lock:
        if name is None:
            _interruptible.pop(threading.get_ident(), None)
        else:
            _interruptible[threading.get_ident()] = name


@contextlib.contextmanager
def _signal_handled(signum: int, handler) -> Iterator[object]:
    """`handler` for `signum` during the block, the previous one put back after; yields the previous one.
    Outside the main thread signals cannot be handled: nothing changes and it yields None."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.signal(signum, handler)
    try:
        yield previous
    finally:
        signal.signal(signum, previous)


class SubmissionGuard:
    """Holds a Ctrl-C back while a step is handed to the backend, until the runner has recorded its handle.

    Without it, a SIGINT landing inside the hand-over (the thread pool's `Thread.start` waits for the new
    thread, which under load can run the step for a while first) raised KeyboardInterrupt out of `submit`: the
    step ran, was interrupted with the others, but had no handle to collect its outcome from, and was
    reported NOT_RUN. SIGTERM, which stops a run as Ctrl-C does, is held the same way (`sigterm_interrupts_the_run`
    asks the guard). Outside a hand-over Ctrl-C is what it was (the previous handler's)."""

    def __init__(self, previous) -> None:
        self._previous = previous
        self._holding = False
        self._held = False

    def __call__(self, signum, frame) -> None:
        if not self.hold():
            self._pass_on(signum, frame)

    def hold(self) -> bool:
        """Inside a hand-over: notes an interrupt to raise at its end and says True; else False."""
        if self._holding:
            self._held = True
        return self._holding

    def _pass_on(self, signum, frame) -> None:
        if callable(self._previous):
            self._previous(signum, frame)
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def handing_over(self) -> Iterator[None]:
        """The block runs whole; a Ctrl-C met in it is raised once it ends."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._held:
            self._held = False
            self._pass_on(signal.SIGINT, None)


@contextlib.contextmanager
def ctrl_c_guarded_submissions() -> Iterator[SubmissionGuard]:
    """A `SubmissionGuard` installed as the SIGINT handler for the block (in the main thread, and where SIGINT is
    handled by Python: where it is ignored or left to the system, the guard holds nothing back)."""
    current = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    guard = SubmissionGuard(current)
    global _guard
    if current in (None, signal.SIG_IGN, signal.SIG_DFL):
        yield guard  # never installed: it holds nothing back
        return
    with _signal_handled(signal.SIGINT, guard):
        _guard = guard
        try:
            yield guard
        finally:
            _guard = None


_guard: SubmissionGuard | None = None
"""The guard of the run in progress, which SIGTERM's handler asks too."""


@contextlib.contextmanager
def sigint_stops_honouring_steps() -> Iterator[None]:
    """In a process's main thread (a Ray task): SIGINT, which is how Ray cancels the task, sets the stop request
    (marin.stepkit.stop) when a step of this process honours it and none was set yet; otherwise, and the
    second time, it raises KeyboardInterrupt as Python's own handler does. The request is withdrawn when the
    block begins and ends: a Ray worker runs task after task."""

    def handler(signum, frame):
        if not stop_requested() and threads_honouring_stop():
            request_stop()
            return
        raise KeyboardInterrupt

    clear_stop_request()
    try:
        with _signal_handled(signal.SIGINT, handler):
            yield
    finally:
        clear_stop_request()


class RunnerTerminated(BaseException):
    """SIGTERM reached the process running a step: the runner is being stopped, the step did not fail."""


@contextlib.contextmanager
def sigterm_stops_the_runner():
    """In a process's main thread (a Ray task), SIGTERM raises RunnerTerminated instead of SystemExit.

    Ray sends SIGTERM to a task's worker when the driver dies or the node shuts down, and its handler
    raises SystemExit inside the step, which would look like the step failing (FAILED, not rerun).
    """

    def handler(signum, frame):
        raise RunnerTerminated()

    with _signal_handled(signal.SIGTERM, handler) as previous:
        yield previous


_terminated = threading.Event()
"""Set once SIGTERM interrupted a run of this process."""


@contextlib.contextmanager
def sigterm_interrupts_the_run() -> Iterator[None]:
    """In the driver's main thread, SIGTERM raises KeyboardInterrupt: the run stops as after a Ctrl-C.

    The block is the execution of one run: the stop request (marin.stepkit.stop) is withdrawn when it
    begins and when it ends, so that none outlives the run that made it.

    A second SIGTERM is a second Ctrl-C (the run stops waiting for its interrupted steps). Outside the main
    thread (a run started from another thread) signals cannot be handled, and SIGTERM is left as it is.
    """

    def handler(signum, frame):
        _terminated.set()
        if _guard is not None and _guard.hold():
            return
        raise KeyboardInterrupt

    clear_stop_request()
    _terminated.clear()
    try:
        with _signal_handled(signal.SIGTERM, handler):
            yield
    finally:
        clear_stop_request()


def interrupted_exit_code() -> int:
    """The exit status of a driver whose run was interrupted: 143 after SIGTERM, 130 after Ctrl-C."""
    return 128 + (signal.SIGTERM if _terminated.is_set() else signal.SIGINT)
