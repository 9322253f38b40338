"""Two steps, the first looping until a file appears: a run to interrupt with Ctrl-C (SIGINT).

python -m tests.interrupt_dag PREFIX STARTED_FILE RELEASE_FILE BACKEND [mixed]

With `mixed`, the first step is plain (it declares no resources, so `auto` runs it as a thread of the
driver) and the second, which loops, declares a CPU (so `auto` starts Ray for it and runs it as a Ray task).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from marin.execution import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    ResourceConfig,
    executor_main,
    output_path_of,
    versioned,
)
from marin.storage import join, read_bytes, write_bytes


@dataclass(frozen=True)
class LoopConfig:
    started_file: str
    """Gets a line when the step starts (not versioned)."""
    release_file: str
    """The step loops until this file exists (not versioned)."""
    value: int = 0
    """A versioned payload."""
    input_path: str | None = None
    """An upstream step's output, to make a dependency."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def loop_step(config: LoopConfig) -> None:
    """Writes `partial.txt`, loops until released, then `done.txt` saying whether an earlier attempt's
    `partial.txt` was already there (the attempt resumed from its files)."""
    resumed = read_bytes(join(config.output_path, "partial.txt")) is not None
    write_bytes(join(config.output_path, "partial.txt"), b"started")
    with open(config.started_file, "a") as f:
        f.write(f"{config.value}\n")
    while not os.path.exists(config.release_file):
        time.sleep(0.02)
    write_bytes(join(config.output_path, "done.txt"), f"{config.value} resumed={resumed}".encode())


def build(started: str, release: str) -> list[ExecutorStep]:
    first = ExecutorStep("interrupt/first", loop_step, LoopConfig(started, release, value=versioned(1)))
    second = ExecutorStep(
        "interrupt/second",
        loop_step,
        LoopConfig(started, release, value=versioned(2), input_path=output_path_of(first)),
    )
    return [first, second]


@dataclass(frozen=True)
class PlainConfig:
    value: int = 0
    """A versioned payload."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def plain_step(config: PlainConfig) -> None:
    """Writes `done.txt` at once."""
    write_bytes(join(config.output_path, "done.txt"), f"{config.value}".encode())


def build_mixed(started: str, release: str) -> list[ExecutorStep]:
    first = ExecutorStep("interrupt/plain", plain_step, PlainConfig(value=versioned(1)))
    second = ExecutorStep(
        "interrupt/on-ray",
        loop_step,
        LoopConfig(started, release, value=versioned(2), input_path=output_path_of(first)),
        resources=ResourceConfig(cpu=1),
    )
    return [first, second]


if __name__ == "__main__":
    prefix, started, release, backend = sys.argv[1:5]
    steps = build_mixed(started, release) if sys.argv[5:6] == ["mixed"] else build(started, release)
    executor_main(steps, argv=["--prefix", prefix, "--backend", backend], experiment_name="interrupt")
