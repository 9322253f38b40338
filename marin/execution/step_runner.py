"""Running one step under its lease: the code that executes inside a thread or a Ray task.

The order of writes is the contract readers rely on: `.executor_info` and `RUNNING` first, then the
step's own files, then `.executor_manifest.json`, then `SUCCESS`, then the lease is released. A
reader trusts only `SUCCESS`, so a crash at any point leaves a state the next run completes: the
lease goes stale, the next runner takes it over and resumes from the attempt's files.

The step itself writes only into its attempt's staging folder (marin.storage.staging); everything
that reaches the final folder is moved there out of that folder after a lease check, and a runner
taking over first takes that folder away. So a runner that lost its lease, whatever it still does,
cannot change what its successor published (fencing, DESIGN.md §11).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from marin.execution.attempts import (
    bind_output,
    claim_attempt,
    discard_attempts,
    finish_cleanups,
    take_over_staging,
)
from marin.execution.capture import capture_process, capture_thread
from marin.execution.interrupts import (
    INTERRUPTED,
    LEFT_FOR_RERUN,
    RunnerInterrupted,
    RunnerTerminated,
    interruptible_now,
    sigterm_stops_the_runner,
)
from marin.execution.lease import (
    Lease,
    LeaseHeld,
    LeaseLost,
    keep_alive,
    new_owner_id,
    try_acquire,
)
from marin.execution.records import dump_json, utc_now
from marin.execution.status import (
    DEP_FAILED,
    FAILED,
    RUNNING,
    SUCCESS,
    info_path,
    lease_path,
    logs_dir,
    read_status,
    status_path,
    write_status,
)
from marin.step_context import step_resources
from marin.storage import (
    compute_manifest,
    delete_if_unchanged,
    is_local,
    makedirs,
    read_bytes,
    read_with_version,
    strip_protocol,
    write_bytes,
)
from marin.storage.layout import INFO_FILE, MANIFEST_FILE, STATUS_FILE
from marin.storage.staging import (
    Fenced,
    Publication,
    prepare_publication,
    publish,
    publish_commit_file,
    stage_commit_file,
    staging_path,
    sync_folder,
)

logger = logging.getLogger(__name__)

WAIT_POLL_S = (0.2, 2.0)


@dataclass
class StepTask:
    """Everything a worker needs to run a step; picklable for Ray."""

    name: str
    output_path: str
    fn: Any
    config: Any
    info: dict
    force_run_failed: bool = False
    capture: str = "thread"
    retries: int = 0
    rerun_succeeded: bool = False
    """Run even though the step is SUCCESS (its code changed and the user asked for a rerun)."""
    gang: Any = None
    """A `marin.execution.gang.GangSpec` when the step runs on several hosts (Ray backend), else None."""


@dataclass
class StepOutcome:
    """What happened to a step in this run."""

    status: str
    """SUCCESS (ran here), SKIPPED (already done), RAN_ELSEWHERE, FAILED, DEP_FAILED or NOT_RUN."""
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    error: str | None = None
    attempt: int | None = None
    log_path: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("SUCCESS", "SKIPPED", "RAN_ELSEWHERE")


def execute_step(task: StepTask) -> StepOutcome:
    """Runs `task` exactly once across all runners, or waits for whoever runs it.

    Interrupted (Ctrl-C: KeyboardInterrupt in a Ray task, RunnerInterrupted in a thread), it returns
    INTERRUPTED with the step left as it was before this attempt and its lease released.
    """
    interruptible_now(task.name)
    try:
        return _execute_step(task)
    except (KeyboardInterrupt, RunnerInterrupted):
        return StepOutcome(INTERRUPTED, error=LEFT_FOR_RERUN)
    finally:
        interruptible_now(None)
        if task.capture == "process":
            finish_cleanups()


def _execute_step(task: StepTask) -> StepOutcome:
    owner = new_owner_id()
    seen_versions: dict[str, float] = {}
    delay = WAIT_POLL_S[0]
    announced = False
    while True:
        status = read_status(task.output_path)
        if status == SUCCESS and not (task.rerun_succeeded and not announced):
            return StepOutcome("RAN_ELSEWHERE" if announced else "SKIPPED")
        if status == FAILED and not task.force_run_failed:
            return StepOutcome("FAILED", error="failed in another runner (see its log)")
        claim = try_acquire(lease_path(task.output_path), owner, seen_versions)
        if isinstance(claim, LeaseHeld):
            if not announced:
                logger.info("%s: running elsewhere (%s on %s); waiting", task.name, claim.owner[:8], claim.host)
                announced = True
            time.sleep(delay)
            delay = min(delay * 1.5, WAIT_POLL_S[1])
            continue
        try:
            status = read_status(task.output_path)
            if status == SUCCESS and not (task.rerun_succeeded and not announced):
                claim.release()
                return StepOutcome("RAN_ELSEWHERE")
            if status == FAILED and not task.force_run_failed:
                claim.release()
                return StepOutcome("FAILED", error="failed in another runner (see its log)")
            return _run_with_lease(task, claim, status)
        except LeaseLost:
            logger.error("%s: lease lost to another runner; waiting for it to finish", task.name)
            announced = True
            continue


@contextlib.contextmanager
def _log_sink(task: StepTask, log_path: str, lease: Lease):
    """Opens the attempt's log (locally, or a temp file mirrored to the bucket) and captures into it."""
    if is_local(log_path):
        local = strip_protocol(log_path)
        makedirs(os.path.dirname(local))
        mirror = None
    else:
        fd, local = tempfile.mkstemp(prefix="marin-log-", suffix=".log")
        os.close(fd)

        def mirror():
            with open(local, "rb") as f:
                write_bytes(log_path, f.read())

        lease.on_tick = mirror
    try:
        if task.capture == "process":
            with capture_process(local):
                yield
        else:
            with open(local, "a", encoding="utf-8", buffering=1) as f, capture_thread(f):
                yield
    finally:
        lease.on_tick = None
        if mirror is not None:
            try:
                mirror()
            finally:
                os.unlink(local)


