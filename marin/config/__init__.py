"""What a step's config is, in one place.

A config is a frozen dataclass (or None) whose parts are lists, tuples, dicts, dataclasses and leaves
(`parts`). Some leaves are markers, standing for what is known only when the step is planned: a versioned
value, another step's output, this step's output (`markers`). Its class may declare which fields are
versioned, which are inputs and which are where the step writes (`declarations`, `StepConfig`); its values
must fit their annotations (`typecheck`). One walk (`walk.scan`) finds, for the planner, the versioned
values in canonical form, the inputs, the plain input paths and where the markers are; `walk.resolve`
replaces the markers by plain values; `canonical` turns a version into the bytes its hash is computed from;
`values` writes an instantiated config into a record so that it reads back exactly; `errors` makes a value a
config refuses when built (`ConfigTypeError`, `ConfigValueError`) read as one line naming the step and field.

The executor (`marin.execution`) plans and runs with this package; the step kit and the step library declare
their configs with it, without importing the executor.
"""

from __future__ import annotations

from marin.config.declarations import (
    ALWAYS,
    NEVER,
    UNLESS_DEFAULT,
    InputSpec,
    StepConfig,
    declares,
    field_default,
    in_version,
    input_field,
    input_spec,
    output_field,
    unversioned,
    version_rule,
    versioned_unless_default,
)
from marin.config.errors import ConfigError, ConfigTypeError, ConfigValueError, names_step
from marin.config.markers import (
    THIS_OUTPUT_PATH,
    InputName,
    OutputName,
    Placeholder,
    ResolvedPath,
    StepNode,
    VersionedValue,
    this_output_path,
    versioned,
)
from marin.config.parts import annotation, annotations, holds_placeholders, items, join_path
from marin.config.typecheck import checked, type_error, type_errors
from marin.config.walk import KEEP, MARKED, VERSIONED, ConfigScan, ScanError, map_nodes, rebase, resolve, scan

__all__ = [
    "ALWAYS",
    "KEEP",
    "MARKED",
    "NEVER",
    "THIS_OUTPUT_PATH",
    "UNLESS_DEFAULT",
    "VERSIONED",
    "ConfigError",
    "ConfigTypeError",
    "ConfigValueError",
    "ConfigScan",
    "ScanError",
    "InputName",
    "InputSpec",
    "OutputName",
    "Placeholder",
    "ResolvedPath",
    "StepConfig",
    "StepNode",
    "VersionedValue",
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
    "names_step",
    "output_field",
    "rebase",
    "resolve",
    "scan",
    "this_output_path",
    "type_error",
    "type_errors",
    "unversioned",
    "version_rule",
    "versioned",
    "versioned_unless_default",
]
