"""What a step function learns about its gang: the environment the executor gives each host's process.

A step that asks for `ResourceConfig(hosts=N)` runs as N processes, one per host, all calling the same
`fn(config)` (marin.execution.gang_launch). The executor sits in a layer above the step library, so the two
meet here, at the bottom, through three environment variables: a step function reads `gang_member()`
and never imports the executor. Outside a gang (any step with one host, or `fn(config)` called
directly) `gang_member()` is None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

HOSTS_ENV = "MARIN_GANG_HOSTS"
"""How many processes the gang has."""
HOST_ENV = "MARIN_GANG_HOST"
"""This process's index in the gang, 0 to hosts - 1; host 0 is the coordinator."""
COORDINATOR_ENV = "MARIN_GANG_COORDINATOR"
"""`ip:port` of host 0, where the gang's processes meet (jax.distributed's coordinator)."""
AUTODETECT_ENV = "MARIN_GANG_AUTODETECT"
"""'1': let jax detect the cluster itself (TPU pod slices) instead of using the three values above."""
GANG_ENV_NAMES = (HOSTS_ENV, HOST_ENV, COORDINATOR_ENV, AUTODETECT_ENV)


@dataclass(frozen=True)
class GangMember:
    """This process's place in its gang."""

    host: int
    """Index of this process (jax's process id)."""
    hosts: int
    """Processes in the gang (jax's process count)."""
    coordinator: str
    """`ip:port` of host 0."""
    autodetect: bool = False
    """Leave the coordinator, count and index to jax's cluster detection (one task per TPU host)."""

    @property
    def is_primary(self) -> bool:
        """Host 0: the one process that writes what is not written collectively."""
        return self.host == 0


def gang_member() -> GangMember | None:
    """This process's place in its gang, or None when it is not one of several hosts."""
    hosts = int(os.environ.get(HOSTS_ENV, "1") or 1)
    if hosts <= 1:
        return None
    try:
        return GangMember(
            host=int(os.environ[HOST_ENV]),
            hosts=hosts,
            coordinator=os.environ[COORDINATOR_ENV],
            autodetect=os.environ.get(AUTODETECT_ENV) == "1",
        )
    except KeyError as exc:
        raise RuntimeError(
            f"{HOSTS_ENV}={hosts} is set but {exc.args[0]} is not: not started by marin's gang"
        ) from None


def is_primary_host() -> bool:
    """True outside a gang, and on host 0 of one."""
    member = gang_member()
    return member is None or member.is_primary