def _run_with_lease(task: StepTask, lease: Lease, previous: str | None) -> StepOutcome:
    """Runs the step; any failure of the bookkeeping itself still ends in FAILED and a released lease.

    SIGTERM (in a process's main thread, i.e. a Ray task) is not a failure: the lease is released and
    the step stays unfinished for the next runner; then the process exits as it was asked to.
    """
    with sigterm_stops_the_runner() as previous_handler:
        try:
            return _run_with_lease_guarded(task, lease, previous)
        except RunnerTerminated:
            logger.error("step %s: the runner got SIGTERM; releasing the lease, the step stays unfinished", task.name)
            lease.release()
    if callable(previous_handler):
        previous_handler(signal.SIGTERM, None)
    raise SystemExit(128 + signal.SIGTERM)


def _run_with_lease_guarded(task: StepTask, lease: Lease, previous: str | None) -> StepOutcome:
    try:
        return _run_with_lease_unguarded(task, lease, previous)
    except (LeaseLost, RunnerTerminated, KeyboardInterrupt, RunnerInterrupted):
        lease.release()
        raise
    except BaseException as exc:
        logger.error("step %s: the runner itself failed: %s", task.name, exc)
        try:
            if lease.still_held():
                write_status(task.output_path, FAILED)
        except Exception as inner:
            logger.error("step %s: could not record FAILED (%s); its lease will go stale", task.name, inner)
        lease.release()
        if isinstance(exc, Exception):
            return StepOutcome("FAILED", error=f"runner error: {type(exc).__name__}: {exc}")
        raise


def _run_with_lease_unguarded(task: StepTask, lease: Lease, previous: str | None) -> StepOutcome:
    """`previous`: the step's status when this runner took the lease (put back if it is interrupted)."""
    out = task.output_path
    attempt = claim_attempt(out)
    log_path = f"{logs_dir(out)}/{attempt:03d}.log"
    staging = staging_path(out, f"{attempt:03d}-{lease.owner[:8]}")
    try:
        return _run_attempt(task, lease, attempt, log_path, staging)
    except (KeyboardInterrupt, RunnerInterrupted):
        interruptible_now(None)
        logger.warning("step %s: interrupted; left as it was (%s) for a rerun", task.name, previous or "not started")
        _leave_unfinished(lease, staging, out, previous)
        return StepOutcome(INTERRUPTED, error=LEFT_FOR_RERUN, attempt=attempt, log_path=log_path)


def _leave_unfinished(lease: Lease, staging: str, out: str, previous: str | None) -> None:
    """Puts back the status the step had before this attempt (none: no status file) and releases the lease.

    The staging folder stays: the next attempt resumes from it. Nothing was published, so an earlier
    SUCCESS still vouches for the files in the final folder.
    """
    try:
        if previous not in (None, RUNNING):
            stage_commit_file(staging, STATUS_FILE, previous.encode())
            _publish_under_lease(lease, staging, out, None, [STATUS_FILE])
        else:
            current = read_with_version(status_path(out))
            if current is not None and current.data.strip() == RUNNING.encode() and lease.still_held():
                delete_if_unchanged(status_path(out), current.version)
    except (LeaseLost, Exception) as exc:
        logger.warning("could not put back the status of %s (%s); a rerun still resumes it", out, exc)
    lease.release()


