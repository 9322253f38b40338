"""Asking a running step to stop at a point of its choosing, where it can keep the work it has done.

Ctrl-C reaches a step that runs in a thread of the driver as an exception injected into that thread
(`RunnerInterrupted`), wherever the step happens to be. Most steps lose nothing by that: their attempt is
put back and a rerun starts it again. A training loses every step since its last checkpoint, and it
cannot save one where the exception lands (usually just after Levanter waited for a step's loss, when
that step's metrics are not yet written and the state before it has been given up). So a step that can
stop cleanly declares it, for the part of its work where it can (`stop_honoured()`), and checks
`stop_requested()` at its own boundaries (the train step: after each training step, where it saves a
checkpoint and raises `RunnerInterrupted`). The executor sets the request first on Ctrl-C or SIGTERM,
gives the threads that honour it a bounded grace to stop, and injects the interrupt into the others at
once (and into those still running when the grace is over, or on a second Ctrl-C).

The request is process-wide: it reaches the steps that run as threads of the driver, not those in Ray
workers (other processes). It lives here, at the bottom of the package, because the step library may
not import the executor's layer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class RunnerInterrupted(BaseException):
    """The run is being interrupted (Ctrl-C or SIGTERM): sent into a step's thread by the executor, or
    raised by a step that honoured a stop request. Not a failure: the step is left for a rerun."""


_requested = threading.Event()
_honouring: dict[int, int] = {}
"""Threads inside `stop_honoured()`, by thread id (the depth of nesting)."""
_lock = threading.Lock()


def request_stop() -> None:
    """Asks every step of this process that honours a stop request to stop at its next boundary."""
    _requested.set()


def clear_stop_request() -> None:
    """Withdraws the request (a new run of the process begins)."""
    _requested.clear()


def stop_requested() -> bool:
    """Whether the running steps were asked to stop."""
    return _requested.is_set()


@contextlib.contextmanager
def stop_honoured() -> Iterator[None]:
    """Declares that the current thread checks `stop_requested()` at its boundaries for the block, so the
    executor lets it stop by itself (for a while) before interrupting it."""
    ident = threading.get_ident()
    with _lock:
        _honouring[ident] = _honouring.get(ident, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _honouring[ident] -= 1
            if not _honouring[ident]:
                del _honouring[ident]


def threads_honouring_stop() -> set[int]:
    """The ids of the threads inside `stop_honoured()` now."""
    with _lock:
        return set(_honouring)
