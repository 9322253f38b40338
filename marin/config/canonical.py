"""Strict canonical JSON: the byte string a step's hash is computed from.

Only values whose JSON form is unambiguous and stable across processes, machines and Python versions
may enter a hash: None, bool, int, finite float, str, list/tuple, dict with str keys, dataclasses,
Enums and Paths (a dataclass without the fields its class declares unversioned). The canonical form of a
value is the walk's (`marin.config.walk`); anything else (a function, a numpy scalar, an object whose repr
holds a memory address) is an UnversionableValueError naming the field, never a silent `str()`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

from marin.config.walk import UnversionableValueError
from marin.config.walk import canonical_value as to_canonical

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, no NaN: equal structures give equal strings."""
    return _ENCODER.encode(value)


def hash8(version: dict, floats: bool = True) -> str:
    """The first 8 hex digits of sha256 over the canonical JSON.

    `floats=False` says the version holds no float (the walk notes them): then orjson writes the same bytes
    as `canonical_json`, fifteen times faster (strings, ints, lists and sorted keys are spelled alike; a float
    is not: Python writes 1e-05 where orjson writes 0.00001, and an int beyond 64 bits falls back here too)."""
    if not floats:
        try:
            data = orjson.dumps(version, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            data = _ENCODER.encode(version).encode("utf-8")
    else:
        data = _ENCODER.encode(version).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:8]


__all__ = ["UnversionableValueError", "canonical_json", "hash8", "to_canonical"]
