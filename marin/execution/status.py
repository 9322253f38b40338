"""Step states on storage: the `.executor_*` files of a step's output folder, read one at a time or many at once."""

from __future__ import annotations

from collections.abc import Sequence

from marin.storage import read_bytes, read_bytes_many, write_bytes

RUNNING = "RUNNING"
SUCCESS = "SUCCESS"
FAILED = "FAILED"
DEP_FAILED = "DEP_FAILED"
STATES = (RUNNING, SUCCESS, FAILED, DEP_FAILED)


def status_path(output_path: str) -> str:
    return f"{output_path.rstrip('/')}/.executor_status"


def info_path(output_path: str) -> str:
    return f"{output_path.rstrip('/')}/.executor_info"


def lease_path(output_path: str) -> str:
    return f"{output_path.rstrip('/')}/.executor_lease"


def manifest_path(output_path: str) -> str:
    return f"{output_path.rstrip('/')}/.executor_manifest.json"


def logs_dir(output_path: str) -> str:
    return f"{output_path.rstrip('/')}/.executor_logs"


def _parse(data: bytes | None) -> str | None:
    if data is None:
        return None
    token = data.decode("utf-8", "replace").strip()
    return token if token in STATES else None


def read_status(output_path: str) -> str | None:
    """The step's state, or None when it never ran (or the file is unreadable)."""
    return _parse(read_bytes(status_path(output_path)))


def read_statuses(output_paths: Sequence[str]) -> list[str | None]:
    """States of many steps: one read each, concurrently on buckets."""
    return [_parse(d) for d in read_bytes_many([status_path(p) for p in output_paths])]


def write_status(output_path: str, state: str) -> None:
    if state not in STATES:
        raise ValueError(f"unknown step state {state!r}")
    write_bytes(status_path(output_path), state.encode())
