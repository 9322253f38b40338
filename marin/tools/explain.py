"""`marin explain SCRIPT STEP`: why a step's hash is what it is.

Prints the version (the exact JSON that is hashed), then looks under the prefix for outputs of the
same step name with other hashes (marin.execution.earlier_outputs), picks the nearest (fewest
differing fields), and lists field by field what differs: a versioned config value, an input's
sub-path, or a dependency whose own hash changed (with the name of that upstream step, to explain in
turn).
"""

from __future__ import annotations

import json

from marin.execution.earlier_outputs import diff_versions, earlier_outputs, show_value
from marin.execution.planning import PlannedStep
from marin.execution.status import read_status


def existing_versions(planned: PlannedStep, prefix: str) -> list[tuple[str, dict, str | None]]:
    """(output path, version, state) of every other output of the same step name under the prefix."""
    return [(o.output_path, o.version, o.state) for o in earlier_outputs([planned], prefix).get(planned, [])]


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
    others = earlier_outputs([planned], prefix).get(planned, [])
    if not others:
        lines.append(f"no other output of {planned.name!r} under {prefix}: nothing to compare with")
        return "\n".join(lines)
    config = getattr(planned, "config", None) or planned.step.config
    nearest = min(others, key=lambda o: (len(diff_versions(o.version, planned.version)), o.output_path))
    diffs = diff_versions(nearest.version, planned.version, config)
    lines.append(
        f"nearest existing output: {nearest.output_path} ({nearest.state or 'not run'}); {len(diffs)} field(s) differ:"
    )
    deps_by_identity = {d.identity: d for d in planned.dependencies + planned.pseudo_dependencies}
    for d in diffs:
        lines.append(f"  {d.field}: {show_value(d.old)} -> {show_value(d.new)}")
        if d.field.startswith(("dependencies", "pseudo_dependencies")) and d.new in deps_by_identity:
            dep = deps_by_identity[d.new]
            lines.append(f"    upstream step {dep.name!r} has a new hash; `marin explain SCRIPT {dep.name}` says why")
    if len(others) > 1:
        lines.append(f"({len(others)} other outputs of this step exist; compared with the nearest)")
    return "\n".join(lines)
