"""`map_nodes`, with and without paths, gives what a plain rebuild over `items()` gives, node for node.

Resolving markers runs several times per step, so `map_nodes` has a mode without path strings; the
property here holds both modes to a reference rebuild written over the step kit's `items()` (the one
place that says what a config is made of), over generated configs: lists, tuples, namedtuples, dicts,
frozen dataclasses (with a non-init field) and the three markers, nested. The mode with paths must also
name every node as the reference does. Equal results are not enough: an
unchanged part must be the very object it was (records and reruns compare configs built from it), and a
changed one a copy of the same type.
"""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from marin.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin.execution.authoring import InputName, OutputName, VersionedValue
from marin.stepkit.config import KEEP, items, join_path, map_nodes
from marin.storage.paths import join

Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass(frozen=True)
class Node:
    a: Any
    b: Any = None
    derived: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", len(repr(self.a)))


def _dep_fn(config: Any) -> None:
    return None


DEP = ExecutorStep(name="dep", fn=_dep_fn, config=None)

leaves = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.text(max_size=3),
    st.booleans(),
    st.integers(0, 9).map(versioned),
    st.sampled_from([None, "sub"]).map(lambda name: output_path_of(DEP, name)),
    st.sampled_from([None, "out"]).map(this_output_path),
)
configs = st.recursive(
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


def _resolver(input_path: str | None, own: str | None):
    def resolve(value: Any) -> Any:
        cls = type(value)
        if cls is VersionedValue:
            return value.value
        if cls is InputName and input_path is not None:
            return join(input_path, value.name) if value.name else input_path
        if cls is OutputName and own is not None:
            return join(own, value.name) if value.name else own
        return KEEP

    return resolve


def _reference(value: Any, fn: Any, path: str = "") -> Any:
    """The rebuild `map_nodes` must match: `fn(path, node)` on every node, parts through `items()`."""
    new = fn(path, value)
    if new is not KEEP:
        return new
    parts = items(value)
    if not parts:
        return value
    out = [_reference(item, fn, join_path(path, suffix)) for suffix, _, item in parts]
    if all(a is b for a, (_, _, b) in zip(out, parts, strict=True)):
        return value
    if isinstance(value, dict):
        return dict(zip(value, out, strict=True))
    if isinstance(value, list | tuple):
        return type(value)(out) if type(value) in (list, tuple) else type(value)(*out)
    changes = {f.name: new for new, (_, f, old) in zip(out, parts, strict=True) if new is not old and f.init}
    return dataclasses.replace(value, **changes)


def _same_objects(a: Any, b: Any) -> bool:
    """The same structure, the same types, and identical objects wherever either result kept a part."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_objects(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_objects(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(_same_objects(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


@settings(max_examples=300, deadline=None)
@given(
    configs,
    st.sampled_from([None, "/p/dep-1"]),
    st.sampled_from([None, "/p/own-2"]),
)
def test_map_nodes_matches_the_reference(config: Any, input_path: str | None, own: str | None) -> None:
    fn = _resolver(input_path, own)
    seen: list[tuple[str, Any]] = []
    expected: list[tuple[str, Any]] = []
    by_reference = _reference(config, lambda path, value: expected.append((path, value)) or fn(value))
    for by_map in (
        map_nodes(config, fn),
        map_nodes(config, lambda path, value: seen.append((path, value)) or fn(value), path=""),
    ):
        assert _same_objects(by_map, by_reference)
        assert (by_map is config) == (by_reference is config)
    assert [p for p, _ in seen] == [p for p, _ in expected]
    assert all(a is b for (_, a), (_, b) in zip(seen, expected, strict=True))
