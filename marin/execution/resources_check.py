"""Plan-time check that some node of a Ray cluster could ever satisfy a step's resource request.

The nodes that count are the alive ones and, on an autoscaling cluster, the node types the autoscaler
may add, so a GPU step is accepted by a cluster whose GPU workers are scaled to zero. Those come from
the cluster config an autoscaler reports to the GCS, else from the launcher's config on the head
(`~/ray_bootstrap_config.yaml`, where `ray up` puts it and where a submitted job's driver runs), or
from the file `MARIN_AUTOSCALING_CONFIG` names.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

BOOTSTRAP_CONFIG = "~/ray_bootstrap_config.yaml"


def autoscaler_node_types() -> list[dict]:
    """The node types the cluster's autoscaler may add, as node-like dicts; [] when none is known."""
    try:
        from ray._private.state import state

        config = state.get_cluster_config()
    except Exception as exc:
        logger.debug("no autoscaler cluster config in the GCS: %s", exc)
        config = None
    if config is not None and config.node_group_configs:
        return [
            {"Alive": True, "Resources": dict(group.resources), "NodeType": group.name}
            for group in config.node_group_configs
            if group.max_count != 0 and group.resources
        ]
    path = os.path.expanduser(os.environ.get("MARIN_AUTOSCALING_CONFIG") or BOOTSTRAP_CONFIG)
    return launcher_node_types(path) if os.path.exists(path) else []


def launcher_node_types(path: str) -> list[dict]:
    """The worker node types of a Ray cluster launcher config (`available_node_types`)."""
    import yaml

    with open(path) as f:
        config = yaml.safe_load(f) or {}
    return [
        {"Alive": True, "Resources": {k: float(v) for k, v in t.get("resources", {}).items()}, "NodeType": name}
        for name, t in (config.get("available_node_types") or {}).items()
        if t.get("max_workers", 0) != 0 and t.get("resources")
    ]


def wanted_resources(options: dict) -> dict[str, float]:
    """Ray task options as the node resources they take (also a placement-group bundle)."""
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
    return wanted


def gang_unsatisfiable_reason(options: dict, hosts: int, placement: str, nodes: list[dict]) -> str | None:
    """Like `unsatisfiable_reason`, for `hosts` processes with `options` each placed by `placement`."""
    reason = unsatisfiable_reason(options, nodes)
    if reason or hosts <= 1:
        return reason
    wanted = wanted_resources(options)
    alive = [n for n in nodes if n.get("Alive", n.get("alive", True))]
    if placement == "STRICT_SPREAD" and not any(n.get("NodeType") for n in alive):
        fitting = [n for n in alive if all(n.get("Resources", {}).get(k, 0) >= v for k, v in wanted.items())]
        if len(fitting) < hosts:
            return f"its {hosts} hosts need {hosts} nodes (STRICT_SPREAD) with that, but {len(fitting)} have it"
    if placement == "STRICT_PACK":
        return unsatisfiable_reason({"resources": {k: v * hosts for k, v in wanted.items()}}, nodes)
    return None


def unsatisfiable_reason(options: dict, nodes: list[dict]) -> str | None:
    """None if one alive node (or addable node type) has every requested resource; otherwise why not."""
    wanted = wanted_resources(options)
    alive = [n for n in nodes if n.get("Alive", n.get("alive", True))]
    if not alive:
        return "the cluster has no alive node"
    for node in alive:
        totals = node.get("Resources", {})
        if all(totals.get(key, 0) >= value for key, value in wanted.items()):
            return None
    have = "; ".join(
        ("node type " + n["NodeType"] + ": " if n.get("NodeType") else "")
        + ", ".join(_show(k, v) for k, v in sorted(n.get("Resources", {}).items()) if not k.startswith("node:"))
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
