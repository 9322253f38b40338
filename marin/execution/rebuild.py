"""Rebuilding an experiment's steps from its record (DESIGN.md §9): the inverse of instantiation.

The record names each step's function and config type by import path (or by script path for
functions defined in the experiment file), holds the instantiated config, and the version that was
hashed. Rebuilding reverses instantiation: a field the version lists as "DEP[i]/sub" becomes
`output_path_of(dependency, "sub")` again, a versioned field becomes `versioned(value)`, a path inside
the step's own output becomes `this_output_path(...)`, and any other path under the record's prefix
is re-rooted to the new prefix. A step recorded at a fixed output path (`override_output_path`, seen as a
`relative_output_path` other than `name-hash`) gets it back, under the new prefix. The rebuilt steps must
hash and place exactly as recorded; a step that does not is an error naming it (its code or config type
changed in a way that changes identity). Which code the functions come from is `rerun.py`'s concern.
"""

from __future__ import annotations

import dataclasses
import re
import types as types_module
import typing
from typing import Any

from marin.execution.authoring import ExecutorStep, InputName, OutputName, ResourceConfig, VersionedValue
from marin.execution.planning import plan_steps
from marin.execution.references import resolve_reference
from marin.storage.layout import ExperimentRecord, RecordFormatError, StepRecord

_TOKEN = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


class RerunError(ValueError):
    """The record cannot be rebuilt; the message names the step and the field."""


def _tokens(path: str) -> list[str | int]:
    out: list[str | int] = []
    for index, key in _TOKEN.findall(path):
        out.append(int(index) if index else key)
    return out


def _set_at(data: Any, path: str, value: Any, step: str) -> None:
    tokens = _tokens(path)
    node = data
    try:
        for token in tokens[:-1]:
            node = node[token]
        node[tokens[-1]] = value
    except (KeyError, IndexError, TypeError):
        raise RerunError(f"step {step!r}: the record's config has no field {path!r} named in its version") from None


def _mark_paths(value: Any, own_output: str, old_prefix: str, new_prefix: str) -> Any:
    if isinstance(value, str):
        if value == own_output:
            return OutputName(None)
        if value.startswith(own_output + "/"):
            return OutputName(value[len(own_output) + 1 :])
        if old_prefix and (value == old_prefix or value.startswith(old_prefix + "/")):
            return new_prefix + value[len(old_prefix) :]
        return value
    if isinstance(value, list):
        return [_mark_paths(v, own_output, old_prefix, new_prefix) for v in value]
    if isinstance(value, dict):
        return {k: _mark_paths(v, own_output, old_prefix, new_prefix) for k, v in value.items()}
    return value


def _build(cls: type, data: Any, types: dict[str, str], path: str, step: str) -> Any:
    """A dataclass of type `cls` from recorded JSON, nested dataclasses typed by `types` or annotations."""
    if not isinstance(data, dict):
        raise RerunError(f"step {step!r}: field {path or '<config>'!r} should be a {cls.__name__} object")
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise RerunError(
            f"step {step!r}: the record's config has field(s) {unknown} that {cls.__qualname__} no longer has"
        )
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        if not f.init:
            continue
        sub = f"{path}.{name}" if path else name
        kwargs[name] = _value(data[name], hints.get(name), types, sub, step)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise RerunError(f"step {step!r}: the record's config no longer fits {cls.__qualname__}: {exc}") from None


def _value(value: Any, hint: Any, types: dict[str, str], path: str, step: str) -> Any:
    if isinstance(value, dict) and "__unserializable__" in value:
        raise RerunError(
            f"step {step!r}: field {path!r} held a {value['__unserializable__']} the record cannot restore"
        )
    if isinstance(value, VersionedValue):
        return VersionedValue(_value(value.value, hint, types, path, step))
    if path in types and isinstance(value, dict):
        try:
            cls = resolve_reference(types[path])
        except ImportError as exc:
            raise RerunError(f"step {step!r}: field {path!r}: {exc}") from None
        return _build(cls, value, types, path, step)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return _build(hint, value, types, path, step)
    if isinstance(value, list):
        items = [_value(v, _element_hint(hint), types, f"{path}[{i}]", step) for i, v in enumerate(value)]
        return tuple(items) if typing.get_origin(_unwrap_optional(hint)) is tuple else items
    if isinstance(value, dict):
        return {k: _value(v, None, types, f"{path}.{k}", step) for k, v in value.items()}
    return value


