"""A chain of steps that each append to `data.txt` through one open handle, holding it open meanwhile.

    python -m tests.append_dag PREFIX HOLD_DIR MARKS N [follow]

runs the N steps; with `follow` it runs them one by one instead, step i once `HOLD_DIR/go-i` exists,
noting `published i PID` in MARKS after each (a second runner that takes over, round after round,
without a new process per round). Step i writes a line, notes `started i PID` in MARKS, waits while
`HOLD_DIR/hold-i` exists, writes another line through the same handle and notes `wrote i PID`: a
runner paused in between and resumed after a takeover still holds the file it opened.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, output_path_of, versioned


@dataclass(frozen=True)
class AppendConfig:
    hold_dir: str
    """While `hold-<index>` exists in it, the step keeps its file open between two writes (not versioned)."""
    marks: str
    """Gets `started i PID` and `wrote i PID` lines (not versioned)."""
    index: int = 0
    """The step's place in the chain (versioned)."""
    after: str | None = None
    """The previous step's output, so that the chain runs in order."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def mark(config: AppendConfig, what: str) -> None:
    with open(config.marks, "a") as f:
        f.write(f"{what} {config.index} {os.getpid()}\n")


def append_step(config: AppendConfig) -> None:
    """Writes from a worker thread, as data steps do: a lost lease interrupts the step's own thread only.

    The step's thread waits on an Event, not on `worker.join`: on Python 3.11 an exception raised in a
    thread blocked in `Thread.join` (the lease's interrupt) releases the joined thread's state lock, so
    the still-running worker looks finished and the interpreter exits without waiting for it.
    """
    hold = os.path.join(config.hold_dir, f"hold-{config.index}")
    done = threading.Event()

    def work():
        try:
            with open(os.path.join(config.output_path, "data.txt"), "a") as f:
                f.write(f"{os.getpid()} first\n")
                f.flush()
                mark(config, "started")
                while os.path.exists(hold):
                    time.sleep(0.02)
                f.write(f"{os.getpid()} last\n")
                f.flush()
            mark(config, "wrote")
        finally:
            done.set()

    threading.Thread(target=work).start()
    while not done.wait(0.05):
        pass


def build(hold_dir: str, marks: str, n: int) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    for i in range(n):
        after = output_path_of(steps[-1]) if steps else None
        steps.append(ExecutorStep(f"append/s{i:02d}", append_step, AppendConfig(hold_dir, marks, versioned(i), after)))
    return steps


def follow(prefix: str, hold_dir: str, marks: str, n: int) -> None:
    steps = build(hold_dir, marks, n)
    for i in range(n):
        while not os.path.exists(os.path.join(hold_dir, f"go-{i}")):
            time.sleep(0.02)
        Executor(prefix, backend="local", experiment_name="append").run(steps[: i + 1])
        with open(marks, "a") as f:
            f.write(f"published {i} {os.getpid()}\n")


if __name__ == "__main__":
    prefix, hold_dir, marks, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if sys.argv[5:] == ["follow"]:
        follow(prefix, hold_dir, marks, n)
    else:
        Executor(prefix, backend="local", experiment_name="append").run(build(hold_dir, marks, n))
