"""Config values in records, written so that they read back exactly: equal in value and in type.

A record holds each step's instantiated config as JSON, which people and the browser read, and from
which `marin rerun` builds the config again. JSON alone cannot tell a tuple from a list, an Enum from
its value, `float("inf")` from the string "inf", or `{1: "one"}` from `{"1": "one"}`, and a rerun that
guessed would run the step on other values than the record's, and call it a success. So a value is
written plainly when the field's annotation says how to read it back, and tagged otherwise:

    mode: Mode = Mode.FAST            ->  "fast"                   (the annotation names the Enum)
    mode: Any = Mode.FAST             ->  {"__enum__": "pkg.mod:Mode", "name": "FAST"}
    shape: tuple[int, ...] = (2, 3)   ->  [2, 3]
    extra: Any = (2, 3)               ->  {"__tuple__": [2, 3]}
    clip: float = float("inf")        ->  {"__float__": "inf"}
    names: dict[int, str] = {1: "a"}  ->  {"__dict__": [[1, "a"]]}
    root: Path = Path("/x")           ->  "/x"                     (else {"__path__": "/x", "type": ...})

A dict whose keys are not all strings, or that holds one of the tag names as a key, is written as
pairs. Nested dataclasses are written as the dict of their fields, their classes listed by field path
(`config_types`). Reading back follows the same annotations (`decode`); a value the record could not
hold (a function, a numpy array: `__unserializable__`) fails the rerun naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from pathlib import PurePath
from typing import Any

from marin.config.markers import ResolvedPath
from marin.config.parts import _KINDS, RECORD, annotation, annotations, fields, join_path, kind
from marin.provenance.references import reference_of, resolve_reference

TAGS = frozenset(("__enum__", "__float__", "__tuple__", "__dict__", "__path__", "__unserializable__"))


class ConfigValueError(ValueError):
    """A recorded value that cannot be read back exactly; the message names the field."""


def _unwrap(hint: Any) -> Any:
    """`X` of `X | None`; any other hint unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(arms) == 1:
            return arms[0]
    if typing.get_origin(hint) is typing.Annotated:
        return _unwrap(typing.get_args(hint)[0])
    return hint


