"""Where steps run: threads in this process (`local`), Ray tasks (`ray`), or both (`auto`, the default).

`auto` exists because starting a local Ray costs 7-20 s on a small machine, which a two-step
experiment of plain Python functions does not need. Under `auto`:

- with a cluster address (`--ray_address` or `RAY_ADDRESS`), every step is a Ray task, exactly as
  under `ray`;
- without one, a step that declares `resources` (any `ResourceConfig`: CPUs, GPUs, TPUs, memory, custom
  resources, a gang of hosts, retries) is a Ray task: on the Ray this process already initialised (a
  notebook, a test session), else on a local Ray started when the first such step is checked, before
  anything runs; a step that declares none runs as a thread of the driver, as under `local`.

So whatever asks for what only Ray gives (resource accounting, retries of system failures, gangs,
shards fanned out as Ray tasks) gets Ray, and a run of undeclared steps never starts it.

The scheduler submits a step as soon as its dependencies succeeded and blocks on whichever running
step finishes first (`concurrent.futures.wait` / `ray.wait`): no polling sleep, so a chain of trivial
steps costs only the steps themselves.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
from typing import Any

from marin.execution.attempts import finish_cleanups
from marin.execution.authoring import ResourceConfig
from marin.execution.interrupts import LEFT_FOR_RERUN, interrupt_running_steps
from marin.execution.status import Outcome
from marin.execution.step_runner import StepOutcome, StepTask, execute_step
from marin.stepkit.sharding import RAY_SYSTEM_RETRIES

logger = logging.getLogger(__name__)

DEFAULT_LOCAL_THREADS = 8
INTERRUPT_GRACE_S = 30.0
"""After Ctrl-C, how long the run waits for its interrupted steps to put their state back and release their
leases (a step blocked in a C call notices only when the call returns); a second Ctrl-C stops waiting."""


def _wait_for_interrupted(wait_any, handles: list) -> list[tuple[Any, StepOutcome]]:
    """Collects the outcomes of interrupted steps for up to INTERRUPT_GRACE_S (less after a second Ctrl-C)."""
    import time

    results, pending = [], list(handles)
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    try:
        while pending and time.monotonic() < deadline:
            for handle, outcome in wait_any(pending, timeout=max(0.0, deadline - time.monotonic())):
                pending.remove(handle)
                results.append((handle, outcome))
    except KeyboardInterrupt:
        logger.warning("second Ctrl-C: not waiting for %d interrupted step(s)", len(pending))
    return results


class LocalBackend:
    """Steps as threads of this process: simple, and a breakpoint() in a step just works."""

    name = "local"

    def __init__(self, max_concurrent: int | None = None):
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrent or DEFAULT_LOCAL_THREADS, thread_name_prefix="marin-step"
        )

    def submit(self, task: StepTask, resources: ResourceConfig | None) -> Any:
        task.capture = "thread"
        return self._pool.submit(execute_step, task)

    def wait_any(self, handles: list, timeout: float | None = None) -> list[tuple[Any, StepOutcome]]:
        done, _ = concurrent.futures.wait(handles, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        results = []
        for handle in done:
            try:
                results.append((handle, handle.result()))
            except BaseException as exc:
                results.append((handle, StepOutcome(Outcome.FAILED, error=f"{type(exc).__name__}: {exc}")))
        return results

    def check_resources(self, name: str, resources: ResourceConfig | None) -> None:
        if resources is not None and resources.hosts > 1:
            raise ValueError(
                f"step {name!r} asks for hosts={resources.hosts}: a gang of hosts runs only on the Ray backend "
                "(--backend ray); the local backend runs every step as a thread of this one process"
            )

    def interrupt(self, handles: list) -> list[tuple[Any, StepOutcome]]:
        """Ctrl-C: interrupts every running step's thread and collects what they report back."""
        for handle in handles:
            handle.cancel()
        interrupt_running_steps()
        started = [h for h in handles if not h.cancelled()]
        results = _wait_for_interrupted(self.wait_any, started)
        results += [(h, StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)) for h in handles if h.cancelled()]
        self._pool.shutdown(wait=False, cancel_futures=True)
        return results

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        finish_cleanups()


def ray_options(resources: ResourceConfig | None) -> dict:
    """A step's resources as Ray task options."""
    return (resources or ResourceConfig()).ray_options()


