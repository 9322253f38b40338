"""A small layered experiment for the lease tests, runnable as a separate runner process:

    python -m tests.lease_dag PREFIX COUNTER_FILE N_STEPS SLEEP_S [BACKEND [WAIT_FOR_FILE]]

Every step appends a line to COUNTER_FILE when its function is invoked, so a test can count
invocations across processes. Width 5, each step depending on two of the previous layer.
"""

from __future__ import annotations

import sys

from marin.execution import Executor, ExecutorStep, output_path_of, versioned
from tests.executor_steps import CountConfig, count_step

WIDTH = 5


def build(counter: str, n: int, sleep_s: float = 0.0, wait_for: str | None = None) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    previous: list[ExecutorStep] = []
    for layer in range((n + WIDTH - 1) // WIDTH):
        current = []
        for i in range(min(WIDTH, n - layer * WIDTH)):
            deps = [previous[(i + k) % len(previous)] for k in range(2)] if previous else []
            config = CountConfig(
                value=versioned(layer * WIDTH + i),
                inputs=[output_path_of(d) for d in deps],
                counter_path=counter,
                sleep_s=sleep_s,
                wait_for=wait_for,
            )
            current.append(ExecutorStep(f"race/l{layer}_i{i}", count_step, config))
        steps += current
        previous = current
    return steps


def main(argv: list[str]) -> int:
    prefix, counter, n, sleep_s = argv[0], argv[1], int(argv[2]), float(argv[3])
    backend = argv[4] if len(argv) > 4 else "local"
    wait_for = argv[5] if len(argv) > 5 else None
    Executor(prefix, backend=backend, experiment_name="race").run(build(counter, n, sleep_s, wait_for))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
