"""Why a step's hash is what it is: its version dict, and what changed since the nearest existing output.

`marin explain SCRIPT STEP` prints the version (the exact JSON that is hashed), then looks under the
prefix for outputs of the same step name with other hashes, picks the nearest (fewest differing
fields), and lists field by field what differs: a versioned config value, an input's sub-path, or a
dependency whose own hash changed (with the name of that upstream step, to explain in turn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from marin.execution.planning import PlannedStep
from marin.execution.status import info_path, read_status, read_statuses
from marin.storage import join, list_dir, read_bytes_many
from marin.storage.layout import HASH_PATTERN


@dataclass
class VersionDiff:
    field: str
    """A dotted config path, 'dependencies[i]' or 'pseudo_dependencies[i]'."""
    old: object
    new: object


def diff_versions(old: dict, new: dict) -> list[VersionDiff]:
    """Field-by-field differences between two version dicts."""
    diffs: list[VersionDiff] = []
    old_cfg, new_cfg = old.get("config", {}), new.get("config", {})
    for key in sorted(set(old_cfg) | set(new_cfg)):
        a, b = old_cfg.get(key, "<absent>"), new_cfg.get(key, "<absent>")
        if a != b:
            diffs.append(VersionDiff(f"config.{key}", a, b))
    for group in ("dependencies", "pseudo_dependencies"):
        a_list, b_list = old.get(group, []), new.get(group, [])
        for i in range(max(len(a_list), len(b_list))):
            a = a_list[i] if i < len(a_list) else "<absent>"
            b = b_list[i] if i < len(b_list) else "<absent>"
            if a != b:
                diffs.append(VersionDiff(f"{group}[{i}]", a, b))
    if old.get("name") != new.get("name"):
        diffs.append(VersionDiff("name", old.get("name"), new.get("name")))
    return diffs


def existing_versions(planned: PlannedStep, prefix: str) -> list[tuple[str, dict, str | None]]:
    """(output path, version, state) of every other output of the same step name under the prefix.

    Their records and states are read in two batches, concurrently on buckets, not one request at a time.
    """
    parent_rel, _, base = planned.name.rpartition("/")
    parent = join(prefix, parent_rel) if parent_rel else prefix
    outputs = [join(parent, n) for n in list_dir(parent) if (m := HASH_PATTERN.match(n)) and m.group("base") == base]
    outputs = [o for o in outputs if o.rstrip("/") != planned.output_path.rstrip("/")]
    versioned_outputs = []
    for out, data in zip(outputs, read_bytes_many([info_path(o) for o in outputs]), strict=True):
        try:
            version = json.loads(data)["version"] if data else None
        except (ValueError, KeyError):
            version = None
        if version is not None:
            versioned_outputs.append((out, version))
    states = read_statuses([out for out, _ in versioned_outputs])
    return [(out, version, state) for (out, version), state in zip(versioned_outputs, states, strict=True)]


def explain_step(planned: PlannedStep, prefix: str) -> str:
    """The text `marin explain` prints for one step."""
    lines = [
        f"step {planned.name}",
        f"  output: {planned.output_path}",
        f"  state:  {read_status(planned.output_path) or 'not run'}",
        f"  hash:   {planned.hash} = sha256(canonical_json(version))[:8]",
        "  version:",
    ]
    lines += ["    " + line for line in json.dumps(planned.version, indent=2, sort_keys=True).splitlines()]
    others = existing_versions(planned, prefix)
    if not others:
        lines.append(f"no other output of {planned.name!r} under {prefix}: nothing to compare with")
        return "\n".join(lines)
    nearest = min(others, key=lambda o: (len(diff_versions(o[1], planned.version)), o[0]))
    out, version, state = nearest
    diffs = diff_versions(version, planned.version)
    lines.append(f"nearest existing output: {out} ({state or 'not run'}); {len(diffs)} field(s) differ:")
    deps_by_identity = {d.identity: d for d in planned.dependencies + planned.pseudo_dependencies}
    for d in diffs:
        lines.append(f"  {d.field}: {json.dumps(d.old)} -> {json.dumps(d.new)}")
        if d.field.startswith(("dependencies", "pseudo_dependencies")) and d.new in deps_by_identity:
            dep = deps_by_identity[d.new]
            lines.append(f"    upstream step {dep.name!r} has a new hash; `marin explain SCRIPT {dep.name}` says why")
    if len(others) > 1:
        lines.append(f"({len(others)} other outputs of this step exist; compared with the nearest)")
    return "\n".join(lines)
