"""One step that writes a file, holds while a file exists, then writes more: a runner to pause mid-step.

    python -m tests.fencing_dag PREFIX HOLD_FILE STARTED_FILE

Each file the step writes holds the writing process's pid, so a test can tell whose bytes were
published. STARTED_FILE gets one line per invocation once the first file is written.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.storage import join, write_bytes


@dataclass(frozen=True)
class HoldConfig:
    hold_file: str
    """While this file exists the step waits between its first and its later writes (not versioned)."""
    started_file: str
    """Gets a line per invocation once the first file is written (not versioned)."""
    value: int = 0
    """A versioned payload."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def hold_step(config: HoldConfig) -> None:
    """Writes from a worker thread, as data steps do: a lost lease interrupts the step's own thread
    only, so a fenced-out runner's worker goes on writing after it resumes. The step's thread waits on
    an Event: an interrupt raised inside `Thread.join` would make the worker look finished (Python 3.11),
    and the process could exit before the worker's late writes."""
    pid = str(os.getpid()).encode()
    done = threading.Event()

    def work():
        try:
            write_bytes(join(config.output_path, "first.txt"), pid)
            with open(config.started_file, "a") as f:
                f.write(f"{os.getpid()}\n")
            while os.path.exists(config.hold_file):
                time.sleep(0.02)
            write_bytes(join(config.output_path, "second.txt"), pid)
            write_bytes(join(config.output_path, f"late-{os.getpid()}.txt"), pid)
        finally:
            done.set()

    threading.Thread(target=work).start()
    while not done.wait(0.05):
        pass


def build(hold_file: str, started_file: str) -> list[ExecutorStep]:
    return [ExecutorStep("fence/held", hold_step, HoldConfig(hold_file, started_file, value=versioned(1)))]


if __name__ == "__main__":
    prefix, hold, started = sys.argv[1:4]
    Executor(prefix, backend="local", experiment_name="fence").run(build(hold, started))
