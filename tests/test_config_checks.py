"""What planning refuses or points out about configs, before any backend starts, naming step and field.

- A value that does not fit its field's annotation (int, float, str, bool, Literal, Enum, Optional, tuples,
  lists and dicts of them, nested dataclasses, markers' values) fails the plan; a `StepConfig`, and so
  every helper of experiments/defaults.py, fails as soon as it is built.
- A step name with a control character, or an `override_output_path` that leaves its folder, fails the plan.
- A plain dataclass versions only `versioned(...)` fields: one named like a setting (seed, learning_rate,
  ...) left unwrapped is warned about, unless declared `unversioned(...)`.
- A changed field of a nested versioned value is named by its leaf: `config.optimizer.learning_rate`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
from typing import Any, Literal

import pytest

from experiments.defaults import default_tokenizer
from experiments.defaults_training import ladder_model, scaling_ladder
from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path, versioned
from marin.execution.earlier_outputs import new_hash_reasons
from marin.execution.planning import PlanError, instantiate_config, plan_steps
from marin.stepkit.config import StepConfig, output_field, type_error, unversioned
from marin.storage import join
from marin.tools.explain import explain_step
from marin.training.config import OptimizerConfig


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Inner:
    x: float = 1.0
    color: Color = Color.RED


@dataclasses.dataclass(frozen=True)
class Plain:
    n: Any = None
    label: str = "a"
    mode: Literal["fast", "slow"] = "fast"
    sizes: tuple[int, ...] = ()
    inner: Inner = dataclasses.field(default_factory=Inner)
    maybe: Inner | None = None
    output_path: str = this_output_path()


@dataclasses.dataclass(frozen=True)
class Counted:
    n: int
    output_path: str = this_output_path()


def noop(config) -> None:
    """Does nothing: these tests only plan."""


def plan(config, name: str = "t/step", **kwargs) -> dict:
    return Executor("/nonexistent/prefix", backend="ray").plan([ExecutorStep(name, noop, config, **kwargs)])


def test_a_versioned_value_of_the_wrong_type_fails_the_plan_naming_step_and_field(tmp_path):
    step = ExecutorStep("t/count", noop, Counted(n=versioned("100")))
    with pytest.raises(PlanError, match=r"^step 't/count': config field n: expected int, got str '100'$"):
        Executor(str(tmp_path / "p"), backend="ray").run([step])
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"label": 3}, "label: expected str, got int 3"),
        ({"mode": "quick"}, "mode: expected Literal['fast', 'slow'], got str 'quick'"),
        ({"sizes": (1, "2")}, "sizes[1]: expected int, got str '2'"),
        ({"sizes": [1, 2]}, "sizes: expected tuple[int, ...], got list [1, 2]"),
        ({"inner": Inner(x="0.5")}, "inner.x: expected float, got str '0.5'"),
        ({"inner": versioned(Inner(color="red"))}, "inner.color: expected Color, got str 'red'"),
        ({"maybe": Inner(x=True)}, "maybe.x: expected float, got bool True"),
        ({"label": output_path_of(ExecutorStep("t/up", noop, None))}, None),
        ({"inner": Inner(x=2, color=Color.BLUE), "maybe": None, "sizes": (1, 2)}, None),
    ],
)
def test_every_value_is_checked_against_its_annotation(changes, message):
    config = Plain(**changes)
    if message is None:
        plan(config)
    else:
        with pytest.raises(PlanError, match="^step 't/step': config field " + message.replace("[", r"\[")):
            plan(config)


def test_type_error_understands_the_usual_annotations():
    assert type_error(3, int | None) is None and type_error(None, int | None) is None
    assert type_error(True, int) == "expected int, got bool True"
    assert type_error(2, float) is None
    assert type_error({"a": 1.0}, dict[str, float]) is None
    assert type_error({1: 1.0}, dict[str, float]) == "[1]: expected str, got int 1"
    assert type_error((1, "a"), tuple[int, str]) is None
    assert type_error((1,), tuple[int, str]) == "expected 2 items (tuple[int, str]), got 1"
    assert type_error(Color.RED, Color) is None and type_error("red", Color | None) is not None


def test_helpers_and_step_configs_refuse_wrong_types_when_built():
    with pytest.raises(TypeError, match=r"^TrainTokenizerConfig.vocab_size: expected int, got str '1024'$"):
        default_tokenizer("t", "/data/docs", vocab_size="1024")
    with pytest.raises(TypeError, match=r"^OptimizerConfig.learning_rate: expected float, got str '3e-3'$"):
        OptimizerConfig(learning_rate="3e-3")
    with pytest.raises(TypeError, match=r"^ladder_model\(\) argument width: expected int, got str '64'$"):
        ladder_model("64")
    with pytest.raises(TypeError, match=r"^scaling_ladder\(\) argument sizes\[1\]: expected int \| "):
        scaling_ladder("l", "/data/tokenized", sizes=[32, "48", 64], vocab_size=1024)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "t/a\x00b"}, r"step 't/a\\x00b': the name holds the character '\\x00'"),
        ({"name": "t/\tb"}, r"step 't/\\tb': the name holds the character '\\t'"),
        ({"name": "t//b"}, r"step 't//b': the name has an empty, '.' or '..' part"),
        ({"override_output_path": "../x"}, r"step 't/step': override_output_path '../x' has an empty, '.' or '..'"),
        ({"override_output_path": "a/../../x"}, r"override_output_path 'a/../../x' has an empty"),
        ({"override_output_path": "/abs/../../etc"}, r"override_output_path '/abs/../../etc' has an empty"),
    ],
)
def test_names_and_output_paths_that_leave_their_folder_fail_the_plan(kwargs, message):
    kwargs = {"name": "t/step", **kwargs}
    with pytest.raises(PlanError, match=message):
        plan(None, **kwargs)


def test_fixed_output_paths_inside_the_prefix_and_absolute_ones_plan():
    assert plan(None, override_output_path="fixed/out/").popitem()[1] == "/nonexistent/prefix/fixed/out"
    assert plan(None, override_output_path="gs://bucket/x").popitem()[1] == "gs://bucket/x"


@dataclasses.dataclass(frozen=True)
class Seeded:
    seed: int = 0
    learning_rate: float = 1e-3
    workers: int = unversioned(1)
    num_shards: int = unversioned(4)
    note: str = "x"
    output_path: str = this_output_path()


def test_unversioned_settings_of_a_plain_dataclass_are_warned_about_once(caplog):
    caplog.set_level(logging.WARNING, logger="marin.execution.planning")
    plan(Seeded(learning_rate=versioned(2e-3)), name="t/seeded")
    plan(Seeded(), name="t/seeded-again")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned
    assert warned[0].startswith("step 't/seeded': config field seed is not versioned")
    assert "wrap it in versioned(...), or declare it unversioned(...)" in warned[0]
    assert warned[1].startswith("step 't/seeded-again': config field learning_rate is not versioned")


@dataclasses.dataclass(frozen=True)
class Trained:
    optimizer: Any
    output_path: str = this_output_path()


def test_a_nested_change_is_named_by_its_leaf_in_plan_and_explain(tmp_path):
    prefix = str(tmp_path)
    executor = Executor(prefix, backend="local", experiment_name="nested")
    before = ExecutorStep("t/train", noop, Trained(optimizer=versioned(OptimizerConfig(learning_rate=3e-3))))
    executor.run([before])
    after = ExecutorStep("t/train", noop, Trained(optimizer=versioned(OptimizerConfig(learning_rate=2e-3))))
    planned = executor.plan_dag([after]).steps[0]
    (reason,) = new_hash_reasons([planned], prefix).values()
    assert reason.startswith("config.optimizer.learning_rate 0.003 -> 0.002 (was t/train-")
    lines = explain_step(planned, prefix).splitlines()
    assert "1 field(s) differ:" in " ".join(lines)
    assert "  config.optimizer.learning_rate: 0.003 -> 0.002" in lines


@dataclasses.dataclass(frozen=True, kw_only=True)
class Written(StepConfig):
    n: int = 1
    output_path: str = output_field()
    report: str = output_field(this_output_path("report.txt"))


def test_an_output_field_defaults_to_the_steps_output_folder(tmp_path):
    """`output_field()` needs no `this_output_path()`: the executor fills it, and it stays out of the hash."""
    prefix = str(tmp_path)
    step = ExecutorStep("w/out", noop, Written(n=2))
    explicit = ExecutorStep("w/out", noop, Written(n=2, output_path=this_output_path()))
    plan = plan_steps([step, explicit], prefix)
    by_step = plan.by_step
    assert by_step[step].output_path == by_step[explicit].output_path
    config = instantiate_config(by_step[step], plan)
    assert config.output_path == by_step[step].output_path
    assert config.report == join(by_step[step].output_path, "report.txt")
    assert "output_path" not in json.dumps(by_step[step].version)
