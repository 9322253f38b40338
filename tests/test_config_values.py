"""Config values read back from a record are the values that ran, in value and in type.

The round trip (encode, the record's JSON bytes, decode by the dataclass annotations) is checked as a
property over generated configs: Enums in fields that name them and in fields that do not, non-finite
floats, dicts with int, bool, float and tuple keys (and keys that look like the record's own tags), tuples
beside lists, Paths, nested dataclasses. Then a tiny experiment whose step branches on such values runs,
is rerun from its record into another prefix, and must write the same bytes.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from pathlib import PurePosixPath
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.execution.config_values import build, encode
from marin.execution.planning import PlanError
from marin.execution.records import dump_json
from marin.tools.rebuild import RerunError, rebuild_steps
from tests.cli_support import marin


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Inner:
    x: float
    mode: Mode
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Generated:
    f: float
    mode: Mode
    level: Level | None
    choice: Literal["a", "b"]
    shape: tuple[int, ...]
    pair: tuple[int, str]
    names: dict[int, str]
    table: dict[str, list[float]]
    path: PurePosixPath
    inner: Inner
    inners: list[Inner]
    maybe: Inner | None
    anything: Any


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        typed_keys = sorted((type(k).__name__, repr(k)) for k in a)
        return typed_keys == sorted((type(k).__name__, repr(k)) for k in b) and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


floats = st.floats(allow_nan=True, allow_infinity=True)
text = st.text(max_size=8)
inner = st.builds(Inner, x=floats, mode=st.sampled_from(Mode), tags=st.lists(text, max_size=3).map(tuple))
keys = st.one_of(
    text,
    st.sampled_from(["__enum__", "__tuple__", "__dict__", "__float__"]),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.tuples(st.integers(), text),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    floats,
    text,
    st.sampled_from(Mode),
    st.sampled_from(Level),
    st.builds(PurePosixPath, text),
    inner,
)
anything = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
    ),
    max_leaves=12,
)
generated = st.builds(
    Generated,
    f=floats,
    mode=st.sampled_from(Mode),
    level=st.none() | st.sampled_from(Level),
    choice=st.sampled_from(["a", "b"]),
    shape=st.lists(st.integers(), max_size=3).map(tuple),
    pair=st.tuples(st.integers(), text),
    names=st.dictionaries(st.integers(), text, max_size=3),
    table=st.dictionaries(text, st.lists(floats, max_size=2), max_size=3),
    path=st.builds(PurePosixPath, text),
    inner=inner,
    inners=st.lists(inner, max_size=2),
    maybe=st.none() | inner,
    anything=anything,
)


@settings(max_examples=300, deadline=None)
@given(generated)
def test_every_generated_config_reads_back_equal_in_value_and_type(config):
    types: dict[str, str] = {}
    data = json.loads(dump_json({"config": encode(config, types_out=types), "types": types}))
    back = build(Generated, data["config"], "", data["types"])
    assert same(back, config), (config, data)


def test_values_the_annotation_names_are_written_plainly():
    config = Inner(x=1.5, mode=Mode.SLOW, tags=("a",))
    assert encode(config) == {"x": 1.5, "mode": "slow", "tags": ["a"]}
    assert encode(float("-inf")) == {"__float__": "-inf"}
    assert encode(Mode.FAST) == {"__enum__": f"{__name__}:Mode", "name": "FAST"}
    assert encode({1: "one"}) == {"__dict__": [[1, "one"]]}


@dataclasses.dataclass(frozen=True)
class BranchConfig:
    mode: Mode
    """Versioned: hashed as its value, read back as the member."""
    limit: float = float("inf")
    names: dict[int, str] = dataclasses.field(default_factory=lambda: {1: "one"})
    shape: tuple[int, ...] = (2, 3)
    extra: Any = Level.HIGH
    output_path: str = THIS_OUTPUT_PATH


def branch(config: BranchConfig) -> None:
    """Writes which way each value sends it; another type would send it another way, and still succeed."""
    lines = [
        "mode: " + ("fast path" if config.mode is Mode.FAST else "slow path"),
        "limit: " + ("unlimited" if config.limit == float("inf") else repr(config.limit)),
        f"one: {config.names.get(1)}",
        "shape: " + ("tuple" if isinstance(config.shape, tuple) else "list"),
        "extra: " + ("high" if config.extra is Level.HIGH else repr(config.extra)),
    ]
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "branches.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def test_a_rerun_takes_the_branches_the_run_took(tmp_path):
    step = ExecutorStep("typed/branches", branch, BranchConfig(mode=versioned(Mode.FAST)))
    result = Executor(str(tmp_path / "A"), backend="local", experiment_name="typed").run([step])
    out_a = result[step]
    assert open(os.path.join(out_a, "branches.txt")).read() == (
        "mode: fast path\nlimit: unlimited\none: one\nshape: tuple\nextra: high\n"
    )
    record = json.loads(open(result.record_path).read())
    (rebuilt,) = rebuild_steps(record, str(tmp_path / "B"))
    config = rebuilt.config
    assert config.mode.value is Mode.FAST
    assert same([config.limit, config.names, config.shape, config.extra], [math.inf, {1: "one"}, (2, 3), Level.HIGH])

    rerun = marin("rerun", result.record_path, "--prefix", str(tmp_path / "B"), "--backend", "local")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    out_b = str(tmp_path / "B" / os.path.relpath(out_a, tmp_path / "A"))
    assert open(os.path.join(out_b, "branches.txt")).read() == open(os.path.join(out_a, "branches.txt")).read()


def test_a_value_the_record_cannot_hold_fails_the_rerun_naming_the_field(tmp_path):
    step = ExecutorStep("typed/fn", branch, BranchConfig(mode=versioned(Mode.FAST), extra=object()))
    record = json.loads(open(Executor(str(tmp_path), backend="local").run([step]).record_path).read())
    with pytest.raises(RerunError, match=r"step 'typed/fn': field 'extra' held a builtins.object"):
        rebuild_steps(record, str(tmp_path / "B"))

    record["steps"][0]["config"]["extra"] = None
    record["steps"][0]["config"]["limit"] = "inf"  # as records before typed values wrote it
    with pytest.raises(PlanError, match=r"step 'typed/fn': config field limit: expected float, got str 'inf'"):
        rebuild_steps(record, str(tmp_path / "B"))
