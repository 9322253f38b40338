"""Rebuilding an experiment from its record, and running it into another prefix (DESIGN.md §9).

The record names each step's function and config type by import path (or by script path for
functions defined in the experiment file), holds the instantiated config, and the version that was
hashed. Rebuilding reverses instantiation: a field the version lists as "DEP[i]/sub" becomes
`output_path_of(dependency, "sub")` again, a versioned field becomes `versioned(value)`, a path inside
the step's own output becomes `this_output_path(...)`, and any other path under the record's prefix
is re-rooted to the new prefix. A step recorded at a fixed output path (`override_output_path`, seen as a
`relative_output_path` other than `name-hash`) gets it back, under the new prefix. The rebuilt steps must
hash and place exactly as recorded; a step that does not is an error naming it (its code or config type
changed in a way that changes identity).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import typing
from typing import Any

from marin.execution.authoring import ExecutorStep, InputName, OutputName, ResourceConfig, VersionedValue
from marin.execution.inspect_prefix import load_record
from marin.execution.planning import plan_steps
from marin.execution.records import git_state, installed_packages
from marin.execution.references import resolve_reference, ship_scripts_by_value

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


class RerunError(ValueError):
    """The record cannot be rebuilt; the message names the step and the field."""


def _tokens(path: str) -> list[str | int]:
    out: list[str | int] = []
    for index, key in _TOKEN.findall(path):
        out.append(int(index) if index else key)
    return out


def _set_at(data: Any, path: str, value: Any, step: str) -> None:
    tokens = _tokens(path)
    node = data
    try:
        for token in tokens[:-1]:
            node = node[token]
        node[tokens[-1]] = value
    except (KeyError, IndexError, TypeError):
        raise RerunError(f"step {step!r}: the record's config has no field {path!r} named in its version") from None


def _mark_paths(value: Any, own_output: str, old_prefix: str, new_prefix: str) -> Any:
    if isinstance(value, str):
        if value == own_output:
            return OutputName(None)
        if value.startswith(own_output + "/"):
            return OutputName(value[len(own_output) + 1 :])
        if old_prefix and (value == old_prefix or value.startswith(old_prefix + "/")):
            return new_prefix + value[len(old_prefix) :]
        return value
    if isinstance(value, list):
        return [_mark_paths(v, own_output, old_prefix, new_prefix) for v in value]
    if isinstance(value, dict):
        return {k: _mark_paths(v, own_output, old_prefix, new_prefix) for k, v in value.items()}
    return value


def _build(cls: type, data: Any, types: dict[str, str], path: str, step: str) -> Any:
    """A dataclass of type `cls` from recorded JSON, nested dataclasses typed by `types` or annotations."""
    if not isinstance(data, dict):
        raise RerunError(f"step {step!r}: field {path or '<config>'!r} should be a {cls.__name__} object")
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise RerunError(
            f"step {step!r}: the record's config has field(s) {unknown} that {cls.__qualname__} no longer has"
        )
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        if not f.init:
            continue
        sub = f"{path}.{name}" if path else name
        kwargs[name] = _value(data[name], hints.get(name), types, sub, step)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise RerunError(f"step {step!r}: the record's config no longer fits {cls.__qualname__}: {exc}") from None


def _value(value: Any, hint: Any, types: dict[str, str], path: str, step: str) -> Any:
    if isinstance(value, dict) and "__unserializable__" in value:
        raise RerunError(
            f"step {step!r}: field {path!r} held a {value['__unserializable__']} the record cannot restore"
        )
    if isinstance(value, VersionedValue):
        return VersionedValue(_value(value.value, hint, types, path, step))
    if path in types and isinstance(value, dict):
        try:
            cls = resolve_reference(types[path])
        except ImportError as exc:
            raise RerunError(f"step {step!r}: field {path!r}: {exc}") from None
        return _build(cls, value, types, path, step)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return _build(hint, value, types, path, step)
    if isinstance(value, list) and typing.get_origin(hint) is tuple:
        return tuple(value)
    return value


def _override_of(entry: dict, new_prefix: str) -> str | None:
    """The recorded fixed output path (`override_output_path`), relative to the prefix; None for `name-hash`."""
    name, rel = entry.get("name", "?"), entry.get("relative_output_path")
    if rel is None or rel == f"{name}-{entry.get('hash')}":
        return None
    if rel.startswith("/") or "://" in rel:
        raise RerunError(
            f"step {name!r}: recorded at {rel!r}, outside the record's prefix; a rerun into {new_prefix} "
            "would write into (or reuse) that run's output, so it cannot rebuild this step"
        )
    return rel


def rebuild_steps(record: dict, new_prefix: str) -> list[ExecutorStep]:
    """ExecutorSteps equal in identity to the record's, with paths re-rooted to `new_prefix`."""
    old_prefix = record.get("prefix") or ""
    by_path: dict[str, ExecutorStep] = {}
    steps: list[ExecutorStep] = []
    for entry in record["steps"]:
        name = entry.get("name", "?")
        try:
            fn = resolve_reference(entry["fn"])
            cls = resolve_reference(entry["config_type"])
        except KeyError as exc:
            raise RerunError(f"step {name!r}: the record lacks {exc}") from None
        except ImportError as exc:
            raise RerunError(f"step {name!r}: {exc}") from None
        version = entry["version"]
        data = _mark_paths(entry["config"], entry["output_path"], old_prefix, new_prefix)
        groups = {"DEP": entry.get("dependencies", []), "PSEUDO_DEP": entry.get("pseudo_dependencies", [])}
        for field_path, recorded in version.get("config", {}).items():
            marker = (
                re.fullmatch(r"(DEP|PSEUDO_DEP)\[(\d+)\](?:/(.*))?", recorded) if isinstance(recorded, str) else None
            )
            if marker:
                tag, index, sub = marker.group(1), int(marker.group(2)), marker.group(3)
                try:
                    dep = by_path[groups[tag][index]]
                except (IndexError, KeyError):
                    raise RerunError(
                        f"step {name!r}: field {field_path!r} names {recorded} but the record has "
                        "no such dependency earlier in the DAG"
                    ) from None
                inp = InputName(dep, sub)
                _set_at(data, field_path, inp if tag == "DEP" else inp.nonblocking(), name)
            else:
                _set_at(data, field_path, VersionedValue(recorded), name)
        config = _build(cls, data, entry.get("config_types", {}), "", name)
        resources = ResourceConfig(**entry["resources"]) if entry.get("resources") else None
        step = ExecutorStep(
            name,
            fn,
            config,
            description=entry.get("description"),
            resources=resources,
            override_output_path=_override_of(entry, new_prefix),
        )
        by_path[entry["output_path"]] = step
        steps.append(step)
    planned = plan_steps(steps, new_prefix)
    for entry, step in zip(record["steps"], steps, strict=True):
        got = planned[step]
        if got.hash != entry["hash"] or got.version != entry["version"]:
            raise RerunError(
                f"step {entry['name']!r}: rebuilt version hashes to {got.hash}, the record says {entry['hash']} "
                f"(recorded {entry['version']} vs rebuilt {got.version})"
            )
        if "relative_output_path" in entry and got.relative_output_path != entry["relative_output_path"]:
            raise RerunError(
                f"step {entry['name']!r}: rebuilt output path {got.relative_output_path!r}, "
                f"the record says {entry['relative_output_path']!r}"
            )
    return steps