def _item_hints(hint: Any, n: int) -> list[Any]:
    """The hints of the n items of a list or tuple annotated `hint` (Any where it does not say)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return list(args[:n]) + [Any] * (n - len(args))
    return [args[0] if len(args) in (1, 2) else Any] * n


def encode(value: Any, hint: Any = Any, path: str = "", types_out: dict[str, str] | None = None) -> Any:
    """The JSON form of `value`, a value of a field annotated `hint`; nested dataclasses' classes go to
    `types_out` by path."""
    cls = type(value)
    if value is None or cls is str or cls is bool or cls is int:
        return value
    if cls is ResolvedPath:
        return str(value)
    if cls is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    plain = _unwrap(hint)
    if isinstance(value, enum.Enum):
        if plain is cls:
            return encode(value.value, Any, path, types_out)
        return {"__enum__": reference_of(cls), "name": value.name}
    if isinstance(value, PurePath):
        return str(value) if plain is cls else {"__path__": str(value), "type": reference_of(cls)}
    k = _KINDS.get(cls)
    if k is None:
        k = kind(cls)
    if cls is list or cls is tuple:
        hints = _item_hints(plain, len(value))
        out = [encode(item, hints[i], f"{path}[{i}]", types_out) for i, item in enumerate(value)]
        tuple_hint = typing.get_origin(plain) is tuple or plain is tuple
        return {"__tuple__": out} if cls is tuple and not tuple_hint else out
    if cls is dict:
        args = typing.get_args(plain)
        key_hint, value_hint = args if len(args) == 2 else (Any, Any)
        parts = [(key, encode(item, value_hint, join_path(path, f".{key}"), types_out)) for key, item in value.items()]
        if all(type(key) is str and key not in TAGS for key, _ in parts):
            return dict(parts)
        return {"__dict__": [[encode(key, key_hint), item] for key, item in parts]}
    if k == RECORD:
        if types_out is not None and path:
            types_out[path] = reference_of(cls)
        return {
            f.name: encode(getattr(value, f.name), annotation(f), join_path(path, suffix), types_out)
            for suffix, f in fields(cls)
        }
    return {"__unserializable__": f"{cls.__module__}.{cls.__qualname__}", "repr": repr(value)[:200]}


def decode(data: Any, hint: Any, path: str, config_types: dict[str, str]) -> Any:
    """The value `encode` wrote as `data` for a field annotated `hint` at `path`; ConfigValueError naming the
    field when it cannot be read back exactly."""
    where = path or "<config>"
    if data is None:
        return None
    plain = _unwrap(hint)
    if isinstance(data, dict):
        tag = next((key for key in data if key in TAGS), None)
        if tag is not None:
            return _decode_tagged(tag, data, plain, path, config_types)
        cls = _class(config_types[path], where) if path in config_types else plain
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            return build(cls, data, path, config_types)
        value_hint = typing.get_args(plain)[1] if len(typing.get_args(plain)) == 2 else Any
        return {key: decode(item, value_hint, join_path(path, f".{key}"), config_types) for key, item in data.items()}
    if isinstance(data, list):
        hints = _item_hints(plain, len(data))
        out = [
            decode(item, h, f"{path}[{i}]", config_types) for i, (item, h) in enumerate(zip(data, hints, strict=True))
        ]
        return tuple(out) if typing.get_origin(plain) is tuple or plain is tuple else out
    if isinstance(plain, type) and issubclass(plain, enum.Enum | PurePath) and not isinstance(data, plain):
        try:
            return plain(data)
        except (ValueError, TypeError) as exc:
            raise ConfigValueError(f"field {where!r}: {data!r} is not a {plain.__qualname__} ({exc})") from None
    return data


def _decode_tagged(tag: str, data: dict, hint: Any, path: str, config_types: dict[str, str]) -> Any:
    where = path or "<config>"
    if tag == "__unserializable__":
        raise ConfigValueError(
            f"field {where!r} held a {data[tag]} ({data.get('repr', '')[:60]}) the record cannot restore"
        )
    if tag == "__float__":
        return float(data[tag])
    if tag == "__enum__":
        cls = _class(data[tag], where)
        try:
            return cls[data["name"]]
        except KeyError:
            raise ConfigValueError(f"field {where!r}: {cls.__qualname__} has no member {data['name']!r}") from None
    if tag == "__path__":
        return _class(data["type"], where)(data[tag])
    if tag == "__tuple__":
        return tuple(decode(data[tag], hint, path, config_types))
    args = typing.get_args(hint)
    key_hint, value_hint = args if len(args) == 2 else (Any, Any)
    out = {}
    for key_data, item in data[tag]:
        key = _hashable(decode(key_data, key_hint, where, {}))
        out[key] = decode(item, value_hint, join_path(path, f".{key}"), config_types)
    return out


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def _class(ref: str, where: str) -> Any:
    try:
        return resolve_reference(ref)
    except ImportError as exc:
        raise ConfigValueError(f"field {where!r}: {exc}") from None


def build(cls: type, data: Any, path: str, config_types: dict[str, str]) -> Any:
    """An instance of the dataclass `cls` from its recorded fields."""
    if not isinstance(data, dict):
        raise ConfigValueError(f"field {path or '<config>'!r} should be a {cls.__qualname__} object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigValueError(f"the record's config has field(s) {unknown} that {cls.__qualname__} no longer has")
    hints = annotations(cls)
    kwargs = {
        name: decode(data[name], hints[name], join_path(path, f".{name}"), config_types)
        for name, f in fields.items()
        if name in data and f.init
    }
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigValueError(f"the record's config no longer fits {cls.__qualname__}: {exc}") from None
