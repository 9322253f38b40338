"""What a config is made of, and how the paths of its parts are spelled.

A config is a tree. Its containers are lists and tuples (parts `[i]`), dicts (parts `.key`) and
dataclasses (parts `.field`); everything else is a leaf: the plain values (str, int, float, bool, None),
the markers, and any other object (an Enum, a Path, something that cannot be versioned). A part's path
joins the suffixes from the top, a field at the top named without a dot: `optimizer.learning_rate`,
`layers[0]`, `inputs.web`.

Every walk over a config (planning, resolving the markers, type checks, the canonical form, the record's
encoding) asks `kind` what a node is: one answer per class, computed once.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from marin.config.markers import Placeholder

PLAIN = 0
"""str, int, float, bool, None (exactly these classes)."""
MARKER = 1
"""A `Placeholder`."""
SEQUENCE = 2
"""A list or tuple (named tuples included)."""
MAPPING = 3
"""A dict (of any subclass)."""
RECORD = 4
"""A dataclass instance."""
OTHER = 5
"""Any other object: a leaf."""

_KINDS: dict[type, int] = {str: PLAIN, int: PLAIN, float: PLAIN, bool: PLAIN, type(None): PLAIN, list: SEQUENCE}
_KINDS.update({tuple: SEQUENCE, dict: MAPPING})


def kind(cls: type) -> int:
    """What a value of class `cls` is in a config: PLAIN, MARKER, SEQUENCE, MAPPING, RECORD or OTHER."""
    found = _KINDS.get(cls)
    if found is None:
        if issubclass(cls, Placeholder):
            found = MARKER
        elif issubclass(cls, list | tuple):
            found = SEQUENCE
        elif issubclass(cls, dict):
            found = MAPPING
        elif dataclasses.is_dataclass(cls):
            found = RECORD
        else:
            found = OTHER
        _KINDS[cls] = found
    return found


_FIELDS: dict[type, tuple[tuple[str, dataclasses.Field], ...]] = {}
_ANNOTATIONS: dict[dataclasses.Field, Any] = {}


def fields(cls: type) -> tuple[tuple[str, dataclasses.Field], ...]:
    """(path suffix, field) of a dataclass's fields; also resolves their annotations (`annotation`)."""
    found = _FIELDS.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:
            hints = {}
        found = tuple((f".{f.name}", f) for f in dataclasses.fields(cls))
        for _, f in found:
            _ANNOTATIONS[f] = hints.get(f.name, Any)
        _FIELDS[cls] = found
    return found


def annotation(f: dataclasses.Field) -> Any:
    """The resolved annotation of a field of a class `fields` has seen (Any when it cannot be resolved)."""
    return _ANNOTATIONS.get(f, Any)


def annotations(cls: type) -> dict[str, Any]:
    """The resolved annotation of each field of the dataclass `cls` (Any where it cannot be resolved)."""
    return {f.name: _ANNOTATIONS[f] for _, f in fields(cls)}


def items(value: Any) -> list[tuple[str, dataclasses.Field | None, Any]] | None:
    """The parts of a container as (path suffix, field, item): `[i]` of a list or tuple, `.key` of a dict,
    `.name` of a dataclass field (with the field). None for a leaf; a marker is one."""
    k = kind(type(value))
    if k == SEQUENCE:
        return [(f"[{i}]", None, item) for i, item in enumerate(value)]
    if k == MAPPING:
        return [(f".{key}", None, item) for key, item in value.items()]
    if k == RECORD:
        return [(suffix, f, getattr(value, f.name)) for suffix, f in fields(type(value))]
    return None


def join_path(path: str, suffix: str) -> str:
    """`optimizer` + `.learning_rate`, `layers` + `[0]`; a field at the top is named without a dot."""
    return path + suffix if path or suffix[0] == "[" else suffix[1:]


def holds_placeholders(value: Any) -> bool:
    """True when `value` (a config, or anything in one) still holds a marker anywhere."""
    k = kind(type(value))
    if k == PLAIN or k == OTHER:
        return False
    if k == MARKER:
        return True
    if k == SEQUENCE:
        parts: Any = value
    elif k == MAPPING:
        parts = value.values()
    else:
        parts = [getattr(value, f.name) for _, f in fields(type(value))]
    return any(holds_placeholders(item) for item in parts)
