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

`StepConfig.__post_init__` checks the field types and runs `validate()` only when no field holds a marker;
the executor instantiates every `StepConfig` when it plans (markers replaced by plain values, which runs
`validate()`), so a bad value fails `plan`, naming the step, before anything runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from marin.config.errors import ConfigError, ConfigTypeError, ConfigValueError
from marin.config.markers import OutputName
from marin.config.parts import holds_placeholders
from marin.config.typecheck import field_errors

_KEY = "marin"

ALWAYS = "always"
NEVER = "never"
UNLESS_DEFAULT = "unless_default"


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What an input field holds, and what must be there before a step reading it may run."""

    what: str
    """For people: 'documents', 'tokenizer folder', 'tokenized dataset', ..."""
    holds_any: tuple[str, ...] = ()
    """Names of which at least one must exist inside a plain input path; empty: the path itself must exist."""
    unchecked_schemes: tuple[str, ...] = ()
    """URL schemes not checked before a run (e.g. 'https', 'hf': no I/O to the outside world when planning)."""


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
    """ALWAYS, NEVER or UNLESS_DEFAULT for a dataclass field (ALWAYS when it declares nothing)."""
    return f.metadata.get(_KEY, {}).get("version", ALWAYS)


def declares(f: dataclasses.Field) -> bool:
    """Whether the field is declared with one of the functions above (unversioned, input_field, ...)."""
    return _KEY in f.metadata


def input_spec(f: dataclasses.Field) -> InputSpec | None:
    """The field's InputSpec when it is declared with `input_field`, else None."""
    return f.metadata.get(_KEY, {}).get("input")


_DEFAULTS: dict[dataclasses.Field, Any] = {}


def field_default(f: dataclasses.Field) -> Any:
    """The field's default value (its factory's value, made once), or MISSING."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is dataclasses.MISSING:
        return dataclasses.MISSING
    found = _DEFAULTS.get(f, _DEFAULTS)
    if found is _DEFAULTS:
        found = _DEFAULTS[f] = f.default_factory()
    return found


def in_version(f: dataclasses.Field, value: Any) -> bool:
    """Whether a dataclass field holding `value` enters the version as its class declares: never when
    `unversioned` (or an `output_field`), with `versioned_unless_default` only when it differs from its default."""
    rule = version_rule(f)
    return rule != NEVER and (rule != UNLESS_DEFAULT or holds_placeholders(value) or value != field_default(f))


class StepConfig:
    """Base of the step library's configs: fields declared as above, and `validate()` on plain values.

    Subclasses are frozen dataclasses that override `validate` (and not `__post_init__`).
    """

    __slots__ = ()

    def __post_init__(self) -> None:
        errors = field_errors(self, type(self).__qualname__)
        if errors:
            raise ConfigTypeError("; ".join(errors))
        if not holds_placeholders(self):
            try:
                self.validate()
            except ConfigError:
                raise
            except ValueError as exc:
                raise ConfigValueError(*exc.args) from exc

    def validate(self) -> None:
        """Raise ValueError naming the field and the bad value; checks values only, no I/O."""
