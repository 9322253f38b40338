"""What a step's config declares about its own fields: which are versioned, which are inputs, its checks.

A step's hash covers its version (docs/executor.md, "Identity"). Which fields belong in it is a property of the
step, not of the experiment helper that happens to build its config, so the config class says it:

    @dataclass(frozen=True, kw_only=True)
    class TokenizeConfig(StepConfig):
        input_path: str = input_field("documents")
        tokenizer: str = input_field("tokenizer folder", holds_any=("tokenizer.json", "tokenizer_config.json"))
        output_path: str = output_field()
        validation_fraction: float = 0.05                  # versioned: every field is, unless declared
        skip_bad_documents: bool = versioned_unless_default(False)
        workers: int = unversioned(1)

        def validate(self) -> None:
            if not 0.0 <= self.validation_fraction < 1.0: raise ValueError(...)

- Every field of a `StepConfig` is versioned, unless declared `unversioned` (it cannot change the
  output: worker counts, W&B settings) or `output_field` (where the step writes).
- `versioned_unless_default(default)`: versioned only when it differs from its default, so a field
  added after outputs existed leaves their hashes as they were.
- `input_field(what)`: a path the step reads. Another step's output enters the version as `DEP[i]`,
  a plain path as itself; None is no input. Before anything runs, the executor checks that every plain
  input exists (and holds one of `holds_any`), naming the step and the field when it does not.

A config that is not a `StepConfig` declares nothing; for it only the experiment's markers count
(`versioned(...)`, `output_path_of(...)`), as in Marin.

This module is a layer of its own below the step library and the executor: the step library declares
with it, the executor reads it, and neither imports the other. The executor's markers subclass
`Placeholder`, so a config can tell that it is not instantiated yet: `StepConfig.__post_init__` runs
`validate()` only when no field holds a placeholder. The executor instantiates every config when it
plans (markers replaced by plain values, which runs `validate()`), so a bad value fails `plan`,
naming the step, before anything runs.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

_KEY = "marin"

ALWAYS = "always"
NEVER = "never"
UNLESS_DEFAULT = "unless_default"


class Placeholder:
    """Base of the executor's markers (versioned, output_path_of, this_output_path): not a plain value yet."""

    __slots__ = ()

    def standin(self) -> Any:
        """A plain value of what the marker becomes, for type checks (a path marker: a str)."""
        return ""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What an input field holds, and what must be there before a step reading it may run."""

    what: str
    """For people: 'documents', 'tokenizer folder', 'tokenized dataset', ..."""
    holds_any: tuple[str, ...] = ()
    """Names of which at least one must exist inside a plain input path; empty: the path itself must exist."""
    unchecked_schemes: tuple[str, ...] = ()
    """URL schemes not checked before a run (e.g. 'https', 'hf': no I/O to the outside world when planning)."""


@dataclasses.dataclass(frozen=True)
class OutputName(Placeholder):
    """This step's own output folder (or a path inside it): `this_output_path()`, and the default of an
    `output_field()`."""

    name: str | None = None
    """A sub-path under this step's output folder, or None for the folder itself."""


def _field(meta: dict, default: Any, default_factory: Any) -> Any:
    kwargs: dict[str, Any] = {"metadata": {_KEY: meta}}
    if default is not dataclasses.MISSING:
        kwargs["default"] = default
    if default_factory is not dataclasses.MISSING:
        kwargs["default_factory"] = default_factory
    return dataclasses.field(**kwargs)


