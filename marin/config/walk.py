"""The walk over a step's config: one pass that plans and hashes, and the resolution that follows it.

Planning a step needs, from its config: every versioned value in canonical form, by field path (what the
hash is computed from); every `output_path_of` input (the step's dependencies); whether every dataclass
in it fits its annotations; the plain paths its declared inputs read (checked before a run); and where
its markers are. `scan` finds all of these in one depth-first pass, so a config is walked once per plan:

    scan(config)                          -> ConfigScan(versioned, inputs, routes, plain_inputs, ...)
    resolve(config, scan.routes, ...)     -> the config with every marker replaced by a plain value

`resolve` does not walk the config again: `routes` name the containers on the way to each marker, and
only those are copied (a frozen dataclass by `dataclasses.replace`); every other part is the very object
it was. The record's typed encoding (`marin.config.values.encode`) walks the resolved config once more,
when a record is written.

Which values are versioned. The rule of a node says how it enters the version: a `StepConfig` versions each
field its class does not declare otherwise (`VERSIONED`); any other config versions only its markers
(`MARKED`, Marin's rule: `versioned(...)` values and inputs). Inside a versioned node, a part that holds no
marker enters the version whole, at its own path (`"optimizer": {...}`); one that holds a marker is split
into its parts, each at its own path (`"data.input_path": "DEP[0]"`). The top of a config is always split
into its fields. A dataclass field's rule is the one its declaration gives inside a versioned node
(`unversioned`, `versioned_unless_default`, an input that is None: marked only).

`map_nodes` is the general copy-on-write mapping over every node (moving an attempt's paths, a rerun's
rebuild); `kind` (marin.config.parts) is the one switch over what a node is, for every walk.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from marin.config.declarations import (
    NEVER,
    UNLESS_DEFAULT,
    InputSpec,
    StepConfig,
    declares,
    field_default,
    input_spec,
    version_rule,
)
from marin.config.markers import InputName, OutputName, ResolvedPath, StepNode, VersionedValue, resolved_path
from marin.config.parts import (
    _ANNOTATIONS,
    _KINDS,
    MAPPING,
    MARKER,
    PLAIN,
    RECORD,
    SEQUENCE,
    fields,
    holds_placeholders,
    join_path,
    kind,
)
from marin.config.typecheck import type_error, type_errors
from marin.storage.paths import join

VERSIONED = "versioned"
"""The rule of a node whose value enters the version (whole, or by its parts when it holds markers)."""
MARKED = "marked"
"""The rule of a node of which only the markers count: `versioned(...)` values and inputs."""


class ScanError(ValueError):
    """A config that cannot be planned (a value that does not fit its annotation, cannot be versioned, or is a
    step); the message names the field. Planning reports it as a PlanError naming the step."""


class UnversionableValueError(TypeError):
    """A value that cannot take part in a hash; the message names the field."""


class ConfigScan:
    """What one walk over a step's config found."""

    __slots__ = ("floats", "input_problem", "inputs", "plain_inputs", "routes", "unversioned_settings", "versioned")

    def __init__(self) -> None:
        self.versioned: dict[str, Any] = {}
        """Every versioned value in canonical form, by field path (inputs are not in it)."""
        self.inputs: list[tuple[str, InputName]] = []
        """Every `output_path_of` marker with its field path, in the order met."""
        self.routes: Any = None
        """Where the markers are (for `resolve`): None when the config holds none."""
        self.plain_inputs: list[tuple[str, InputSpec, str]] = []
        """(field path, spec, path) of every declared input that is a plain path, not another step's output:
        in the config's fields and in those of every `StepConfig` held by one."""
        self.input_problem: str | None = None
        """Why a declared input holds something that is neither a path nor a step's output (reported when the
        inputs are checked, before a run)."""
        self.floats = False
        """Whether a versioned value holds a float (their JSON spelling is Python's: see `canonical.hash8`)."""
        self.unversioned_settings: list[str] = []
        """Field paths of a plain dataclass named like settings (seed, lr, ...) whose plain values are not
        versioned (each class and field reported once per process)."""

    def __repr__(self) -> str:
        return f"ConfigScan(versioned={self.versioned!r}, inputs={self.inputs!r})"


_FieldPlan = tuple[str, str, dataclasses.Field, str, "InputSpec | None"]
_Plan = tuple[tuple[_FieldPlan, ...], tuple[tuple[str, str, Any], ...], tuple[str, ...], bool]
_PLANS: dict[type, _Plan] = {}

_SETTING_NAME = re.compile(
    r"(^|_)(seed|lr|learning_rate|rate|steps|epochs|iterations|batch_size|vocab_size|size|dim|layers|heads|"
    r"dropout|temperature|weight_decay|warmup|fraction|ratio|threshold|alpha|beta\d?|eps|epsilon|top_[kp]|n|k|"
    r"num_\w+|min_\w+|max_\w+)($|_)"
)
_warned: set[tuple[type, str]] = set()