def environment_warnings(record: dict) -> list[str]:
    """How this checkout and environment differ from the record's."""
    warnings = []
    recorded_commit = (record.get("git") or {}).get("commit")
    now = git_state()
    if recorded_commit and now.get("commit") and recorded_commit != now["commit"]:
        warnings.append(f"git commit differs: record {recorded_commit[:12]}, here {now['commit'][:12]}")
    if now.get("dirty"):
        warnings.append("this checkout has uncommitted changes")
    recorded = (record.get("environment") or {}).get("packages") or {}
    here = installed_packages()
    changed = sorted(k for k in recorded if here.get(k) != recorded[k])
    if changed:
        shown = ", ".join(f"{k} {recorded[k]} -> {here.get(k, 'absent')}" for k in changed[:10])
        more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
        warnings.append(f"package versions differ: {shown}{more}")
    return warnings


def rerun_main(record_path: str, prefix: str, args: list[str], code: str = "recorded") -> int:
    """`marin rerun RECORD --prefix P [--dry_run] [--run_only ...] [--force_run_failed] [--rerun_code_changed] ...`."""
    from marin.execution.executor import Executor, ExecutorRunError
    from marin.execution.main import configure_logging, parse_main_args

    configure_logging()
    cfg = parse_main_args(args)
    try:
        record = load_record(record_path)
        steps = rebuild_steps(record, prefix if "://" in prefix else __import__("os").path.abspath(prefix))
    except (ValueError, ImportError) as exc:
        print(f"error: cannot rerun {record_path}: {exc}", file=sys.stderr)
        return 2
    warnings = environment_warnings(record)
    for w in warnings:
        logger.warning("rerun: %s", w)
    if cfg.backend == "ray":
        ship_scripts_by_value()
    executor = Executor(
        prefix,
        backend=cfg.backend,
        max_concurrent=cfg.max_concurrent,
        ray_address=cfg.ray_address,
        description=record.get("description"),
        experiment_name=record.get("name"),
        script=record.get("script"),
        record_extra={"rerun_of": record_path, "rerun_warnings": warnings},
    )
    try:
        executor.run(
            steps,
            dry_run=cfg.dry_run,
            run_only=cfg.run_only,
            force_run_failed=cfg.force_run_failed,
            rerun_code_changed=cfg.rerun_code_changed,
        )
    except ExecutorRunError:
        return 1
    return 0
