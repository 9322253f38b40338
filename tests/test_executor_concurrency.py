"""--max_concurrent caps the steps in flight on both backends (DESIGN.md §3)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.storage import join, write_bytes


@dataclass(frozen=True)
class SpanConfig:
    tag: int = 0
    """A versioned payload that makes each step distinct."""
    journal: str = ""
    """Append-only file: 'start TAG' and 'end TAG' lines (not versioned)."""
    linger_s: float = 1.0
    """How long a step waits for another one to start before it ends (not versioned)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def span_step(config: SpanConfig) -> None:
    with open(config.journal, "a") as f:
        f.write(f"start {config.tag}\n")
    deadline = time.time() + config.linger_s  # until another step has started, or time is up
    while time.time() < deadline and open(config.journal).read().count("start") < 2:
        time.sleep(0.05)
    with open(config.journal, "a") as f:
        f.write(f"end {config.tag}\n")
    write_bytes(join(config.output_path, "done"), b"")


def _most_at_once(journal: str) -> int:
    running, most = 0, 0
    for line in open(journal):
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    return most


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_max_concurrent_caps_the_steps_in_flight(tmp_path, backend, request):
    if backend == "ray":
        request.getfixturevalue("ray_cluster")
    journals = {}
    for cap, linger_s in ((1, 0.5), (None, 30.0)):
        journal = str(tmp_path / f"journal-{cap}")
        steps = [
            ExecutorStep(f"s/{i}", span_step, SpanConfig(tag=versioned(i), journal=journal, linger_s=linger_s))
            for i in range(3)
        ]
        Executor(str(tmp_path / f"lab-{cap}"), backend=backend, max_concurrent=cap).run(steps)
        journals[cap] = _most_at_once(journal)
    assert journals[1] == 1
    assert journals[None] > 1


def test_a_max_concurrent_below_one_is_refused():
    with pytest.raises(ValueError, match="max_concurrent must be >= 1"):
        Executor("/tmp/unused", backend="local", max_concurrent=0)
