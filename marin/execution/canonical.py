"""Strict canonical JSON: the byte string a step's hash is computed from.

Only values whose JSON form is unambiguous and stable across processes, machines and Python versions
may enter a hash: None, bool, int, finite float, str, list/tuple, dict with str keys, dataclasses,
Enums and Paths (a dataclass without the fields its class declares unversioned, see
marin/stepkit/config.py). Anything else (a function, a numpy scalar, an object whose repr holds a memory
address) is a TypeError naming the field, never a silent `str()`.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from pathlib import PurePath
from typing import Any

from marin.stepkit.config import in_version, items


class UnversionableValueError(TypeError):
    """A value that cannot take part in a hash; the message names the field."""


def to_canonical(value: Any, where: str) -> Any:
    """A plain JSON structure for `value`; `where` names the field for the error message."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if type(value) is not int and not isinstance(value, enum.Enum):
            raise UnversionableValueError(f"{where}: {type(value).__name__} is not a plain int")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnversionableValueError(f"{where}: {value!r} is not a finite float")
        return float(value)
    if isinstance(value, enum.Enum):
        return to_canonical(value.value, where)
    if isinstance(value, PurePath):
        return str(value)
    parts = items(value)
    if isinstance(value, list | tuple):
        return [to_canonical(item, where + suffix) for suffix, _, item in parts]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise UnversionableValueError(f"{where}: dict key {key!r} is not a str")
        return {key: to_canonical(item, where + suffix) for key, (suffix, _, item) in zip(value, parts, strict=True)}
    if parts is not None:
        return {f.name: to_canonical(item, where + suffix) for suffix, f, item in parts if in_version(f, item)}
    raise UnversionableValueError(
        f"{where}: cannot version a value of type {type(value).__module__}.{type(value).__qualname__} "
        f"({value!r:.60}); use None, bool, int, float, str, list, dict, a dataclass, an Enum or a Path"
    )


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, no NaN: equal structures give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def hash8(version: dict) -> str:
    """The first 8 hex digits of sha256 over the canonical JSON."""
    return hashlib.sha256(canonical_json(version).encode("utf-8")).hexdigest()[:8]