def gang_spec(resources: ResourceConfig):
    """How the runner of a step with `hosts > 1` starts its gang: one bundle and one actor per host."""
    from marin.execution.gang_launch import GangSpec
    from marin.execution.resources_check import wanted_resources
    from marin.stepkit.gang import AUTODETECT_ENV

    opts = ray_options(resources)
    bundle = wanted_resources(opts)
    if not bundle:
        raise ValueError("a gang's hosts must ask for some resource (cpu, gpu, tpu, memory or custom)")
    return GangSpec(
        hosts=resources.hosts,
        placement=resources.placement,
        bundle=bundle,
        actor_options=opts,
        env={**forwarded_env(), **resources.env, **({AUTODETECT_ENV: "1"} if resources.tpu else {})},
    )


STORAGE_ENDPOINT_VARS = ("STORAGE_EMULATOR_HOST", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "TENSORSTORE_GCS_HTTP_URL")
"""Where the driver's gs:// and s3:// live (an emulator, MinIO): its prefix means nothing elsewhere, so its
steps use the same endpoints. Credentials are not forwarded: each node has its own."""


def forwarded_env() -> dict[str, str]:
    """The driver's MARIN_* settings (lease timing, prefix) and storage endpoints, which apply to its steps
    wherever they run."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("MARIN_") or k in STORAGE_ENDPOINT_VARS}


def _share_import_path_with_local_workers() -> None:
    """Local Ray workers inherit this environment: give them the driver's import path, so a step function
    importable here (a module beside the script, a test helper) is importable in the worker too."""
    import sys

    paths = [p for p in sys.path if p and os.path.isdir(p)]
    existing = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(existing + paths))


def ensure_ray(address: str | None = None):
    """Connects to `address` (or RAY_ADDRESS), or starts a local Ray cluster for this process."""
    import ray

    if ray.is_initialized():
        return ray
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        logger.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, log_to_driver=True, include_dashboard=False)
    else:
        logger.info("starting a local Ray cluster (no --ray_address / RAY_ADDRESS)")
        _share_import_path_with_local_workers()
        ray.init(include_dashboard=False, log_to_driver=True)
    return ray


class RayBackend:
    """Each step a Ray task with the step's resources; node failures are retried by Ray."""

    name = "ray"

    def __init__(self, address: str | None = None, max_concurrent: int | None = None):
        self._ray = ensure_ray(address)
        self._remote = self._ray.remote(execute_step)
        self._refs: dict = {}
        self._nodes: list[dict] | None = None

    def check_resources(self, name: str, resources: ResourceConfig | None) -> None:
        """Refuses a step that no node of the cluster could ever run (instead of hanging)."""
        from marin.execution.resources_check import autoscaler_node_types, gang_unsatisfiable_reason

        if self._nodes is None:
            self._nodes = self._ray.nodes() + autoscaler_node_types()
        res = resources or ResourceConfig()
        reason = gang_unsatisfiable_reason(ray_options(res), res.hosts, res.placement, self._nodes)
        if reason:
            raise ValueError(f"step {name!r} can never run on this Ray cluster: {reason}")

    def submit(self, task: StepTask, resources: ResourceConfig | None) -> Any:
        task.capture = "process"
        opts = ray_options(resources)
        env = {**forwarded_env(), **(resources.env if resources else {})}
        if resources is not None and resources.hosts > 1:
            task.gang = gang_spec(resources)
            opts = {"num_cpus": 0, "num_gpus": 0}  # the runner only watches; the hosts hold the resources
            env = forwarded_env()
        if env:
            opts["runtime_env"] = {"env_vars": env}
        return self._remote.options(max_retries=RAY_SYSTEM_RETRIES, retry_exceptions=False, **opts).remote(task)

    def wait_any(self, handles: list, timeout: float | None = None) -> list[tuple[Any, StepOutcome]]:
        ready, _ = self._ray.wait(handles, num_returns=1, timeout=timeout)
        results = []
        for ref in ready:
            try:
                results.append((ref, self._ray.get(ref)))
            except self._ray.exceptions.TaskCancelledError:
                results.append((ref, StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)))
            except Exception as exc:
                results.append(
                    (ref, StepOutcome(Outcome.FAILED, error=f"Ray task failed: {type(exc).__name__}: {exc}"))
                )
        return results

    def interrupt(self, handles: list) -> list[tuple[Any, StepOutcome]]:
        """Ctrl-C: cancels the running tasks (KeyboardInterrupt inside each) and collects what they report."""
        for ref in handles:
            try:
                self._ray.cancel(ref)
            except Exception as exc:
                logger.warning("could not cancel a step's Ray task: %s", exc)
        return _wait_for_interrupted(self.wait_any, list(handles))

    def shutdown(self) -> None:
        return None


