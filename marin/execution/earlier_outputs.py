"""What changed since an earlier output of a step: the reasons `marin plan` gives for a new hash.

`marin plan` (and `--dry_run`) says in one line, for each step that has no output yet, what differs
from the most recent earlier output of that step name:

    run   hello/stats-5e1c2a90  new hash: config.min_len 3 -> 5 (was hello/stats-2d4c618e)
    run   hello/stats-77aa01b3  new hash: dependency hello/data changed (was hello/stats-2d4c618e)

Earlier outputs are found without any record: they are the sibling folders `<name>-<other hash>`
(as on the browser's compare page), each holding its version in `.executor_info`. Each parent folder
is listed once, however many steps it holds, and the records are read concurrently on buckets.
`marin explain` (marin.tools.explain) prints the whole comparison for one step.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import zip_longest

from marin.execution.authoring import VersionedValue
from marin.execution.planning import PlannedStep
from marin.execution.status import read_infos, read_statuses
from marin.storage import filesystem, is_local, join, list_dir, strip_protocol
from marin.storage.layout import HASH_PATTERN, info_path, status_path

REASON_FIELDS = 3
"""`marin plan` names at most this many changed fields, then says how many more."""

ABSENT = "<absent>"
"""A version without the field (or dependency): for a config field, one left at its default."""


@dataclass(frozen=True)
class DefaultValue:
    """A field absent from a version because it was at its default (`versioned_unless_default`): the value."""

    value: object

    def shown(self) -> str:
        return f"{json.dumps(self.value, sort_keys=True)} (default)"


@dataclass
class VersionDiff:
    field: str
    """A dotted config path, 'dependencies[i]' or 'pseudo_dependencies[i]'."""
    old: object
    new: object


@dataclass
class EarlierOutput:
    """Another output of the same step name under the prefix (another hash)."""

    output_path: str
    relative_output_path: str
    """Relative to the prefix: `<name>-<hash>`."""
    version: dict
    """The version dict its `.executor_info` records."""
    state: str | None = None
    modified: float | None = None
    """When its state was last written (seconds since the epoch), None when unknown."""


def diff_versions(old: dict, new: dict, config: object = None) -> list[VersionDiff]:
    """Field-by-field differences between two version dicts. With `config` (the new version's config, a
    dataclass), a config field absent from one version is shown as the default it had there (`DefaultValue`),
    read from the field's declaration in `config`'s class."""
    diffs: list[VersionDiff] = []
    _leaf_diffs(old.get("config", {}), new.get("config", {}), "config", diffs)
    if config is not None:
        for d in diffs:
            for side in ("old", "new"):
                if getattr(d, side) == ABSENT:
                    default = field_default(config, d.field.removeprefix("config."))
                    if default is not _UNKNOWN:
                        setattr(d, side, DefaultValue(default))
    for group in ("dependencies", "pseudo_dependencies"):
        for i, (a, b) in enumerate(zip_longest(old.get(group, []), new.get(group, []), fillvalue=ABSENT)):
            if a != b:
                diffs.append(VersionDiff(f"{group}[{i}]", a, b))
    if old.get("name") != new.get("name"):
        diffs.append(VersionDiff("name", old.get("name"), new.get("name")))
    return diffs


def _leaf_diffs(a: object, b: object, path: str, out: list[VersionDiff]) -> None:
    """The differing leaves of two versioned values: a nested field by its dotted path, a list item as [i]."""
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _leaf_diffs(a.get(key, ABSENT), b.get(key, ABSENT), f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _leaf_diffs(x, y, f"{path}[{i}]", out)
    else:
        out.append(VersionDiff(path, a, b))


_UNKNOWN = object()


def field_default(config: object, dotted: str) -> object:
    """The declared default of the field at `dotted` (`checkpoint_every_steps`, `model.hidden_dim`) in a
    dataclass config, following nested dataclasses and dicts; `_UNKNOWN` when the path names no field with a
    default (a dict key, a list item, a field without one)."""
    obj = config
    parts = dotted.split(".")
    for part in parts[:-1]:
        obj = obj.value if isinstance(obj, VersionedValue) else obj
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif dataclasses.is_dataclass(obj) and hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return _UNKNOWN
    obj = obj.value if isinstance(obj, VersionedValue) else obj
    if not dataclasses.is_dataclass(obj):
        return _UNKNOWN
    found = next((f for f in dataclasses.fields(obj) if f.name == parts[-1]), None)
    if found is None:
        return _UNKNOWN
    if found.default is not dataclasses.MISSING:
        return found.default
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return _UNKNOWN


def show_value(value: object) -> str:
    """A version's value as `marin plan` and `marin explain` print it: JSON, or `1000 (default)`."""
    return value.shown() if isinstance(value, DefaultValue) else json.dumps(value, sort_keys=True)