def _unwrap_optional(hint: Any) -> Any:
    """`X` of `X | None` (a hint of one type otherwise unchanged)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types_module.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _element_hint(hint: Any) -> Any:
    """The element type of `list[X]` (or `X | None` of it); None when unknown or mixed."""
    args = typing.get_args(_unwrap_optional(hint))
    return args[0] if len(args) == 1 else None


def _override_of(entry: StepRecord, new_prefix: str) -> str | None:
    """The recorded fixed output path (`override_output_path`), relative to the prefix; None for `name-hash`."""
    name, rel = entry.name, entry.relative_output_path
    if rel is None or rel == entry.identity:
        return None
    if rel.startswith("/") or "://" in rel:
        raise RerunError(
            f"step {name!r}: recorded at {rel!r}, outside the record's prefix; a rerun into {new_prefix} "
            "would write into (or reuse) that run's output, so it cannot rebuild this step"
        )
    return rel


def rebuild_steps(record: dict, new_prefix: str) -> list[ExecutorStep]:
    """ExecutorSteps equal in identity to the record's, with paths re-rooted to `new_prefix`."""
    try:
        typed = ExperimentRecord.from_json(record)
        entries = typed.step_records()
    except RecordFormatError as exc:
        raise RerunError(str(exc)) from None
    old_prefix = typed.prefix or ""
    by_path: dict[str, ExecutorStep] = {}
    steps: list[ExecutorStep] = []
    for entry in entries:
        steps.append(_rebuild_one(entry, by_path, old_prefix, new_prefix))
        by_path[entry.output_path] = steps[-1]
    planned = plan_steps(steps, new_prefix)
    for entry, step in zip(entries, steps, strict=True):
        got = planned[step]
        if got.hash != entry.hash or got.version != entry.version:
            raise RerunError(
                f"step {entry.name!r}: rebuilt version hashes to {got.hash}, the record says {entry.hash} "
                f"(recorded {entry.version} vs rebuilt {got.version})"
            )
        if entry.relative_output_path is not None and got.relative_output_path != entry.relative_output_path:
            raise RerunError(
                f"step {entry.name!r}: rebuilt output path {got.relative_output_path!r}, "
                f"the record says {entry.relative_output_path!r}"
            )
    return steps


_MARKER = re.compile(r"(DEP|PSEUDO_DEP)\[(\d+)\](?:/(.*))?")


def _rebuild_one(entry: StepRecord, by_path: dict[str, ExecutorStep], old_prefix: str, new_prefix: str) -> ExecutorStep:
    name = entry.name
    try:
        fn = resolve_reference(entry.fn)
        cls = resolve_reference(entry.config_type) if entry.config_type is not None else None
    except ImportError as exc:
        raise RerunError(f"step {name!r}: {exc}") from None
    data = _mark_paths(entry.config, entry.output_path, old_prefix, new_prefix)
    groups = {"DEP": entry.dependencies or [], "PSEUDO_DEP": entry.pseudo_dependencies or []}
    for field_path, recorded in entry.version.get("config", {}).items():
        marker = _MARKER.fullmatch(recorded) if isinstance(recorded, str) else None
        if marker:
            tag, index, sub = marker.group(1), int(marker.group(2)), marker.group(3)
            try:
                dep = by_path[groups[tag][index]]
            except (IndexError, KeyError):
                raise RerunError(
                    f"step {name!r}: field {field_path!r} names {recorded} but the record has "
                    "no such dependency earlier in the DAG"
                ) from None
            inp = InputName(dep, sub)
            _set_at(data, field_path, inp if tag == "DEP" else inp.nonblocking(), name)
        else:
            _set_at(data, field_path, VersionedValue(recorded), name)
    config = _build(cls, data, entry.config_types or {}, "", name) if cls is not None else None
    return ExecutorStep(
        name,
        fn,
        config,
        description=entry.description,
        resources=ResourceConfig(**entry.resources) if entry.resources else None,
        override_output_path=_override_of(entry, new_prefix),
    )