def cluster_given(address: str | None = None) -> bool:
    """Whether this driver was given a Ray cluster to run on: `address` or RAY_ADDRESS."""
    return bool(address or os.environ.get("RAY_ADDRESS"))


class AutoBackend:
    """Ray for the steps that declare resources (all steps when a cluster address is given), threads for
    the rest.

    Ray's handles are wrapped as `concurrent.futures.Future`s (`ObjectRef.future()`), so one
    `concurrent.futures.wait` blocks on threads and tasks together, without polling.
    """

    name = "auto"

    def __init__(self, address: str | None = None, max_concurrent: int | None = None):
        self._address = address
        self._max_concurrent = max_concurrent
        self._all_on_ray = cluster_given(address)
        self._local: LocalBackend | None = None
        self._ray: RayBackend | None = None
        self._refs: dict = {}
        """Future of a Ray task -> its ObjectRef (for cancel)."""

    def on_ray(self, resources: ResourceConfig | None) -> bool:
        """Whether a step with these declared resources runs as a Ray task."""
        return self._all_on_ray or resources is not None

    def _ray_backend(self) -> RayBackend:
        if self._ray is None:
            self._ray = RayBackend(self._address, self._max_concurrent)
        return self._ray

    def _local_backend(self) -> LocalBackend:
        if self._local is None:
            self._local = LocalBackend(self._max_concurrent)
        return self._local

    def check_resources(self, name: str, resources: ResourceConfig | None) -> None:
        if self.on_ray(resources):
            self._ray_backend().check_resources(name, resources)

    def submit(self, task: StepTask, resources: ResourceConfig | None) -> Any:
        if not self.on_ray(resources):
            return self._local_backend().submit(task, resources)
        ref = self._ray_backend().submit(task, resources)
        future = ref.future()
        self._refs[future] = ref
        return future

    def wait_any(self, handles: list, timeout: float | None = None) -> list[tuple[Any, StepOutcome]]:
        done, _ = concurrent.futures.wait(handles, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        results = []
        for handle in done:
            ref = self._refs.pop(handle, None)
            if ref is not None:
                results += [(handle, outcome) for _, outcome in self._ray.wait_any([ref], timeout=0)]
                continue
            try:
                results.append((handle, handle.result()))
            except BaseException as exc:
                results.append((handle, StepOutcome("FAILED", error=f"{type(exc).__name__}: {exc}")))
        return results

    def interrupt(self, handles: list) -> list[tuple[Any, StepOutcome]]:
        """Ctrl-C: interrupts the steps' threads, cancels their Ray tasks, and collects what they report."""
        threads = [h for h in handles if h not in self._refs]
        for handle in threads:
            handle.cancel()
        if threads:
            interrupt_running_steps()
        for handle in handles:
            if handle in self._refs:
                try:
                    self._ray._ray.cancel(self._refs[handle])
                except Exception as exc:
                    logger.warning("could not cancel a step's Ray task: %s", exc)
        started = [h for h in handles if not h.cancelled()]
        results = _wait_for_interrupted(self.wait_any, started)
        results += [(h, StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)) for h in handles if h.cancelled()]
        if self._local is not None:
            self._local._pool.shutdown(wait=False, cancel_futures=True)
        return results

    def shutdown(self) -> None:
        if self._local is not None:
            self._local.shutdown()


BACKENDS = ("auto", "ray", "local")
"""--backend's choices: 'auto' (the default), 'ray' (every step a Ray task), 'local' (every step a thread)."""


def make_backend(kind: str, ray_address: str | None = None, max_concurrent: int | None = None):
    if kind == "local":
        return LocalBackend(max_concurrent)
    if kind == "ray":
        return RayBackend(ray_address, max_concurrent)
    if kind == "auto":
        return AutoBackend(ray_address, max_concurrent)
    raise ValueError(f"unknown backend {kind!r}: use 'auto', 'ray' or 'local'")
