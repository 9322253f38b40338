"""Rebuilding an experiment's steps from its record (docs/executor.md, "Rerun and verify"): the inverse of instantiation.

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

import re
from typing import Any

from marin.execution.authoring import ExecutorStep, InputName, OutputName, ResourceConfig, VersionedValue
from marin.execution.config_values import ConfigValueError, build
from marin.execution.planning import plan_steps
from marin.provenance.references import resolve_reference
from marin.stepkit.config import KEEP, map_nodes
from marin.storage.layout import ExperimentRecord, RecordFormatError, StepRecord


class RerunError(ValueError):
    """The record cannot be rebuilt; the message names the step and the field."""


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
        config = build(cls, entry.config, "", entry.config_types or {}) if cls is not None else None
    except (ImportError, ConfigValueError) as exc:
        raise RerunError(f"step {name!r}: {exc}") from None
    groups = {"DEP": entry.dependencies or [], "PSEUDO_DEP": entry.pseudo_dependencies or []}
    version = entry.version.get("config", {})
    own = entry.output_path
    met: set[str] = set()

    def mark(path: str, value: Any) -> Any:
        if path in version:
            met.add(path)
            marker = _MARKER.fullmatch(version[path]) if isinstance(version[path], str) else None
            if marker is None:
                return VersionedValue(value)
            tag, index, sub = marker.group(1), int(marker.group(2)), marker.group(3)
            try:
                dep = by_path[groups[tag][index]]
            except (IndexError, KeyError):
                raise RerunError(
                    f"step {name!r}: field {path!r} names {version[path]} but the record has "
                    "no such dependency earlier in the DAG"
                ) from None
            return InputName(dep, sub) if tag == "DEP" else InputName(dep, sub).nonblocking()
        if isinstance(value, str):
            if value == own or value.startswith(own + "/"):
                return OutputName(value[len(own) + 1 :] or None)
            if old_prefix and (value == old_prefix or value.startswith(old_prefix + "/")):
                return new_prefix + value[len(old_prefix) :]
        return KEEP

    config = map_nodes(config, mark, path="") if config is not None else None
    missing = sorted(set(version) - met)
    if missing:
        raise RerunError(f"step {name!r}: the record's config has no field {missing[0]!r} named in its version")
    return ExecutorStep(
        name,
        fn,
        config,
        description=entry.description,
        resources=ResourceConfig(**entry.resources) if entry.resources else None,
        override_output_path=_override_of(entry, new_prefix),
    )
