"""The executor: content-hashed steps, records, leases, Ray and local backends (docs/executor.md).

Importing this package is cheap (no Ray, jax or levanter): they load only when a run needs them.
"""

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
from marin.execution.executor import Executor, ExecutorRunError
from marin.execution.main import ExecutorMainConfig, executor_main
from marin.execution.planning import Plan, PlanError, PlannedStep
from marin.execution.run_result import RunResult

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