def unversioned(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A field that never enters the version: it cannot change the step's output (workers, logging)."""
    return _field({"version": NEVER}, default, default_factory)


def versioned_unless_default(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A field in the version only when it differs from its default (added without changing old hashes)."""
    if default is dataclasses.MISSING and default_factory is dataclasses.MISSING:
        raise TypeError("versioned_unless_default() needs a default")
    return _field({"version": UNLESS_DEFAULT}, default, default_factory)


def output_field(default: Any = OutputName()) -> Any:
    """Where the step writes: by default the step's output folder, filled in by the executor; never versioned."""
    return _field({"version": NEVER, "output": True}, default, dataclasses.MISSING)


def input_field(
    what: str,
    *,
    holds_any: Sequence[str] = (),
    unchecked_schemes: Sequence[str] = (),
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    unless_default: bool = False,
) -> Any:
    """A path (or a dict/list of paths) the step reads: versioned (with `unless_default`, only when it differs
    from its default, so that a field added later leaves old hashes alone), and checked to exist before a run."""
    spec = InputSpec(what, tuple(holds_any), tuple(unchecked_schemes))
    return _field({"version": UNLESS_DEFAULT if unless_default else ALWAYS, "input": spec}, default, default_factory)


def version_rule(f: dataclasses.Field) -> str:
    """ALWAYS, NEVER or UNLESS_DEFAULT for a field of a StepConfig."""
    return f.metadata.get(_KEY, {}).get("version", ALWAYS)


def declares(f: dataclasses.Field) -> bool:
    """Whether the field is declared with one of the functions above (unversioned, input_field, ...)."""
    return _KEY in f.metadata


def input_spec(f: dataclasses.Field) -> InputSpec | None:
    """The field's InputSpec when it is declared with `input_field`, else None."""
    return f.metadata.get(_KEY, {}).get("input")


def in_version(f: dataclasses.Field, value: Any) -> bool:
    """Whether a dataclass field holding `value` enters the version as its class declares: never when
    `unversioned` (or an `output_field`), with `versioned_unless_default` only when it differs from its default."""
    rule = version_rule(f)
    return rule != NEVER and (rule != UNLESS_DEFAULT or holds_placeholders(value) or value != field_default(f))


def field_default(f: dataclasses.Field) -> Any:
    """The field's default value (calling its factory), or MISSING."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


VERSIONED = "versioned"
"""The rule of a node whose value enters the version (whole, or by its parts when it holds markers)."""
MARKED = "marked"
"""The rule of a node of which only the markers count: `versioned(...)` values and inputs."""

_PLAIN = frozenset((str, int, float, bool, type(None)))
_FIELDS: dict[type, tuple[tuple[str, dataclasses.Field], ...]] = {}
_ANNOTATIONS: dict[dataclasses.Field, Any] = {}


def _fields(cls: type) -> tuple[tuple[str, dataclasses.Field], ...]:
    """(path suffix, field) of a dataclass's fields; also resolves their annotations (`annotation`)."""
    found = _FIELDS.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:
            hints = {}
        found = _FIELDS[cls] = tuple((f".{f.name}", f) for f in dataclasses.fields(cls))
        for _, f in found:
            _ANNOTATIONS[f] = hints.get(f.name, Any)
    return found


def annotation(f: dataclasses.Field) -> Any:
    """The resolved annotation of a field met by `items` or `walk` (Any when it cannot be resolved)."""
    return _ANNOTATIONS.get(f, Any)


def annotations(cls: type) -> dict[str, Any]:
    """The resolved annotation of each field of the dataclass `cls` (Any where it cannot be resolved)."""
    return {f.name: _ANNOTATIONS[f] for _, f in _fields(cls)}


def items(value: Any) -> list[tuple[str, dataclasses.Field | None, Any]] | None:
    """The parts of a container as (path suffix, field, item): `[i]` of a list or tuple, `.key` of a dict,
    `.name` of a dataclass field (with the field). None for a leaf; a marker is one.

    The one place that says what a config is made of and how the paths of its parts are spelled."""
    cls = type(value)
    if cls in _PLAIN or isinstance(value, Placeholder):
        return None
    if isinstance(value, list | tuple):
        return [(f"[{i}]", None, item) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return [(f".{key}", None, item) for key, item in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(suffix, f, getattr(value, f.name)) for suffix, f in _fields(cls)]
    return None


def join_path(path: str, suffix: str) -> str:
    """`optimizer` + `.learning_rate`, `layers` + `[0]`; a field at the top is named without a dot."""
    return path + suffix if path or suffix[0] == "[" else suffix[1:]


Visit = Callable[[str, "dataclasses.Field | None", Any, str], bool]


def walk(config: Any, visit: Visit, path: str = "") -> None:
    """Calls `visit(path, field, value, rule)` on `config` and, depth first, on the parts of every node whose
    visit returned True, but for the plain values (str, number, bool, None) that do not enter the version.

    The rule says how a node enters the step's version: a `StepConfig` versions each field its class does
    not declare otherwise, and every part of a versioned value is versioned (as its own class declares);
    any other config versions only its markers (Marin's rule)."""
    rule = VERSIONED if isinstance(config, StepConfig) else MARKED
    if visit(path, None, config, rule) and type(config) not in _PLAIN:
        _walk_parts(config, visit, path, rule)


def _walk_parts(value: Any, visit: Visit, path: str, rule: str) -> None:
    """Visits the parts of a node whose visit returned True, and walks on into those whose visit does too
    (the visit is called here, not one call deeper: planning walks every config, and most parts are leaves).
    A dataclass field's rule is the one its declaration gives inside a versioned node."""
    for suffix, f, item in items(value) or ():
        item_rule = rule
        if f is not None and rule == VERSIONED and (not in_version(f, item) or (item is None and input_spec(f))):
            item_rule = MARKED
        plain = type(item) in _PLAIN
        if item_rule == MARKED and plain:
            continue
        sub = path + suffix if path or suffix[0] == "[" else suffix[1:]
        if visit(sub, f, item, item_rule) and not plain:
            _walk_parts(item, visit, sub, item_rule)


def holds_placeholders(value: Any) -> bool:
    """True when `value` (a config, or anything in one) still holds an executor marker anywhere."""
    if isinstance(value, Placeholder):
        return True
    return any(holds_placeholders(item) for _, _, item in items(value) or ())


KEEP: Any = object()
"""What a `map_nodes` function returns for a node it leaves as it is (its parts are mapped)."""


def map_nodes(value: Any, fn: Callable[..., Any], path: str | None = None) -> Any:
    """`value` with every node for which `fn` returns something other than KEEP replaced by that, depth first;
    a container is copied only when a part of it changed (a frozen dataclass by `replace`, a non-init field
    kept), an unchanged part is the very object it was.

    Without `path`, `fn(node)` is called on every node but the plain values (str, number, bool, None), and no
    path strings are built: resolving a step's markers (once, for its record and its attempts) and moving an
    attempt's paths to its own folder are a large part of the work per step. With `path` (the name of `value`, ""
    at the top), `fn(path, node)` is called on every node, plain values included."""
    cls = type(value)
    if path is None:
        if cls in _PLAIN:
            return value
        new = fn(value)
    else:
        new = fn(path, value)
    if new is not KEEP:
        return new
    if cls in _PLAIN or isinstance(value, Placeholder):
        return value
    if isinstance(value, list | tuple | dict):
        olds = list(value.values()) if isinstance(value, dict) else value
        if path is None:
            out = [map_nodes(old, fn) for old in olds]
        else:
            names = [f".{k}" for k in value] if isinstance(value, dict) else [f"[{i}]" for i in range(len(value))]
            out = [map_nodes(old, fn, join_path(path, name)) for old, name in zip(olds, names, strict=True)]
        if all(a is b for a, b in zip(out, olds, strict=True)):
            return value
        if isinstance(value, dict):
            return dict(zip(value, out, strict=True))
        return cls(out) if cls is list or cls is tuple else cls(*out)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes, changed = {}, False
        for suffix, f in _fields(cls):
            old = getattr(value, f.name)
            item = map_nodes(old, fn, None if path is None else join_path(path, suffix))
            if item is not old:
                changed = True
                if f.init:
                    changes[f.name] = item
        return dataclasses.replace(value, **changes) if changed else value
    return value


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


def type_errors(config: Any, path: str = "", deep: bool = True) -> list[str]:
    """`path: why` for every field of a dataclass `config` (and, with `deep`, of every dataclass in it, the
    values of markers included) whose value does not fit its annotation. Planning checks every node: the
    class's annotations are resolved once, and a value of exactly the annotated class needs no further look."""
    found: list[str] = []
    value = config.standin() if isinstance(config, Placeholder) else config
    cls = type(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for suffix, f in _fields(cls):
            hint, item = _ANNOTATIONS[f], getattr(value, f.name)
            problem = None if hint is Any or type(item) is hint else type_error(item, hint)
            if problem:
                found.append(join_path(path, suffix) + ("" if problem.startswith("[") else ": ") + problem)
    if deep:
        for suffix, _, item in items(value) or ():
            if type(item.standin() if isinstance(item, Placeholder) else item) not in _PLAIN:
                found += type_errors(item, join_path(path, suffix))
    return found


def checked(fn: Callable) -> Callable:
    """`fn` refusing, before it runs, an argument that does not fit its annotation: a TypeError naming the
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
                raise TypeError(f"{fn.__name__}() argument {name}{'' if problem[0] == '[' else ': '}{problem}")
        return fn(*args, **kwargs)

    return call


class StepConfig:
    """Base of the step library's configs: fields declared as above, and `validate()` on plain values.

    Subclasses are frozen dataclasses that override `validate` (and not `__post_init__`).
    """

    __slots__ = ()

    def __post_init__(self) -> None:
        errors = type_errors(self, type(self).__qualname__, deep=False)
        if errors:
            raise TypeError("; ".join(errors))
        if not holds_placeholders(self):
            self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field and the bad value; checks values only, no I/O."""
