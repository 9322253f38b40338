"""Identity: which changes change a step's hash, stability across processes and prefixes, dedup, bad DAGs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from marin.execution import Executor, ExecutorStep, PlanError, output_path_of, this_output_path, versioned
from tests.executor_steps import CountConfig, count_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chain(value=1, sibling=5, note="x"):
    a = ExecutorStep("t/a", count_step, CountConfig(value=versioned(value), counter_path=note))
    b = ExecutorStep("t/b", count_step, CountConfig(value=versioned(2), inputs=[output_path_of(a)]))
    c = ExecutorStep("t/c", count_step, CountConfig(value=versioned(sibling)))
    return a, b, c


def rel_paths(steps, prefix="/p"):
    paths = Executor(prefix, backend="local").plan(steps)
    return {s.name: os.path.relpath(p, prefix) for s, p in paths.items()}


def test_output_path_is_name_dash_hash8_of_the_version():
    import hashlib

    a, b, c = chain()
    plan = Executor("/p", backend="local").plan_dag([b])
    version = plan[b].version
    assert version == {
        "name": "t/b",
        "config": {"value": 2, "inputs[0]": "DEP[0]"},
        "dependencies": [f"t/a-{plan[a].hash}"],
    }
    canonical = json.dumps(version, sort_keys=True, separators=(",", ":"))
    assert plan[b].hash == hashlib.sha256(canonical.encode()).hexdigest()[:8]
    assert plan[b].output_path == f"/p/t/b-{plan[b].hash}"


def test_versioned_field_changes_hash_and_unversioned_field_does_not():
    base = rel_paths(chain())
    assert rel_paths(chain(note="other-counter")) == base
    changed = rel_paths(chain(value=9))
    assert changed["t/a"] != base["t/a"]


def test_dependency_change_propagates_downstream_only():
    base = rel_paths(chain())
    changed = rel_paths(chain(value=9))
    assert changed["t/a"] != base["t/a"] and changed["t/b"] != base["t/b"]
    assert changed["t/c"] == base["t/c"]


def test_prefix_never_enters_the_hash():
    assert rel_paths(chain(), "/one/prefix") == rel_paths(chain(), "/other") == rel_paths(chain(), "gs://b/x")


def test_hash_is_stable_across_processes_with_different_hash_seeds(tmp_path):
    code = (
        "import json,os;from tests.test_executor_identity import chain, rel_paths;"
        "print(json.dumps(rel_paths(chain(), os.environ['P'])))"
    )
    outs = []
    for seed, prefix in (("1", "/a"), ("4242", str(tmp_path / "b"))):
        env = dict(os.environ, PYTHONHASHSEED=seed, P=prefix, PYTHONPATH=REPO)
        outs.append(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
    assert outs[0] == outs[1]


def test_equal_steps_are_one_step(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    one = ExecutorStep("t/same", count_step, CountConfig(value=versioned(1), counter_path=counter))
    two = ExecutorStep("t/same", count_step, CountConfig(value=versioned(1), counter_path=counter))
    paths = Executor(prefix, backend="local").run([one, two])
    assert paths[one] == paths[two]
    from tests.executor_steps import invocations

    assert invocations(counter) == [paths[one]]


def test_unversionable_values_are_errors_naming_step_and_field():
    class Opaque:
        pass

    for bad in (lambda x: x, Opaque(), float("nan"), {1: "int key"}):
        step = ExecutorStep("t/bad", count_step, CountConfig(value=versioned(bad)))
        with pytest.raises(PlanError, match=r"'t/bad'.*value"):
            Executor("/p", backend="local").plan([step])


def test_cycle_is_an_error_that_names_it():
    @dataclass(frozen=True)
    class Loop:
        inputs: list

    a = ExecutorStep("t/a", count_step, Loop(inputs=[]))
    b = ExecutorStep("t/b", count_step, Loop(inputs=[output_path_of(a)]))
    a.config.inputs.append(output_path_of(b))
    with pytest.raises(PlanError, match=r"cycle in the DAG: t/[ab] -> t/[ab] -> t/[ab]"):
        Executor("/p", backend="local").plan([b])


def test_two_different_steps_with_one_output_path_is_an_error():
    a = ExecutorStep("t/a", count_step, CountConfig(value=versioned(1)), override_output_path="fixed/out")
    b = ExecutorStep("t/b", count_step, CountConfig(value=versioned(2)), override_output_path="fixed/out")
    with pytest.raises(PlanError, match=r"'t/a' and 't/b' differ but share the output path '/p/fixed/out'"):
        Executor("/p", backend="local").plan([a, b])


def test_output_path_of_something_not_a_step_is_an_error():
    with pytest.raises(TypeError, match="output_path_of\\(\\) takes an ExecutorStep, got str"):
        output_path_of("t/a")


def test_config_that_is_not_a_dataclass_is_an_error():
    step = ExecutorStep("t/dict", count_step, {"value": 1})
    with pytest.raises(PlanError, match=r"step 't/dict': config must be a dataclass instance or None, got dict"):
        Executor("/p", backend="local").plan([step])


def test_nonblocking_input_is_hashed_as_a_pseudo_dependency():
    a = ExecutorStep("t/a", count_step, CountConfig(value=versioned(1)))
    b = ExecutorStep("t/b", count_step, CountConfig(inputs=[output_path_of(a, "ckpt").nonblocking()]))
    plan = Executor("/p", backend="local").plan_dag([b])
    assert plan[b].version["config"] == {"inputs[0]": "PSEUDO_DEP[0]/ckpt"}
    assert plan[b].version["pseudo_dependencies"] == [plan[a].identity]
    assert plan[b].dependencies == []


def test_this_output_path_subpath_is_filled_but_not_hashed():
    @dataclass(frozen=True)
    class Sub:
        out: str = this_output_path("inner/file.txt")

    step = ExecutorStep("t/sub", count_step, Sub())
    plan = Executor("/p", backend="local").plan_dag([step])
    from marin.execution.planning import instantiate_config

    assert plan[step].version["config"] == {}
    assert instantiate_config(plan[step], plan).out == f"/p/t/sub-{plan[step].hash}/inner/file.txt"
