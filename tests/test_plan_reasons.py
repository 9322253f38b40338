"""`marin plan` says why a step has a new hash: the field that changed since the last output of that step.

The earlier output is found the way the browser's compare page finds other versions: a sibling folder
`<name>-<other hash>` with its version in `.executor_info`. These tests run real steps into a fresh prefix
locally and on the GCS emulator, then plan a changed DAG.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import pytest

from marin.execution import Executor, ExecutorStep, output_path_of, versioned
from marin.execution.main import ExecutorMainConfig
from marin.stepkit.config import StepConfig, output_field, versioned_unless_default
from marin.storage import join, write_bytes
from tests.cli_support import marin, ran_hello_copy
from tests.executor_steps import CountConfig, count_step


def dag(value: int, upstream: int = 1) -> tuple[ExecutorStep, ExecutorStep]:
    base = ExecutorStep("p/base", count_step, CountConfig(value=versioned(upstream)))
    top = ExecutorStep("p/top", count_step, CountConfig(value=versioned(value), inputs=[output_path_of(base)]))
    return base, top


def reasons(executor: Executor, step: ExecutorStep) -> dict[str, str]:
    plan = executor.plan_dag([step])
    return {d.planned.name: d.reason for d in executor.decide(plan, explain_new=True)}


@pytest.mark.parametrize("store", ["local", "gcs", "s3"])
def test_plan_names_the_changed_field_against_the_most_recent_earlier_output(bucket_prefix, store):
    prefix = bucket_prefix(store)
    executor = Executor(prefix, backend="local", experiment_name="reasons")
    tops = {v: dag(v)[1] for v in (2, 3)}
    paths = {v: executor.plan([step])[step] for v, step in tops.items()}
    # the later run has the smaller folder name, so "most recent" and "last by name" disagree
    first, second = sorted(paths, key=paths.get, reverse=True)
    executor.run([tops[first]])
    if store == "s3":
        time.sleep(1.1)  # S3 keeps modification times to the second
    executor.run([tops[second]])
    was = "/".join(paths[second].rsplit("/", 2)[-2:])
    got = reasons(executor, dag(7)[1])
    assert got == {"p/base": "succeeded", "p/top": f"new hash: config.value {second} -> 7 (was {was})"}


@pytest.mark.parametrize("store", ["local", "gcs"])
def test_plan_names_the_upstream_step_whose_hash_changed(bucket_prefix, store):
    prefix = bucket_prefix(store)
    executor = Executor(prefix, backend="local", experiment_name="reasons")
    base, top = dag(2)
    paths = executor.run([top])
    write_bytes(join(prefix, "p", "top-0123abcd", ".executor_info"), b"not json")  # a broken sibling is ignored
    got = reasons(executor, dag(2, upstream=5)[1])
    old_top = paths[top].rsplit("/", 2)[-2:]
    assert got["p/base"].startswith("new hash: config.value 1 -> 5 (was p/base-")
    assert got["p/top"] == f"new hash: dependency p/base changed (was {'/'.join(old_top)})"


def test_plan_without_earlier_outputs_says_no_output_yet(tmp_path):
    executor = Executor(str(tmp_path / "lab"), backend="local", experiment_name="reasons")
    assert set(reasons(executor, dag(2)[1]).values()) == {"new hash: no output yet"}


def test_marin_plan_and_dry_run_print_the_changed_field(tmp_path):
    script, source, prefix = ran_hello_copy(tmp_path)
    script.write_text(source.replace("min_len=versioned(3)", "min_len=versioned(5)"))
    plan = marin("plan", str(script), "--prefix", prefix)
    assert "new hash: config.min_len 3 -> 5 (was hello/stats-" in plan.stdout, plan.stdout + plan.stderr
    dry = marin("run", str(script), "--prefix", prefix, "--dry_run")
    assert "new hash: config.min_len 3 -> 5 (was hello/stats-" in dry.stdout, dry.stdout + dry.stderr


def test_marin_plan_help_lists_every_run_flag_with_its_meaning():
    result = marin("plan", "--help")
    assert result.returncode == 0, result.stderr
    for f in fields(ExecutorMainConfig):
        line = next((line for line in result.stdout.splitlines() if line.strip().startswith(f"--{f.name}")), None)
        assert line is not None and len(line.split()) > 2, f"--{f.name} is not listed with a meaning:\n{result.stdout}"


@dataclass(frozen=True, kw_only=True)
class CadenceConfig(StepConfig):
    value: int = 1
    """A versioned payload."""
    every: int = versioned_unless_default(1000)
    """A setting added after outputs existed: versioned only when not 1000."""
    output_path: str = output_field()
    """Where `every.txt` goes."""


def write_cadence(config: CadenceConfig) -> None:
    write_bytes(join(config.output_path, "every.txt"), f"{config.value} {config.every}".encode())


def test_a_field_at_its_default_is_shown_with_its_default_value(tmp_path):
    from marin.execution.planning import plan_steps
    from marin.tools.explain import explain_step

    executor = Executor(str(tmp_path / "lab"), backend="local", experiment_name="cadence")
    executor.run([ExecutorStep("c/cadence", write_cadence, CadenceConfig())])
    changed = ExecutorStep("c/cadence", write_cadence, CadenceConfig(every=25))
    assert reasons(executor, changed)["c/cadence"].startswith("new hash: config.every 1000 (default) -> 25 (was c/")
    explained = explain_step(plan_steps([changed], executor.prefix).find("c/cadence"), executor.prefix)
    assert "  config.every: 1000 (default) -> 25" in explained and "<absent>" not in explained

    lab = Executor(str(tmp_path / "lab2"), backend="local", experiment_name="cadence")
    lab.run([changed])
    back = ExecutorStep("c/cadence", write_cadence, CadenceConfig(value=2))
    assert reasons(lab, back)["c/cadence"].startswith(
        "new hash: config.every 25 -> 1000 (default), config.value 1 -> 2"
    )
