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
import sys
import time
from typing import Any

from marin.execution.attempts import finish_cleanups
from marin.execution.authoring import ResourceConfig
from marin.execution.interrupts import (
    LEFT_FOR_RERUN,
    STOP_GRACE_S,
    ask_running_steps_to_stop,
    interrupt_running_steps,
    steps_stopping,
)
from marin.execution.status import Outcome
from marin.execution.step_runner import StepOutcome, StepTask, execute_step
from marin.stepkit.sharding import RAY_SYSTEM_RETRIES

logger = logging.getLogger(__name__)

DEFAULT_LOCAL_THREADS = 8
INTERRUPT_GRACE_S = 30.0
"""After Ctrl-C, how long the run waits for its interrupted steps to put their state back and release their
leases (a step blocked in a C call notices only when the call returns); a second Ctrl-C stops waiting."""


def _say(line: str) -> None:
    """A line for the person at the console (the driver's log may not be shown there)."""
    print(line, file=sys.stderr, flush=True)


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
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    existing = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(existing + paths))


def ensure_ray(address: str | None = None, why: str | None = None):
    """Connects to `address` (or RAY_ADDRESS), or starts a local Ray cluster for this process.

    Starting a local cluster takes seconds to tens of seconds on a small machine: the console says so,
    with `why` (the step that needs it), before the wait and how long it took after it."""
    import ray

    if ray.is_initialized():
        return ray
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        logger.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, log_to_driver=True, include_dashboard=False)
    else:
        because = f" for {why}" if why else ""
        print(
            f"starting a local Ray cluster{because} (no --ray_address / RAY_ADDRESS): once per run, "
            "about 5-40 s on a small machine",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        _share_import_path_with_local_workers()
        start_local_ray(ray)
        print(f"local Ray cluster started in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return ray


LOCAL_RAY_START_TRIES = 3
"""How many times a local Ray cluster is started before its start-up timeout is the run's error."""

_RAY_START_TIMEOUT = "timed out during startup"


def start_local_ray(ray, **init_args) -> None:
    """`ray.init(**init_args)` of a local cluster, tried again when Ray's node start-up times out.

    Ray waits a fixed 30 s (not configurable in this version) for its raylet to register with its GCS; on
    a loaded small machine (two cores, a training beside it) that wait can pass although both processes
    are healthy, and the run would fail before any step ran. A start that timed out leaves its GCS,
    raylet and agents running with no handle to stop them: they are killed (only processes started
    during that try whose command line runs Ray's own programs) before the next try, and after the last.
    """
    import psutil

    ray_dir = os.path.dirname(ray.__file__)
    for attempt in range(1, LOCAL_RAY_START_TRIES + 1):
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        try:
            ray.init(**{"include_dashboard": False, "log_to_driver": True, **init_args})
            return
        except Exception as error:
            if _RAY_START_TIMEOUT not in str(error):
                raise
            ray.shutdown()
            _kill_ray_processes_started_since(before, ray_dir)
            if attempt == LOCAL_RAY_START_TRIES:
                raise
            logger.warning(
                "the local Ray cluster did not start in time (try %d of %d): %s; starting it again",
                attempt,
                LOCAL_RAY_START_TRIES,
                error,
            )


def _kill_ray_processes_started_since(before: set[int], ray_dir: str) -> None:
    import psutil

    doomed = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            if any(ray_dir in part for part in child.cmdline()):
                doomed.append(child)
        except psutil.Error:
            continue
    kill_processes(doomed)


def kill_processes(procs: list, timeout: float = 10.0) -> None:
    """SIGKILLs each `psutil.Process` (one already gone is skipped) and waits up to `timeout` s for them all."""
    import psutil

    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=timeout)


class Backend:
    """Runs steps as threads of this process or as Ray tasks, by the kind of backend and each step's resources.

    Ray's handles are wrapped as `concurrent.futures.Future`s (`ObjectRef.future()`), so one
    `concurrent.futures.wait` blocks on threads and tasks together, without polling.
    """

    def __init__(self, kind: str, address: str | None = None, max_concurrent: int | None = None):
        self.name = kind
        self._address = address
        self._threads = max_concurrent or DEFAULT_LOCAL_THREADS
        self._all_on_ray = kind == "ray" or (kind == "auto" and bool(address or os.environ.get("RAY_ADDRESS")))
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._ray = None
        self._refs: dict = {}
        """Future of a Ray task -> its ObjectRef (for cancel)."""
        self._nodes: list[dict] | None = None
        if kind == "ray":
            self._start_ray("--backend ray")

    def on_ray(self, resources: ResourceConfig | None) -> bool:
        """Whether a step with these declared resources runs as a Ray task."""
        return self.name != "local" and (self._all_on_ray or resources is not None)

    def _start_ray(self, why: str | None = None):
        if self._ray is None:
            from marin.provenance.references import ship_scripts_by_value

            self._ray = ensure_ray(self._address, why)
            ship_scripts_by_value()  # scripts `marin rerun` loaded: their functions go to workers by value
            self._remote = self._ray.remote(execute_step)
        return self._ray

    def _why(self, name: str, resources: ResourceConfig | None) -> str:
        if self.name == "ray":
            return "--backend ray"
        return f"step {name!r}, which declares resources" if resources is not None else f"step {name!r}"

    def check_resources(self, name: str, resources: ResourceConfig | None) -> None:
        """Refuses a step that no node of the cluster could ever run (instead of hanging), and a gang off Ray."""
        if not self.on_ray(resources):
            if resources is not None and resources.hosts > 1:
                raise ValueError(
                    f"step {name!r} asks for hosts={resources.hosts}: a gang of hosts runs only on the Ray backend "
                    "(--backend ray); the local backend runs every step as a thread of this one process"
                )
            return
        from marin.execution.resources_check import autoscaler_node_types, gang_unsatisfiable_reason

        if self._nodes is None:
            self._nodes = self._start_ray(self._why(name, resources)).nodes() + autoscaler_node_types()
        res = resources or ResourceConfig()
        reason = gang_unsatisfiable_reason(ray_options(res), res.hosts, res.placement, self._nodes)
        if reason:
            raise ValueError(f"step {name!r} can never run on this Ray cluster: {reason}")

    def submit(self, task: StepTask, resources: ResourceConfig | None) -> Any:
        if not self.on_ray(resources):
            task.capture = "thread"
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self._threads, thread_name_prefix="marin-step")
            return self._pool.submit(execute_step, task)
        task.capture = "process"
        self._start_ray()
        opts = ray_options(resources)
        env = {**forwarded_env(), **(resources.env if resources else {})}
        if resources is not None and resources.hosts > 1:
            task.gang = gang_spec(resources)
            opts = {"num_cpus": 0, "num_gpus": 0}  # the runner only watches; the hosts hold the resources
            env = forwarded_env()
        if env:
            opts["runtime_env"] = {"env_vars": env}
        ref = self._remote.options(max_retries=RAY_SYSTEM_RETRIES, retry_exceptions=False, **opts).remote(task)
        future = ref.future()
        self._refs[future] = ref
        return future

    def wait_any(self, handles: list, timeout: float | None = None) -> list[tuple[Any, StepOutcome]]:
        """The outcomes of the steps among `handles` that finished, waiting up to `timeout` for one."""
        done, _ = concurrent.futures.wait(handles, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        results = []
        for handle in done:
            ref = self._refs.pop(handle, None)
            try:
                results.append((handle, self._ray.get(ref) if ref is not None else handle.result()))
            except BaseException as exc:
                if ref is not None and isinstance(exc, self._ray.exceptions.TaskCancelledError):
                    results.append((handle, StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)))
                    continue
                ray_task = "Ray task failed: " if ref is not None else ""
                results.append((handle, StepOutcome(Outcome.FAILED, error=f"{ray_task}{type(exc).__name__}: {exc}")))
        return results

    def interrupt(self, handles: list) -> list[tuple[Any, StepOutcome]]:
        """Ctrl-C: asks the steps to stop (those that honour it get up to STOP_GRACE_S to stop by themselves,
        the others are interrupted at once) and collects what they report for up to INTERRUPT_GRACE_S more.
        A step in a thread is asked by the stop request and interrupted by `RunnerInterrupted`; a Ray task is
        cancelled, which its worker takes as the same request when its step honours it (marin.execution.
        interrupts). A second Ctrl-C interrupts every step at once, a third stops waiting."""
        threads = [h for h in handles if h not in self._refs]
        on_ray = [h for h in handles if h in self._refs]
        for handle in threads:
            handle.cancel()
        stopping = ask_running_steps_to_stop() if threads else []
        if stopping:
            _say(
                f"Ctrl-C: {', '.join(stopping)}: saving a checkpoint at the end of the current training step, "
                f"then stopping (up to {STOP_GRACE_S:.0f} s; Ctrl-C again to stop at once)"
            )
        if threads:
            interrupt_running_steps("not_stopping")
        for handle in on_ray:
            try:
                self._ray.cancel(self._refs[handle])
            except Exception as exc:
                logger.warning("could not cancel a step's Ray task: %s", exc)
        if on_ray:
            _say(
                f"Ctrl-C: cancelling {len(on_ray)} Ray task(s); a training among them saves a checkpoint at the end "
                f"of its current step first (up to {STOP_GRACE_S:.0f} s; Ctrl-C again to stop at once)"
            )
        results = [(h, StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)) for h in handles if h.cancelled()]
        pending = [h for h in handles if not h.cancelled()]

        def on_ray_left() -> bool:
            return any(h in self._refs for h in pending)

        def collect(deadline: float, until=lambda: False) -> None:
            while pending and time.monotonic() < deadline and not until():
                for handle, outcome in self.wait_any(pending, timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                    pending.remove(handle)
                    results.append((handle, outcome))

        try:
            if stopping or on_ray:
                try:
                    collect(time.monotonic() + STOP_GRACE_S, until=lambda: not steps_stopping() and not on_ray_left())
                except KeyboardInterrupt:
                    _say("second Ctrl-C: not waiting for the checkpoint")
                self._cancel_again([h for h in pending if h in self._refs])
                late = interrupt_running_steps("stopping")
                if late:
                    _say(f"{', '.join(late)} did not stop in time: interrupted")
            collect(time.monotonic() + INTERRUPT_GRACE_S)
        except KeyboardInterrupt:
            logger.warning("Ctrl-C again: not waiting for %d interrupted step(s)", len(pending))
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        return results

    def _cancel_again(self, handles: list) -> None:
        """Cancels Ray tasks again (a second Ctrl-C, or the grace is over): a worker whose step was asked to stop
        takes it as KeyboardInterrupt."""
        for handle in handles:
            try:
                self._ray.cancel(self._refs[handle])
            except Exception as exc:
                logger.warning("could not cancel a step's Ray task: %s", exc)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        finish_cleanups()
