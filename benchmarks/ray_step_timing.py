"""The executor's own work per step inside a Ray task, without the cluster's start-up or scheduling.

    PYTHONPATH=.:benchmarks/executor_harness .venv/bin/python benchmarks/ray_step_timing.py [STEPS]

Runs a chain of trivial steps (benchmarks/executor_harness/dag.py) one Ray task at a time on a warm worker and prints
the median time of `execute_step` inside the task and of the whole round trip, in milliseconds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import dag
import ray

import marin.execution as api
from marin.execution import Executor
from marin.execution.step_runner import execute_step


@ray.remote
def timed(task):
    t = time.perf_counter()
    outcome = execute_step(task)
    return time.perf_counter() - t, outcome.status


def main(n: int = 60) -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    executor = Executor(tempfile.mkdtemp(), backend="local")
    plan = executor.plan_dag(dag.build_chain(api, n))
    tasks = [executor._task(p, plan, False, False) for p in plan.steps]
    for task in tasks:
        task.capture = "process"
    ray.get(timed.remote(tasks[0]))  # a warm worker
    inner, outer = [], []
    for task in tasks[1:]:
        t = time.perf_counter()
        seconds, status = ray.get(timed.remote(task))
        assert status == "SUCCESS", status
        outer.append(time.perf_counter() - t)
        inner.append(seconds)
    print(
        f"execute_step in the task: {statistics.median(inner) * 1000:.2f} ms; round trip {statistics.median(outer) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