def _run_attempt(task: StepTask, lease: Lease, attempt: int, log_path: str, staging: str) -> StepOutcome:
    out = task.output_path
    keep_alive(lease)
    adopted = take_over_staging(out, staging, fresh=task.rerun_succeeded)
    stage_commit_file(staging, INFO_FILE, dump_json(task.info))
    stage_commit_file(staging, STATUS_FILE, RUNNING.encode())
    _publish_under_lease(lease, staging, out, None, [INFO_FILE, STATUS_FILE])
    config = bind_output(task.config, staging)
    started, t0 = utc_now(), time.monotonic()
    error = None
    try:
        with _log_sink(task, log_path, lease), step_resources(task.info.get("resources")):
            logger.info(
                "step %s: attempt %d%s, output %s%s",
                task.name,
                attempt,
                " (took over a stale lease)" if lease.took_over else "",
                out,
                f", resuming from the files of attempt {adopted}" if adopted else "",
            )
            run = task.fn
            if task.gang is not None:
                from marin.execution.gang import run_gang

                run = functools.partial(run_gang, task.gang, task.fn, log_prefix=f"{logs_dir(out)}/{attempt:03d}")
            for tries_left in range(task.retries, -1, -1):
                try:
                    run(config)
                    error = None
                    break
                except (Exception, SystemExit) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    print(traceback.format_exc(), flush=True)
                    if tries_left:
                        logger.warning("step %s failed (%s); retrying (%d left)", task.name, error, tries_left)
            if error is None:
                logger.info("step %s: finished in %.2f s; writing manifest", task.name, time.monotonic() - t0)
            interruptible_now(None)
            lease.thread_id = None
    except LeaseLost:
        lease.release()
        raise
    ended = utc_now()
    duration = time.monotonic() - t0
    if error is not None:
        stage_commit_file(staging, STATUS_FILE, FAILED.encode())
        _publish_under_lease(lease, staging, out, None, [STATUS_FILE])
        lease.release()
        return StepOutcome("FAILED", started, ended, duration, error, attempt, log_path)
    try:
        stage_commit_file(staging, MANIFEST_FILE, dump_json(compute_manifest(staging)))
        stage_commit_file(staging, STATUS_FILE, SUCCESS.encode())
        publication = prepare_publication(staging, out)
    except Exception as exc:
        error = f"writing the manifest failed: {type(exc).__name__}: {exc}"
        _append_log(log_path, traceback.format_exc())
        stage_commit_file(staging, STATUS_FILE, FAILED.encode())
        _publish_under_lease(lease, staging, out, None, [STATUS_FILE])
        lease.release()
        return StepOutcome("FAILED", started, ended, duration, error, attempt, log_path)
    _publish_under_lease(lease, staging, out, publication, [MANIFEST_FILE, STATUS_FILE])
    lease.release()
    discard_attempts(out)
    return StepOutcome("SUCCESS", started, ended, duration, None, attempt, log_path)


def _publish_under_lease(
    lease: Lease, staging: str, out: str, publication: Publication | None, commit_files: list[str]
) -> None:
    """After one last lease check, only moves out of the staging folder: outputs, then executor files.

    A runner paused right after the check finds, when it resumes, its staging folder taken by the new
    owner: every move then fails (Fenced), so nothing of it reaches `out`.
    """
    if not lease.still_held():
        lease.release()
        raise LeaseLost()
    try:
        if publication is not None:
            publish(publication)
        for name in commit_files:
            if name == STATUS_FILE and publication is not None:
                sync_folder(out)
            publish_commit_file(staging, out, name)
    except Fenced as exc:
        logger.error("%s", exc)
        lease.lost.set()
        lease.release()
        raise LeaseLost() from exc


def _append_log(log_path: str, text: str) -> None:
    """Adds `text` to an attempt's log after its sink closed: appended locally, the bucket copy rewritten."""
    try:
        if is_local(log_path):
            with open(strip_protocol(log_path), "a", encoding="utf-8") as f:
                f.write(text)
        else:
            write_bytes(log_path, (read_bytes(log_path) or b"") + text.encode("utf-8"))
    except Exception as exc:
        logger.warning("could not add to the log %s: %s", log_path, exc)


def mark_dep_failed(output_path: str, info: dict) -> None:
    """Marks a step whose dependency failed, unless it succeeded or runs elsewhere."""
    if read_status(output_path) in (SUCCESS, RUNNING):
        return
    write_bytes(info_path(output_path), dump_json(info))
    write_status(output_path, DEP_FAILED)
