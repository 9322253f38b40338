"""Step states on storage, what a run does with a step (`Action`) and what came of it (`Outcome`).

The names and the states themselves are the storage contract (`marin.storage.layout`); this module adds
the reads and writes the executor makes, and `action_for`: the one place where a step's state decides
what happens to it, for the plan (`marin plan`) and for the runner alike.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from marin.storage import read_bytes, read_bytes_many, write_bytes
from marin.storage.layout import State, info_path, status_path


def read_status(output_path: str) -> State | None:
    """The step's state, or None when it never ran (or the file is unreadable)."""
    return State.parse(read_bytes(status_path(output_path)))


def read_statuses(output_paths: Sequence[str]) -> list[State | None]:
    """States of many steps: one read each, concurrently on buckets."""
    return [State.parse(d) for d in read_bytes_many([status_path(p) for p in output_paths])]


def read_infos(output_paths: Sequence[str]) -> list[dict | None]:
    """The `.executor_info` of many steps (one read each, concurrently on buckets); None where it is absent
    or not a JSON object."""
    infos: list[dict | None] = []
    for data in read_bytes_many([info_path(p) for p in output_paths]):
        try:
            info = orjson.loads(data) if data else None
        except ValueError:
            info = None
        infos.append(info if isinstance(info, dict) else None)
    return infos


def write_status(output_path: str, state: State | str) -> None:
    try:
        state = State(state)
    except ValueError:
        raise ValueError(f"unknown step state {state!r}") from None
    write_bytes(status_path(output_path), state.value.encode())


class Action(enum.StrEnum):
    """What a run does with a step."""

    RUN = "run"
    """Take its lease and run an attempt."""
    SKIP = "skip"
    """Nothing: it succeeded."""
    FAIL = "fail"
    """Nothing: it failed before and the run does not force failed steps."""
    WAIT = "wait"
    """Wait for the runner that holds it (planning's name for a RUNNING step; the runner then decides again)."""
    REUSE = "reuse"
    """Verify another prefix's output of the same identity and publish it here (`--cache_from`)."""


class Outcome(enum.StrEnum):
    """What came of a step in one run (`.runs.jsonl`, the summary table, `RunResult.statuses()`)."""

    SUCCESS = "SUCCESS"
    """It ran here and succeeded."""
    SKIPPED = "SKIPPED"
    """It had succeeded before."""
    RAN_ELSEWHERE = "RAN_ELSEWHERE"
    """Another runner ran it while this one waited."""
    REUSED = "REUSED"
    """Verified in another prefix (`--cache_from`) and published here instead of running."""
    FAILED = "FAILED"
    DEP_FAILED = "DEP_FAILED"
    NOT_RUN = "NOT_RUN"
    """The run stopped before it."""
    INTERRUPTED = "INTERRUPTED"
    """Ctrl-C or SIGTERM stopped it; left as it was for a rerun."""

    @property
    def ok(self) -> bool:
        return self in (Outcome.SUCCESS, Outcome.REUSED, Outcome.SKIPPED, Outcome.RAN_ELSEWHERE)


@dataclass
class StepOutcome:
    """What happened to a step in this run."""

    status: Outcome
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    error: str | None = None
    attempt: int | None = None
    log_path: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self.status = Outcome(self.status)

    @property
    def ok(self) -> bool:
        return self.status.ok


def action_for(
    state: State | None, *, force_run_failed: bool, rerun_succeeded: bool = False, reusable: bool = False
) -> Action:
    """What to do with a step in `state`: skip a success (unless rerun), refuse a failure (unless forced),
    wait for one running elsewhere, run the rest, or reuse it instead when `reusable` (`--cache_from` found
    a source of its identity, or the record pins one; the runner verifies it before publishing)."""
    if state == State.SUCCESS:
        return Action.RUN if rerun_succeeded else Action.SKIP
    if state == State.RUNNING:
        return Action.WAIT
    if state == State.FAILED and not force_run_failed:
        return Action.FAIL
    return Action.REUSE if reusable else Action.RUN
