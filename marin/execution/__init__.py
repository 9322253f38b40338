"""The executor: content-hashed steps, records, leases, Ray and local backends (docs/executor.md).

Importing this package is cheap (no Ray, jax or levanter, and not the engine): an experiment script
needs only the authoring API and `executor_main` to declare its steps, so `Executor`, the planner and
the run's result load on first use (`executor_main` imports them when it runs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from marin.execution.authoring import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    InputName,
    OutputName,
    ResourceConfig,
    VersionedValue,
    output_path_of,
    this_output_path,
    versioned,
)
from marin.execution.main import ExecutorMainConfig, executor_main

if TYPE_CHECKING:
    from marin.execution.executor import Executor, ExecutorRunError
    from marin.execution.planning import Plan, PlanError, PlannedStep
    from marin.execution.run_result import RunResult

_LAZY = {
    "Executor": "executor",
    "ExecutorRunError": "executor",
    "Plan": "planning",
    "PlanError": "planning",
    "PlannedStep": "planning",
    "RunResult": "run_result",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "THIS_OUTPUT_PATH",
    "Executor",
    "ExecutorMainConfig",
    "ExecutorRunError",
    "ExecutorStep",
    "InputName",
    "OutputName",
    "Plan",
    "PlanError",
    "PlannedStep",
    "ResourceConfig",
    "RunResult",
    "VersionedValue",
    "executor_main",
    "output_path_of",
    "this_output_path",
    "versioned",
]