def _short(value: object) -> str:
    text = show_value(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _dependency_name(identity: object) -> str:
    """'hello/data-02ea9faa' -> 'hello/data'."""
    m = HASH_PATTERN.match(str(identity))
    return m.group("base") if m else str(identity)


def describe_diffs(diffs: Sequence[VersionDiff]) -> str:
    """One line: `config.min_len 3 -> 5`, `dependency hello/data changed`, ..., at most REASON_FIELDS."""
    parts: list[str] = []
    for d in diffs:
        if d.field.startswith(("dependencies", "pseudo_dependencies")):
            if d.old == ABSENT:
                part = f"new dependency {_dependency_name(d.new)}"
            elif d.new == ABSENT:
                part = f"dependency {_dependency_name(d.old)} dropped"
            elif _dependency_name(d.old) == _dependency_name(d.new):
                part = f"dependency {_dependency_name(d.new)} changed"
            else:
                part = f"dependency {_dependency_name(d.old)} -> {_dependency_name(d.new)}"
        else:
            part = f"{d.field} {_short(d.old)} -> {_short(d.new)}"
        if part not in parts:
            parts.append(part)
    shown = parts[:REASON_FIELDS]
    if len(parts) > REASON_FIELDS:
        shown.append(f"and {len(parts) - REASON_FIELDS} more")
    return ", ".join(shown) if shown else "same version, other hash (the hashing changed)"


def _modified(paths: Sequence[str]) -> list[float | None]:
    """Modification times of files, None for missing ones: os.stat locally, concurrent requests on buckets."""

    def one(path: str) -> float | None:
        try:
            if is_local(path):
                return os.stat(strip_protocol(path)).st_mtime
            return filesystem(path).modified(path).timestamp()
        except (FileNotFoundError, OSError, KeyError, ValueError):
            return None

    if not paths or all(is_local(p) for p in paths):
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(32, len(paths))) as pool:
        return list(pool.map(one, paths))


def earlier_outputs(
    steps: Sequence[PlannedStep], prefix: str, with_times: bool = False
) -> dict[PlannedStep, list[EarlierOutput]]:
    """For each step (by id), the outputs of its name under `prefix` with another hash and a readable record.

    Lists each parent folder once, then reads every candidate's `.executor_info` and state in two batches
    (concurrently on buckets); `with_times` also reads when each state was written. Steps whose output is
    not `<prefix>/<name>-<hash>` (an override) have none.
    """
    prefix = prefix.rstrip("/")
    listings: dict[str, list[str]] = {}
    candidates: list[tuple[int, str, str]] = []
    for planned in steps:
        if planned.output_path.rstrip("/") != join(prefix, planned.identity):
            continue
        parent_rel, _, base = planned.name.rpartition("/")
        parent = join(prefix, parent_rel) if parent_rel else prefix
        if parent not in listings:
            listings[parent] = list_dir(parent)
        for name in listings[parent]:
            m = HASH_PATTERN.match(name)
            if m and m.group("base") == base and name != f"{base}-{planned.hash}":
                rel = f"{parent_rel}/{name}" if parent_rel else name
                candidates.append((planned, join(prefix, rel), rel))
    found: list[tuple[int, EarlierOutput]] = []
    for (key, out, rel), info in zip(candidates, read_infos([out for _, out, _ in candidates]), strict=True):
        version = (info or {}).get("version")
        if isinstance(version, dict):
            found.append((key, EarlierOutput(out, rel, version)))
    outputs = [o.output_path for _, o in found]
    for (_, o), state in zip(found, read_statuses(outputs), strict=True):
        o.state = state
    if with_times:
        times = _modified([status_path(p) for p in outputs])
        missing = [i for i, t in enumerate(times) if t is None]
        for i, t in zip(missing, _modified([info_path(outputs[i]) for i in missing]), strict=True):
            times[i] = t
        for (_, o), t in zip(found, times, strict=True):
            o.modified = t
    result: dict[PlannedStep, list[EarlierOutput]] = {}
    for key, o in found:
        result.setdefault(key, []).append(o)
    return result


def _config_of(planned: PlannedStep) -> object:
    """The step's config as planned (markers replaced), else as written in the experiment."""
    return getattr(planned, "config", None) or planned.step.config


def new_hash_reasons(steps: Sequence[PlannedStep], prefix: str) -> dict[PlannedStep, str]:
    """For each step (by id) with an earlier output of its name: what changed since the most recent one.

    `config.min_len 3 -> 5 (was hello/stats-2d4c618e)`; steps with no earlier output are absent. "Most
    recent" is by when the earlier output's state was written (S3 keeps that to the second; ties go to
    the last folder name).
    """
    reasons: dict[PlannedStep, str] = {}
    for key, others in earlier_outputs(steps, prefix, with_times=True).items():
        latest = max(others, key=lambda o: (o.modified or 0.0, o.relative_output_path))
        diffs = diff_versions(latest.version, key.version, _config_of(key))
        reasons[key] = f"{describe_diffs(diffs)} (was {latest.relative_output_path})"
    return reasons
