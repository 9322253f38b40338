"""Whether a config's values fit their annotations: a wrong type is an error naming the field, before a
step runs (a `StepConfig` checks its own fields when built; planning checks every dataclass in a config).

A marker is checked as what it becomes (`Placeholder.standin`): `output_path_of(...)` as a str,
`versioned(x)` as x.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from collections.abc import Callable
from typing import Any

from marin.config.errors import ConfigTypeError
from marin.config.markers import Placeholder
from marin.config.parts import _ANNOTATIONS, MARKER, PLAIN, RECORD, fields, items, join_path, kind

_OPEN_HINTS = (typing.TypeVar, str, typing.ForwardRef)
_NUMBER = (int, float)


def type_error(value: Any, hint: Any) -> str | None:
    """Why `value` does not fit the annotation `hint` (None when it does). A marker is checked as what it
    becomes; int, float, str, bool, None, Literal, Enum and other classes, unions, and lists, tuples,
    sequences, sets and dicts of them are understood; any other annotation accepts every value."""
    if isinstance(value, Placeholder):
        value = value.standin()
    if isinstance(hint, type):
        if hint is float or hint is int:
            ok = isinstance(value, hint if hint is int else _NUMBER) and not isinstance(value, bool)
        else:
            ok = hint is object or isinstance(value, hint)
        return None if ok else _expected(hint, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or isinstance(hint, _OPEN_HINTS):
        return None
    if origin is typing.Annotated:
        return type_error(value, args[0])
    if origin is typing.Union or origin is types.UnionType:
        errors = [type_error(value, arm) for arm in args]
        return None if None in errors else _expected(hint, value)
    if origin is typing.Literal:
        return None if any(value == a and type(value) is type(a) for a in args) else _expected(hint, value)
    cls = origin or hint
    if not isinstance(cls, type):
        return None
    try:
        if not isinstance(value, cls) or (
            cls in (collections.abc.Sequence, collections.abc.Iterable) and isinstance(value, str)
        ):
            return _expected(hint, value)
    except TypeError:
        return None
    if not args or not isinstance(value, collections.abc.Iterable):
        return None
    if isinstance(value, collections.abc.Mapping):
        for key, item in value.items():
            problem = (len(args) == 2 and type_error(key, args[0])) or type_error(item, args[-1])
            if problem:
                return f"[{key!r}]: {problem}"
        return None
    if cls is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(value):
            return f"expected {len(args)} items ({_name(hint)}), got {len(value)}"
        element_hints = args
    else:
        element_hints = [args[0]] * len(value)
    for i, (item, item_hint) in enumerate(zip(value, element_hints, strict=False)):
        problem = type_error(item, item_hint)
        if problem:
            return f"[{i}]: {problem}"
    return None


def _name(hint: Any) -> str:
    return (
        hint.__qualname__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint).replace("typing.", "")
    )


def _expected(hint: Any, value: Any) -> str:
    return f"expected {_name(hint)}, got {type(value).__qualname__} {value!r:.60}"


def field_errors(value: Any, path: str) -> list[str]:
    """`path.field: why` for every field of the dataclass `value` whose value does not fit its annotation (a
    value of exactly the annotated class needs no further look)."""
    found: list[str] = []
    for suffix, f in fields(type(value)):
        hint, item = _ANNOTATIONS[f], getattr(value, f.name)
        problem = None if hint is Any or type(item) is hint else type_error(item, hint)
        if problem:
            found.append(join_path(path, suffix) + ("" if problem.startswith("[") else ": ") + problem)
    return found


def type_errors(config: Any, path: str = "", deep: bool = True) -> list[str]:
    """`field_errors` of a dataclass `config` and, with `deep`, of every dataclass in it (the values of markers
    included)."""
    value = config.standin() if isinstance(config, Placeholder) else config
    k = kind(type(value))
    found = field_errors(value, path) if k == RECORD else []
    if deep:
        for suffix, _, item in items(value) or ():
            item_kind = kind(type(item))
            if item_kind == MARKER:
                item_kind = kind(type(item.standin()))
            if item_kind != PLAIN:
                found += type_errors(item, join_path(path, suffix))
    return found


def checked(fn: Callable) -> Callable:
    """`fn` refusing, before it runs, an argument that does not fit its annotation: a ConfigTypeError (a TypeError) naming the
    function and the argument (for experiment helpers that compute with their arguments before any config
    checks them)."""
    import functools
    import inspect

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        hints = typing.get_type_hints(fn)
        for name, value in signature.bind(*args, **kwargs).arguments.items():
            kind = signature.parameters[name].kind
            problem = (
                None if kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD) else type_error(value, hints.get(name, Any))
            )
            if problem:
                raise ConfigTypeError(f"{fn.__name__}() argument {name}{'' if problem[0] == '[' else ': '}{problem}")
        return fn(*args, **kwargs)

    return call


__all__ = ["checked", "field_errors", "type_error", "type_errors"]
