"""What the running step asked for, readable from inside its function.

A step function gets only its config; what the executor knows about the step besides (its
`ResourceConfig`) would otherwise be lost on the way. The runner sets it here around the call, in
the thread (local backend) or Ray task that runs the step, so that e.g. the train step can refuse to
train on the CPU when its step asked for GPUs. It lives at the bottom of the package, beside
`marin.stepkit.gang`, because the step library may not import the executor's layer.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_resources: contextvars.ContextVar[dict | None] = contextvars.ContextVar("marin_step_resources", default=None)


def running_step_resources() -> dict | None:
    """The running step's resources as recorded (`ResourceConfig` fields), or None outside a step."""
    return _resources.get()


@contextlib.contextmanager
def step_resources(resources: dict | None) -> Iterator[None]:
    """Sets the resources `running_step_resources()` returns for the duration of the block."""
    token = _resources.set(dict(resources) if resources else None)
    try:
        yield
    finally:
        _resources.reset(token)
