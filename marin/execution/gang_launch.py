"""One step, several hosts: a gang of Ray actors started, watched and restarted together (docs/cluster.md).

A step with `ResourceConfig(hosts=N)` is still one step to the executor: one runner task takes its lease,
claims its attempt and writes its records, exactly as for any step. Only where that runner would call
`fn(config)`, it calls `run_gang`, which

1. reserves N bundles of the step's per-host resources in a placement group (SPREAD over nodes by
   default) and starts one actor in each, with the step's `env` and marin's gang variables
   (marin.stepkit.gang: host index and count) in its environment: every actor is a fresh process, so
   settings read at import time (XLA_FLAGS) apply;
2. asks host 0 for its `ip:port` and starts `fn(config)` on every host with that coordinator: the
   same config, so all hosts write into the same attempt folder (what they write, and who writes
   what, is the step function's business: marin.training.distributed);
3. waits for all of them. A host that raises fails the step (after `retries`), unless another host
   died meanwhile. A host that dies (its process killed, its node gone) tears the whole gang down
   (every actor killed: none is left waiting in a collective) and starts it again, up to
   GANG_RESTARTS times; the step function then resumes from what the attempt folder holds (a train
   step from its last complete checkpoint).

Each host's output goes to `.executor_logs/<attempt>.launch<k>-host<i>.log` beside the runner's own
`<attempt>.log`, which says where every host ran and why a launch ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from marin.stepkit.gang import COORDINATOR_ENV, HOST_ENV, HOSTS_ENV
from marin.stepkit.sharding import RAY_SYSTEM_RETRIES

logger = logging.getLogger(__name__)

GANG_RESTARTS = RAY_SYSTEM_RETRIES
"""How often a gang is started again after one of its hosts died (a system failure, not the step's fault)."""
DEATH_GRACE_S = 30.0
"""After a host raised, how long to watch the others for a death (a peer's death makes the survivors'
collectives raise: that is a restart, not a failure of the step); env `MARIN_GANG_DEATH_GRACE_S`."""


@dataclass(frozen=True)
class GangSpec:
    """How to start a step's gang: built by the Ray backend from the step's ResourceConfig."""

    hosts: int
    """Processes, one per bundle."""
    placement: str
    """Ray placement-group strategy."""
    bundle: dict[str, float]
    """One host's resources as a placement-group bundle."""
    actor_options: dict[str, Any]
    """One host's resources as Ray actor options (the same, in Ray's option names)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment of every host's process (forwarded MARIN_* settings, then the step's `env`)."""


class HostDied(RuntimeError):
    """A host's process or node went away: the gang is restarted."""


class GangStepFailed(RuntimeError):
    """A host's step function raised: the step failed."""


class GangHost:
    """One host of a gang: a Ray actor in its own process, running the step function once."""

    def where(self) -> dict:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "ip": _node_ip(), "pid": os.getpid()}

    def coordinator_address(self) -> str:
        """`ip:port` on this host's node where jax.distributed's coordinator can listen."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"{_node_ip()}:{port}"

    def run(self, fn, config, coordinator: str, log_path: str) -> None:
        from marin.execution.capture import capture_into

        os.environ[COORDINATOR_ENV] = coordinator
        with capture_into(log_path, process=True):
            logger.info(
                "gang host %s of %s (pid %d), coordinator %s",
                os.environ[HOST_ENV],
                os.environ[HOSTS_ENV],
                os.getpid(),
                coordinator,
            )
            fn(config)


def _node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address()


def run_gang(spec: GangSpec, fn, config, log_prefix: str) -> None:
    """Runs `fn(config)` on every host of a gang; restarts the gang when a host dies (see the module doc)."""
    for launch in range(1, GANG_RESTARTS + 2):
        try:
            _launch(spec, fn, config, log_prefix, launch)
            return
        except HostDied as exc:
            if launch > GANG_RESTARTS:
                raise RuntimeError(f"the gang lost a host {launch} times; giving up: {exc}") from None
            logger.error("%s; gang torn down, starting it again (restart %d of %d)", exc, launch, GANG_RESTARTS)


def _launch(spec: GangSpec, fn, config, log_prefix: str, launch: int) -> None:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    t0 = time.monotonic()
    pg = placement_group([dict(spec.bundle) for _ in range(spec.hosts)], strategy=spec.placement)
    actors: list = []
    try:
        _wait_for_placement(ray, pg, spec)
        gang_id = uuid.uuid4().hex[:12]
        host_cls = ray.remote(GangHost)
        for i in range(spec.hosts):
            env = {**spec.env, HOSTS_ENV: str(spec.hosts), HOST_ENV: str(i), "MARIN_GANG_ID": gang_id}
            actors.append(
                host_cls.options(
                    **spec.actor_options,
                    name=f"marin-gang-{gang_id}-host{i}",
                    max_restarts=0,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
                    runtime_env={"env_vars": env},
                ).remote()
            )
        where = _get(ray, [a.where.remote() for a in actors], "starting")
        coordinator = _get(ray, [actors[0].coordinator_address.remote()], "starting")[0]
        logger.info(
            "gang launch %d: %d hosts ready in %.1f s, coordinator %s; %s",
            launch,
            spec.hosts,
            time.monotonic() - t0,
            coordinator,
            ", ".join(f"host {i}: pid {w['pid']} on {w['ip']} node {w['node'][:8]}" for i, w in enumerate(where)),
        )
        refs = {
            a.run.remote(fn, config, coordinator, f"{log_prefix}.launch{launch}-host{i}.log"): i
            for i, a in enumerate(actors)
        }
        _watch(ray, refs)
        logger.info("gang launch %d: every host finished", launch)
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        with contextlib.suppress(Exception):
            remove_placement_group(pg)


def _wait_for_placement(ray, pg, spec: GangSpec) -> None:
    """Waits (as long as it takes: an autoscaler may be adding nodes) for every bundle to be placed."""
    t0 = time.monotonic()
    while True:
        ready, _ = ray.wait([pg.ready()], timeout=30)
        if ready:
            return
        logger.warning(
            "waiting %.0f s for %d hosts of %s (%s) to be free",
            time.monotonic() - t0,
            spec.hosts,
            spec.bundle,
            spec.placement,
        )


def _death(ray, exc: BaseException) -> bool:
    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.WorkerCrashedError) or (
        isinstance(exc, ray.exceptions.ActorUnavailableError)
    )


def _get(ray, refs: list, what: str) -> list:
    try:
        return ray.get(refs)
    except Exception as exc:
        if _death(ray, exc):
            raise HostDied(f"a host died while {what}: {type(exc).__name__}: {exc}") from exc
        raise


def _watch(ray, refs: dict) -> None:
    """Returns when every host finished; raises HostDied or GangStepFailed as soon as the outcome is clear."""
    pending = list(refs)
    failure: tuple[int, BaseException] | None = None
    deadline = None
    while pending:
        # A timeout, so that a Ctrl-C or a lost lease (raised into this thread) is noticed.
        timeout = 5.0 if deadline is None else max(0.0, min(5.0, deadline - time.monotonic()))
        done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
        for ref in done:
            try:
                ray.get(ref)
            except Exception as exc:
                if _death(ray, exc):
                    raise HostDied(f"host {refs[ref]} died: {type(exc).__name__}: {_first_line(exc)}") from exc
                if failure is None:
                    failure = (refs[ref], exc)
                    deadline = time.monotonic() + float(os.environ.get("MARIN_GANG_DEATH_GRACE_S", DEATH_GRACE_S))
        if failure is not None and (not pending or time.monotonic() >= deadline):
            host, exc = failure
            cause = getattr(exc, "cause", None) or exc
            raise GangStepFailed(f"host {host} raised {type(cause).__name__}: {cause}") from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]