def _plan(cls: type) -> _Plan:
    """Per dataclass, computed once: (name, suffix, field, version rule, input spec) of each field; (name,
    suffix, annotation) of each annotated field; the names of its undeclared fields named like settings;
    whether it is a step."""
    found = _PLANS.get(cls)
    if found is None:
        parts = fields(cls)
        plans = tuple((f.name, suffix, f, version_rule(f), input_spec(f)) for suffix, f in parts)
        checks = tuple((f.name, suffix, _ANNOTATIONS[f]) for suffix, f in parts if _ANNOTATIONS[f] is not Any)
        settings = tuple(f.name for _, f in parts if not declares(f) and _SETTING_NAME.search(f.name))
        found = _PLANS[cls] = (plans, checks, settings, issubclass(cls, StepNode))
    return found


class _HoldsMarker(Exception):
    """Raised by `_canonical` when a versioned part holds a marker: it is split into its parts instead."""


_HOLDS_MARKER = _HoldsMarker()


def scan(config: Any) -> ConfigScan:
    """The versioned values, inputs, marker routes and plain inputs of a config (a dataclass or None).
    ScanError names the field when a value does not fit its annotation, cannot be versioned, or is a step."""
    found = ConfigScan()
    if config is None:
        return found
    is_step_config = isinstance(config, StepConfig)
    try:
        if type(config) in _MARKERS:
            _marker(found, config, type(config), "")
            found.routes = True
        else:
            found.routes = _visit(found, config, "", VERSIONED if is_step_config else MARKED, True, not is_step_config)
    except UnversionableValueError as exc:
        raise ScanError(f"versioned field {exc}") from None
    return found


def _visit(st: ConfigScan, value: Any, path: str, rule: str, scope: bool, plain_root: bool) -> Any:
    """Records what `value` (at `path`, under `rule`; not a marker) adds to the scan; returns its routes: a list
    of (key, routes) of the parts that hold a marker (True for the marker itself), or None when it holds none.

    Markers and plain values met as parts are handled in the loops, without a call each: most of a config is
    made of them."""
    cls = type(value)
    k = _KINDS.get(cls)
    if k is None:
        k = kind(cls)
    if k == MARKER:
        return None
    if rule is VERSIONED and path:
        mark = len(st.plain_inputs)
        try:
            st.versioned[path] = _canonical(st, value, path, scope, True)
            return None
        except _HoldsMarker:
            del st.plain_inputs[mark:]
    routes = None
    if k == SEQUENCE or k == MAPPING:
        for key, item in enumerate(value) if k == SEQUENCE else value.items():
            item_cls = type(item)
            if item_cls in _PLAIN_TYPES and rule is MARKED:
                continue
            sub_path = f"{path}[{key}]" if k == SEQUENCE else f"{path}.{key}" if path else str(key)
            if item_cls is VersionedValue:
                inner = item.value
                st.versioned[sub_path] = (
                    inner if type(inner) in _EXACT else _canonical(st, inner, sub_path, False, False)
                )
                sub = True
            elif item_cls is InputName:
                st.inputs.append((sub_path, item))
                sub = True
            elif item_cls is OutputName:
                sub = True
            elif item_cls in _EXACT:
                st.versioned[sub_path] = item
                continue
            else:
                sub = _visit(st, item, sub_path, rule, False, plain_root)
            if sub is not None:
                routes = routes or []
                routes.append((key, sub))
        return routes
    if k != RECORD:
        return None
    for name, suffix, f, field_rule, spec in _check_record(st, value, cls, path, plain_root):
        item = getattr(value, name)
        item_cls = type(item)
        if spec is not None and scope:
            _input_paths(st, item, path + suffix if path else name, spec)
        item_rule = rule
        if rule is VERSIONED and (
            field_rule is NEVER
            or (field_rule is UNLESS_DEFAULT and not holds_placeholders(item) and item == field_default(f))
            or (item is None and spec is not None)
        ):
            item_rule = MARKED
        if item_cls in _PLAIN_TYPES and item_rule is MARKED:
            continue
        sub_path = path + suffix if path else name
        if item_cls is VersionedValue:
            inner = item.value
            st.versioned[sub_path] = inner if type(inner) in _EXACT else _canonical(st, inner, sub_path, False, False)
            sub = True
        elif item_cls is InputName:
            st.inputs.append((sub_path, item))
            sub = True
        elif item_cls is OutputName:
            sub = True
        elif item_cls in _EXACT:
            st.versioned[sub_path] = item
            continue
        else:
            sub = _visit(st, item, sub_path, item_rule, scope and isinstance(item, StepConfig), plain_root)
        if sub is not None:
            routes = routes or []
            routes.append((f, sub))
    return routes


