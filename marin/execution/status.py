"""Step states on storage: the `.executor_*` files of a step's output folder, read one at a time or many at once.

The names and the states themselves are the storage contract (`marin.storage.layout`); this module adds
the reads and writes the executor makes.
"""

from __future__ import annotations

from collections.abc import Sequence

from marin.storage import read_bytes, read_bytes_many, write_bytes
from marin.storage.layout import State, info_path, lease_path, logs_dir, manifest_path, status_path

RUNNING = State.RUNNING
SUCCESS = State.SUCCESS
FAILED = State.FAILED
DEP_FAILED = State.DEP_FAILED
STATES = tuple(State)

__all__ = [
    "DEP_FAILED",
    "FAILED",
    "RUNNING",
    "STATES",
    "SUCCESS",
    "State",
    "info_path",
    "lease_path",
    "logs_dir",
    "manifest_path",
    "read_status",
    "read_statuses",
    "status_path",
    "write_status",
]


def read_status(output_path: str) -> State | None:
    """The step's state, or None when it never ran (or the file is unreadable)."""
    return State.parse(read_bytes(status_path(output_path)))


def read_statuses(output_paths: Sequence[str]) -> list[State | None]:
    """States of many steps: one read each, concurrently on buckets."""
    return [State.parse(d) for d in read_bytes_many([status_path(p) for p in output_paths])]


def write_status(output_path: str, state: State | str) -> None:
    try:
        state = State(state)
    except ValueError:
        raise ValueError(f"unknown step state {state!r}") from None
    write_bytes(status_path(output_path), state.value.encode())
