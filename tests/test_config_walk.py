"""The walk over a config (marin.config.walk): what planning finds in one pass, and what resolving makes of it.

Planning walks each config once: the versioned values, the inputs and the routes to the markers come out
of one pass, and resolving the markers follows the routes instead of walking the config again. These
properties hold the walk to the plain definitions, over generated configs: resolving by the routes gives,
node for node, what replacing every marker anywhere gives (the same objects where nothing changed), the
inputs are every `output_path_of` in the order met, and a step's hash is sha256 over Python's canonical
JSON of its version, whichever encoder wrote the bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from collections import namedtuple
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from marin.config import KEEP, InputName, OutputName, StepConfig, VersionedValue, map_nodes, resolve, scan
from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path, versioned
from marin.storage.paths import join

Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass(frozen=True)
class Node:
    a: Any
    b: Any = None
    derived: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", len(repr(self.a)))


@dataclasses.dataclass(frozen=True)
class Plain:
    a: Any
    b: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Declared(StepConfig):
    a: Any
    b: Any = None


def _noop(config: Any) -> None:
    return None


DEPS = [ExecutorStep(name=f"dep{i}", fn=_noop, config=None) for i in range(2)]

leaves = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.text(max_size=3),
    st.booleans(),
    st.integers(0, 9).map(versioned),
    st.tuples(st.sampled_from(DEPS), st.sampled_from([None, "sub"])).map(lambda t: output_path_of(*t)),
    st.sampled_from([None, "out"]).map(this_output_path),
)
parts = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.tuples(kids, kids).map(lambda t: Pair(*t)),
        st.dictionaries(st.text(max_size=2), kids, max_size=3),
        st.tuples(kids, kids).map(lambda t: Node(a=t[0], b=t[1])),
    ),
    max_leaves=12,
)
configs = st.tuples(st.sampled_from([Plain, Declared]), parts, parts).map(lambda t: t[0](a=t[1], b=t[2]))

OUTPUTS = {id(step): f"/p/{step.name}-0" for step in DEPS}


def _fill(value: Any) -> Any:
    cls = type(value)
    if cls is VersionedValue:
        return value.value
    if cls is InputName:
        base = OUTPUTS[id(value.step)]
        return join(base, value.name) if value.name else base
    if cls is OutputName:
        return join("/p/own", value.name) if value.name else "/p/own"
    return KEEP


def _same_objects(a: Any, b: Any) -> bool:
    """The same structure, the same types, and identical objects wherever either result kept a part."""
    if a is b:
        return True
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_objects(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_objects(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(_same_objects(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


@settings(max_examples=200, deadline=None)
@given(configs)
def test_resolving_by_the_routes_gives_what_replacing_every_marker_gives(config: Any) -> None:
    found = scan(config)
    by_routes = resolve(config, found.routes, lambda marker: OUTPUTS[id(marker.step)], "/p/own")
    everywhere = map_nodes(config, _fill)
    assert _same_objects(by_routes, everywhere)
    assert (by_routes is config) == (everywhere is config)

    met: list[InputName] = []
    map_nodes(config, lambda value: met.append(value) or KEEP if type(value) is InputName else KEEP)
    assert [marker for _, marker in found.inputs] == met


floats = st.floats(allow_nan=False, allow_infinity=False)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), floats, st.text(max_size=4)),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=3), kids, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,3}", fullmatch=True), values, max_size=4))
def test_the_hash_is_sha256_of_pythons_canonical_json_of_the_version(fields: dict) -> None:
    step = ExecutorStep(name="v/step", fn=_noop, config=Plain(a={k: versioned(v) for k, v in fields.items()}))
    planned = Executor("/p", backend="local").plan_dag([step])[step]
    text = json.dumps(planned.version, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert planned.hash == hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def test_a_plan_imports_nothing_of_the_run():
    code = (
        "import sys\n"
        "from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path, versioned\n"
        "from tests.executor_steps import CountConfig, count_step\n"
        "a = ExecutorStep('t/a', count_step, CountConfig(value=versioned(1)))\n"
        "b = ExecutorStep('t/b', count_step, CountConfig(value=versioned(2), inputs=[output_path_of(a)]))\n"
        "Executor('/p', backend='local').plan([b])\n"
        "run_only = ['marin.execution.step_runner', 'marin.execution.records', 'marin.execution.attempts',\n"
        "            'marin.execution.lease', 'marin.execution.reuse', 'marin.provenance.probe']\n"
        "print(sorted(m for m in run_only if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
