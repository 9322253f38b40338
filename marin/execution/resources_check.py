"""Plan-time check that some node of a Ray cluster could ever satisfy a step's resource request."""

from __future__ import annotations


def unsatisfiable_reason(options: dict, nodes: list[dict]) -> str | None:
    """None if one alive node has every requested resource in its totals; otherwise why not."""
    wanted: dict[str, float] = {}
    if options.get("num_cpus"):
        wanted["CPU"] = float(options["num_cpus"])
    if options.get("num_gpus"):
        wanted["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        wanted["memory"] = float(options["memory"])
    for key, value in (options.get("resources") or {}).items():
        wanted[key] = float(value)
    if options.get("accelerator_type"):
        wanted[f"accelerator_type:{options['accelerator_type']}"] = 0.001
    alive = [n for n in nodes if n.get("Alive", n.get("alive", True))]
    if not alive:
        return "the cluster has no alive node"
    for node in alive:
        totals = node.get("Resources", {})
        if all(totals.get(key, 0) >= value for key, value in wanted.items()):
            return None
    have = "; ".join(
        ", ".join(_show(k, v) for k, v in sorted(n.get("Resources", {}).items()) if not k.startswith("node:"))
        for n in alive
    )
    asked = ", ".join(_show(k, v) for k, v in sorted(wanted.items()))
    return f"it asks for {asked}, but no node has that (nodes: {have})"


def _show(key: str, value: float) -> str:
    if key in ("memory", "object_store_memory"):
        return f"{key}={value / 1024**3:.1f}GiB"
    if key.startswith("accelerator_type:"):
        return key
    return f"{key}={value:g}"