def _marker(st: ConfigScan, marker: Any, cls: type, path: str) -> None:
    """Records a marker met at `path`: an input, or a versioned value in canonical form."""
    if cls is InputName:
        st.inputs.append((path, marker))
    elif cls is VersionedValue:
        inner = marker.value
        st.versioned[path] = inner if type(inner) in _EXACT else _canonical(st, inner, path, False, False)


_MARKERS = frozenset((InputName, OutputName, VersionedValue))
_EXACT = frozenset((str, int, bool, type(None)))
"""The values that are their own canonical form (a float must be finite, and is noted: see `hash8`)."""
_PLAIN_TYPES = frozenset(cls for cls, k in _KINDS.items() if k == PLAIN)


def _check_record(st: ConfigScan, value: Any, cls: type, path: str, plain_root: bool) -> tuple[_FieldPlan, ...]:
    """The class's field plans, after checking that `value` is no step and that its fields fit their
    annotations (and, under a plain config, noting its unversioned settings)."""
    plans, checks, settings, is_step = _plan(cls)
    if is_step:
        raise ScanError(f"field {path!r} holds a step; use output_path_of(step)")
    errors = None
    for name, suffix, hint in checks:
        item = getattr(value, name)
        if type(item) is not hint:
            problem = type_error(item, hint)
            if problem:
                errors = errors or []
                errors.append(join_path(path, suffix) + ("" if problem.startswith("[") else ": ") + problem)
    if errors:
        raise ScanError("config field " + "; ".join(errors))
    if settings and plain_root:
        for name in settings:
            if type(getattr(value, name)) in (int, float, bool, str) and (cls, name) not in _warned:
                _warned.add((cls, name))
                st.unversioned_settings.append(f"{path}.{name}" if path else name)
    return plans


def _canonical(st: ConfigScan | None, value: Any, where: str, scope: bool, split: bool) -> Any:
    """The canonical form of a versioned value at `where` (checking the dataclasses in it against their
    annotations, and noting the plain inputs of the `StepConfig`s in `scope`). A marker in it raises
    `_HoldsMarker` when `split` (the caller versions the value by its parts), else UnversionableValueError."""
    cls = type(value)
    if cls is str or cls is int or cls is bool or value is None:
        return value
    if cls is float:
        if not math.isfinite(value):
            raise UnversionableValueError(f"{where}: {value!r} is not a finite float")
        if st is not None:
            st.floats = True
        return value
    k = _KINDS.get(cls)
    if k is None:
        k = kind(cls)
    if k == SEQUENCE:
        return [_canonical(st, item, f"{where}[{i}]", False, split) for i, item in enumerate(value)]
    if k == MAPPING:
        for key in value:
            if not isinstance(key, str):
                if split and holds_placeholders(value):
                    raise _HOLDS_MARKER
                raise UnversionableValueError(f"{where}: dict key {key!r} is not a str")
        return {key: _canonical(st, item, f"{where}.{key}", False, split) for key, item in value.items()}
    if k == RECORD:
        plans = _check_record(st, value, cls, where, False) if st is not None else _plan(cls)[0]
        out = {}
        for name, suffix, f, field_rule, spec in plans:
            item = getattr(value, name)
            if spec is not None and scope:
                _input_paths(st, item, where + suffix, spec)
            if field_rule is NEVER or (
                field_rule is UNLESS_DEFAULT and not holds_placeholders(item) and item == field_default(f)
            ):
                if split and holds_placeholders(item):
                    raise _HOLDS_MARKER
                if st is not None and kind(type(item)) != PLAIN:
                    errors = type_errors(item, where + suffix)
                    if errors:
                        raise ScanError("config field " + "; ".join(errors))
                continue
            out[name] = _canonical(st, item, where + suffix, scope and isinstance(item, StepConfig), split)
        return out
    if k == MARKER and split:
        raise _HOLDS_MARKER
    return _canonical_leaf(st, value, where)


