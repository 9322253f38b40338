"""A step whose manifest cannot be written fails, and its log says why, on every storage kind."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorRunError, ExecutorStep, versioned
from marin.storage import join, read_text, write_bytes


@dataclass(frozen=True)
class BadVolatileListConfig:
    value: int = 0
    """A versioned payload."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def write_bad_volatile_list(config: BadVolatileListConfig) -> None:
    """Succeeds itself, but leaves a volatile_files.txt that is not UTF-8: computing the manifest fails."""
    print("step body finished")
    write_bytes(join(config.output_path, "out.txt"), str(config.value).encode())
    write_bytes(join(config.output_path, "volatile_files.txt"), b"\xff\xfe not utf-8\n")


def test_manifest_failure_is_failed_and_its_traceback_is_in_the_stored_log(prefix):
    step = ExecutorStep("m/bad", write_bad_volatile_list, BadVolatileListConfig(value=versioned(1)))
    executor = Executor(prefix, backend="local", experiment_name="manifest_failure")
    with pytest.raises(ExecutorRunError) as failure:
        executor.run([step])
    out = executor.plan([step])[step]
    outcome = failure.value.result.outcomes[step]
    assert outcome.status == "FAILED"
    assert outcome.error.startswith("writing the manifest failed: UnicodeDecodeError")
    assert read_text(join(out, ".executor_status")).strip() == "FAILED"
    log = read_text(join(out, ".executor_logs", "001.log"))
    assert "step body finished" in log
    assert "Traceback" in log and "UnicodeDecodeError" in log
    assert log.index("step body finished") < log.index("Traceback")
