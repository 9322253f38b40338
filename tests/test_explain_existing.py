"""`marin explain` finds the other outputs of a step, with their versions and states, on every storage kind."""

from __future__ import annotations

import pytest

from marin.execution import Executor, ExecutorRunError, ExecutorStep, versioned
from marin.storage import join, write_bytes
from marin.tools.explain import existing_versions, explain_step
from tests.executor_steps import CountConfig, count_step


def step(value, fail=False):
    return ExecutorStep("e/count", count_step, CountConfig(value=versioned(value), fail=fail))


def test_other_outputs_are_listed_with_their_version_and_state(prefix):
    executor = Executor(prefix, backend="local", experiment_name="explain")
    ok, failed, new = step(1), step(2, fail=True), step(3)
    executor.run([ok])
    with pytest.raises(ExecutorRunError):
        executor.run([failed])
    paths = {s: executor.plan([s])[s] for s in (ok, failed, new)}
    write_bytes(join(prefix, "e", "count-0123abcd", ".executor_info"), b"not json")
    planned = executor.plan_dag([new]).by_step[new]
    found = existing_versions(planned, prefix)
    assert [(out, version["config"]["value"], state) for out, version, state in found] == sorted(
        [(paths[ok], 1, "SUCCESS"), (paths[failed], 2, "FAILED")]
    )
    text = explain_step(planned, prefix)
    assert f"nearest existing output: {min(paths[ok], paths[failed])}" in text
    assert "config.value: " in text and "-> 3" in text