def _canonical_leaf(st: ConfigScan | None, value: Any, where: str) -> Any:
    """The canonical form of a leaf that is not exactly a str, int, float, bool or None."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        if not isinstance(value, enum.Enum):
            raise UnversionableValueError(f"{where}: {type(value).__name__} is not a plain int")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnversionableValueError(f"{where}: {value!r} is not a finite float")
        if st is not None:
            st.floats = True
        return float(value)
    if isinstance(value, enum.Enum):
        return _canonical(st, value.value, where, False, False)
    if isinstance(value, PurePath):
        return str(value)
    raise UnversionableValueError(
        f"{where}: cannot version a value of type {type(value).__module__}.{type(value).__qualname__} "
        f"({value!r:.60}); use None, bool, int, float, str, list, dict, a dataclass, an Enum or a Path"
    )


def canonical_value(value: Any, where: str) -> Any:
    """The canonical form of `value` (a plain JSON structure); `where` names the field in an
    UnversionableValueError."""
    return _canonical(None, value, where, False, False)


def _input_paths(st: ConfigScan, value: Any, where: str, spec: InputSpec) -> None:
    if type(value) is VersionedValue:
        value = value.value
    if isinstance(value, str):
        st.plain_inputs.append((where, spec, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _input_paths(st, item, f"{where}.{key}", spec)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _input_paths(st, item, f"{where}[{i}]", spec)
    elif value is not None and not isinstance(value, InputName) and st.input_problem is None:
        st.input_problem = f"input {where}: expected a path (or a step's output), got {type(value).__name__}"


def resolve(config: Any, routes: Any, input_path: Callable[[InputName], str], own_output: str) -> Any:
    """`config` with `versioned(x)` replaced by x, `output_path_of(step, sub)` by `input_path(marker)` joined
    with `sub`, and `this_output_path(sub)` by `own_output` joined with `sub` (paths as `ResolvedPath`s);
    `routes` are the config's from `scan`."""
    if routes is None:
        return config

    def fill(marker: Any) -> Any:
        cls = type(marker)
        if cls is VersionedValue:
            return marker.value
        if cls is InputName:
            return resolved_path(input_path(marker), marker.name)
        return resolved_path(own_output, marker.name)

    return _follow(config, routes, fill)


def _follow(value: Any, routes: Any, fill: Callable[[Any], Any]) -> Any:
    if routes is True:
        return fill(value)
    cls = type(value)
    k = _KINDS[cls]
    if k == SEQUENCE:
        out = list(value)
        for i, sub in routes:
            out[i] = _follow(value[i], sub, fill)
        return out if cls is list else tuple(out) if cls is tuple else cls(*out)
    if k == MAPPING:
        copy = dict(value)
        for key, sub in routes:
            copy[key] = _follow(value[key], sub, fill)
        return copy
    changes = {}
    for f, sub in routes:
        new = _follow(getattr(value, f.name), sub, fill)
        if f.init:
            changes[f.name] = new
    return dataclasses.replace(value, **changes)


KEEP: Any = object()
"""What a `map_nodes` function returns for a node it leaves as it is (its parts are mapped)."""


def map_nodes(value: Any, fn: Callable[..., Any], path: str | None = None) -> Any:
    """`value` with every node for which `fn` returns something other than KEEP replaced by that, depth first;
    a container is copied only when a part of it changed (a frozen dataclass by `replace`, a non-init field
    kept), an unchanged part is the very object it was.

    Without `path`, `fn(node)` is called on every node but the plain values (str, number, bool, None), and no
    path strings are built. With `path` (the name of `value`, "" at the top), `fn(path, node)` is called on
    every node, plain values included."""
    cls = type(value)
    k = _KINDS.get(cls)
    if k is None:
        k = kind(cls)
    if path is None:
        if k == PLAIN:
            return value
        new = fn(value)
    else:
        new = fn(path, value)
    if new is not KEEP:
        return new
    if k == SEQUENCE or k == MAPPING:
        olds = list(value.values()) if k == MAPPING else value
        if path is None:
            out = [map_nodes(old, fn) for old in olds]
        else:
            names = [f".{key}" for key in value] if k == MAPPING else [f"[{i}]" for i in range(len(value))]
            out = [map_nodes(old, fn, join_path(path, name)) for old, name in zip(olds, names, strict=True)]
        if all(a is b for a, b in zip(out, olds, strict=True)):
            return value
        if k == MAPPING:
            return dict(zip(value, out, strict=True))
        return cls(out) if cls is list or cls is tuple else cls(*out)
    if k == RECORD:
        changes, changed = {}, False
        for suffix, f in fields(cls):
            old = getattr(value, f.name)
            item = map_nodes(old, fn, None if path is None else join_path(path, suffix))
            if item is not old:
                changed = True
                if f.init:
                    changes[f.name] = item
        return dataclasses.replace(value, **changes) if changed else value
    return value


def rebase(config: Any, moves: dict[str, str], own_output: str) -> Any:
    """`config` with every path resolved from a folder in `moves` (a `ResolvedPath`) joined to the folder it
    maps to instead, as plain strs, and any `this_output_path()` marker left filled with `own_output`: an
    attempt's config, from the one its step was planned with."""

    def move(value: Any) -> Any:
        cls = type(value)
        if cls is ResolvedPath:
            base = moves.get(value.base, value.base)
            return join(base, value.name) if value.name else base
        if cls is OutputName:
            return join(own_output, value.name) if value.name else own_output
        return KEEP

    return map_nodes(config, move)
