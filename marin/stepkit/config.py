"""How a step of the step library declares its config's fields: `marin.config`'s declarations, re-exported.

    @dataclass(frozen=True, kw_only=True)
    class TokenizeConfig(StepConfig):
        input_path: str = input_field("documents")
        output_path: str = output_field()
        workers: int = unversioned(1)

What each declaration means, and the rest of what a config is (its parts, the markers, the walk, the
canonical form), is documented in `marin.config`.
"""

from __future__ import annotations

from marin.config import (
    ALWAYS,
    KEEP,
    MARKED,
    NEVER,
    UNLESS_DEFAULT,
    VERSIONED,
    InputSpec,
    OutputName,
    Placeholder,
    StepConfig,
    annotation,
    annotations,
    checked,
    declares,
    field_default,
    holds_placeholders,
    in_version,
    input_field,
    input_spec,
    items,
    join_path,
    map_nodes,
    output_field,
    type_error,
    type_errors,
    unversioned,
    version_rule,
    versioned_unless_default,
)

__all__ = [
    "ALWAYS",
    "KEEP",
    "MARKED",
    "NEVER",
    "UNLESS_DEFAULT",
    "VERSIONED",
    "InputSpec",
    "OutputName",
    "Placeholder",
    "StepConfig",
    "annotation",
    "annotations",
    "checked",
    "declares",
    "field_default",
    "holds_placeholders",
    "in_version",
    "input_field",
    "input_spec",
    "items",
    "join_path",
    "map_nodes",
    "output_field",
    "type_error",
    "type_errors",
    "unversioned",
    "version_rule",
    "versioned_unless_default",
]
