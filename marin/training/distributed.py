"""jax.distributed across the hosts of a gang: one training program in N processes.

A train step with `ResourceConfig(hosts=N)` runs `train(config)` in N processes (marin.execution.gang_launch),
each told its index, the count and host 0's address (marin.stepkit.gang). Before anything touches jax,
`initialize()` joins them into one jax runtime: `jax.process_count() == N`, `jax.devices()` lists every
host's devices, and Levanter's mesh, data loading and checkpoints span them all. Levanter is then told
not to initialise again.

Who writes what. Levanter writes checkpoints collectively (each host its shards, host 0 the metadata),
and the HF export too (host 0 the weights, after every host loaded the model: `host_local_mesh`); its
W&B tracker is live on host 0 only. Everything else a train step writes once (train_info.json,
phase.json, the volatile list, metrics.jsonl, the discarding of incomplete checkpoints) is written by
host 0 alone (`is_primary()`), and `barrier()` keeps the hosts in step where one of them decides or
writes what the others read.

Timeouts. A host that dies must not leave the others waiting in a collective forever: the executor
kills the whole gang as soon as Ray reports the death; should the executor's runner die too, jax's own
heartbeat (`MARIN_GANG_HEARTBEAT_TIMEOUT_S`, default 60 s) ends the survivors. On the CPU, collectives
go through gloo, which jax needs set before `jax.distributed.initialize`; on GPUs they go through NCCL
and on TPUs through the interconnect, with nothing to set here (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import logging
import os

from marin.stepkit.gang import GangMember, gang_member, is_primary_host

logger = logging.getLogger(__name__)

INIT_TIMEOUT_S = 300
"""How long a host waits for the others to join (they start together, but import Levanter on busy CPUs)."""
DEFAULT_HEARTBEAT_TIMEOUT_S = 60
BARRIER_TIMEOUT_S = 600


def heartbeat_timeout_s() -> int:
    """Seconds without a heartbeat after which jax declares a host dead and stops the others."""
    return int(float(os.environ.get("MARIN_GANG_HEARTBEAT_TIMEOUT_S", DEFAULT_HEARTBEAT_TIMEOUT_S)))


def initialize() -> GangMember | None:
    """Joins this process to its gang's jax runtime (once per process); None outside a gang."""
    member = gang_member()
    if member is None:
        return None
    import jax

    if jax.distributed.is_initialized():
        return member
    # Only the CPU client reads this; GPUs use NCCL and TPUs their interconnect whatever it says.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if member.autodetect:
        jax.distributed.initialize(
            initialization_timeout=INIT_TIMEOUT_S, heartbeat_timeout_seconds=heartbeat_timeout_s()
        )
    else:
        jax.distributed.initialize(
            coordinator_address=member.coordinator,
            num_processes=member.hosts,
            process_id=member.host,
            initialization_timeout=INIT_TIMEOUT_S,
            heartbeat_timeout_seconds=heartbeat_timeout_s(),
        )
    logger.info(
        "host %d of %d joined the gang at %s: %d devices in all, %d here",
        jax.process_index(),
        jax.process_count(),
        member.coordinator,
        jax.device_count(),
        jax.local_device_count(),
    )
    return member


def is_primary() -> bool:
    """True outside a gang and on host 0: the process that writes what is not written collectively.

    With jax's own cluster detection (TPU slices) host 0 is jax's process 0, whatever marin numbered it."""
    member = gang_member()
    if member is not None and member.autodetect:
        import jax

        return jax.process_index() == 0
    return is_primary_host()


def barrier(name: str) -> None:
    """Every host of the gang waits here for the others (a no-op outside a gang). Names must be unique per run."""
    if gang_member() is None:
        return
    from jax._src.distributed import global_state

    global_state.client.wait_at_barrier(f"marin-{name}", BARRIER_TIMEOUT_S * 1000)


def levanter_distributed_config():
    """The `DistributedConfig` for Levanter: in a gang, jax.distributed is already initialised here."""
    from levanter.distributed import DistributedConfig

    if gang_member() is None:
        return DistributedConfig()
    return DistributedConfig(initialize_jax_distributed=False)


@contextlib.contextmanager
def host_local_mesh():
    """A mesh of one of this host's devices, for arrays every host holds whole (the HF export).

    Levanter's default mesh spans every host's devices, and its arrays cannot be turned into one host's
    numpy arrays. The HF export loads the final checkpoint on each host under this mesh (one device: no
    collective inside; the model must fit it), and every host calls it, because Levanter's writer ends
    with a barrier of all hosts; host 0 writes the weights, every host the same small config files.
    """
    import haliax
    import jax
    import numpy as np
    from haliax.partitioning import ResourceAxis
    from jax.sharding import Mesh

    devices = np.array(jax.local_devices()[:1]).reshape(1, 1, 1)
    with haliax.partitioning.set_mesh(Mesh(devices, (ResourceAxis.REPLICA, ResourceAxis.DATA, ResourceAxis.MODEL))):
        yield
