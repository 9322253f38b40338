"""Running one step under its lease: the code that executes inside a thread or a Ray task.

The runner is a small state machine. It reads the step's state and decides (`_decide`, on
`status.action_for`: skip, fail, or claim the lease to run or to reuse); a lease held by another runner
means waiting and deciding again. A claimed lease is held by one `with` block: inside it the runner
decides once more on the state read under the lease (someone may have finished the step meanwhile; a
`RUNNING` there is what a dead runner left) and runs one attempt; however the block is left (success,
failure, a lost lease, Ctrl-C, SIGTERM), the lease is released.

The order of writes is the contract readers rely on, and `_publish` is the only place that writes it:
`.executor_info` and `RUNNING` first, then the step's own files, then `.executor_manifest.json`, then
`SUCCESS` (or `FAILED`), then the attempt folders are removed (in the background) and only then is the
lease released. A reader trusts only `SUCCESS`, so a crash at any point leaves a state the next run
completes: the lease goes stale, the next runner takes it over and resumes from a copy of the attempt's
files; a lease left beside a `SUCCESS` marks a runner that died before cleaning up, which the next run's
sweep removes (marin.execution.attempts).

The step itself writes only into its attempt's staging folder (marin.storage.staging); everything
that reaches the final folder is moved there out of that folder after a lease check, and a runner
taking over first takes that folder away. So a runner that lost its lease, whatever it still does,
cannot change what its successor published (fencing, docs/executor.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from marin.execution.attempts import Attempt, discard_attempts, finish_cleanups, start_attempt
from marin.execution.authoring import rebase
from marin.execution.capture import capture_into
from marin.execution.interrupts import (
    LEFT_FOR_RERUN,
    RunnerInterrupted,
    RunnerTerminated,
    interruptible_now,
    sigint_stops_honouring_steps,
    sigterm_stops_the_runner,
)
from marin.execution.lease import Lease, LeaseHeld, LeaseLost, new_owner_id, try_acquire
from marin.execution.records import StepInfo, dump_json, utc_now
from marin.execution.status import Action, Outcome, StepOutcome, action_for, read_status, write_status
from marin.stepkit.context import step_resources
from marin.storage import backend_for, compute_manifest, delete_if_unchanged, is_local, read_with_version, write_bytes
from marin.storage.layout import (
    INFO_FILE,
    MANIFEST_FILE,
    STATUS_FILE,
    State,
    info_path,
    lease_path,
    logs_dir,
    status_path,
)
from marin.storage.staging import (
    Fenced,
    prepare_publication,
    publish,
    publish_commit_file,
    stage_commit_file,
    sync_folder,
)

logger = logging.getLogger(__name__)

WAIT_POLL_S = (0.2, 2.0)
FAILED_ELSEWHERE = "failed in another runner (see its log)"


@dataclass
class StepTask:
    """Everything a worker needs to run a step; picklable for Ray."""

    name: str
    output_path: str
    fn: Any
    config: Any
    info: StepInfo
    """What the attempt writes to `.executor_info`."""
    force_run_failed: bool = False
    capture: str = "thread"
    retries: int = 0
    rerun_succeeded: bool = False
    """Run even though the step is SUCCESS (its code changed and the user asked for a rerun)."""
    gang: Any = None
    """A `marin.execution.gang_launch.GangSpec` when the step runs on several hosts (Ray backend), else None."""
    reuse: Any = None
    """A `marin.execution.reuse.CacheFrom`: sources to reuse this step's output from before running it."""
    references: list = field(default_factory=list)
    """(folder, manifest) of inputs published by reference: checked before the step runs and after it
    (marin.execution.reuse.pin_references)."""
    inputs_from: dict = field(default_factory=dict)
    """A dependency's output path -> the folder the step reads it from (an output published by reference
    lives in another prefix)."""


def execute_step(task: StepTask) -> StepOutcome:
    """Runs `task` exactly once across all runners, or waits for whoever runs it.

    Interrupted (Ctrl-C: KeyboardInterrupt in a Ray task, RunnerInterrupted in a thread; a step that honours
    the stop request, in a Ray task too, raises RunnerInterrupted itself once it has saved), it returns
    INTERRUPTED with the step left as it was before this attempt and its lease released. SIGTERM (in a
    process's main thread, i.e. a Ray task) is not a failure either: the lease is released, the step
    stays unfinished for the next runner, then the process exits as it was asked to.
    """
    interruptible_now(task.name)
    try:
        with (
            sigint_stops_honouring_steps() if task.capture == "process" else contextlib.nullcontext(),
            sigterm_stops_the_runner() as previous_handler,
        ):
            try:
                return _execute(task)
            except RunnerTerminated:
                logger.error("step %s: the runner got SIGTERM; lease released, the step stays unfinished", task.name)
        if callable(previous_handler):
            previous_handler(signal.SIGTERM, None)
        raise SystemExit(128 + signal.SIGTERM)
    except (KeyboardInterrupt, RunnerInterrupted):
        return StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN)
    finally:
        interruptible_now(None)
        if task.capture == "process":
            finish_cleanups()


def _decide(task: StepTask, state: State | None, waited: bool) -> Action:
    """What the runner does with its step, from the state it just read (`status.action_for` decides).

    `waited`: this runner already waited for another one (or lost the lease to it); a SUCCESS then is
    that runner's, never a reason to rerun.
    """
    return action_for(
        state,
        force_run_failed=task.force_run_failed,
        rerun_succeeded=task.rerun_succeeded and not waited,
        reusable=task.reuse is not None,
    )


def _settled(action: Action, elsewhere: bool) -> StepOutcome | None:
    """The outcome when `action` ends the runner's work without an attempt (None: it needs the lease)."""
    if action is Action.SKIP:
        return StepOutcome(Outcome.RAN_ELSEWHERE if elsewhere else Outcome.SKIPPED)
    if action is Action.FAIL:
        return StepOutcome(Outcome.FAILED, error=FAILED_ELSEWHERE)
    return None


def _execute(task: StepTask) -> StepOutcome:
    owner, seen, delay, waited = new_owner_id(), {}, WAIT_POLL_S[0], False
    while True:
        if waited:  # the first time, the executor has just read the state; it is read again under the lease
            settled = _settled(_decide(task, read_status(task.output_path), waited), waited)
            if settled is not None:
                return settled
        claim = try_acquire(lease_path(task.output_path), owner, seen)
        if isinstance(claim, LeaseHeld):
            if not waited:
                logger.info("%s: running elsewhere (%s on %s); waiting", task.name, claim.owner[:8], claim.host)
            waited = True
            time.sleep(delay)
            delay = min(delay * 1.5, WAIT_POLL_S[1])
            continue
        try:
            with claim:
                state = read_status(task.output_path)
                action = _decide(task, None if state == State.RUNNING else state, waited)
                return _settled(action, True) or _attempt(task, claim, state, action)
        except LeaseLost:
            logger.error("%s: lease lost to another runner; waiting for it to finish", task.name)
            waited = True


@dataclass
class _Timer:
    """When an attempt's work started, for its outcome."""

    started: str = field(default_factory=utc_now)
    t0: float = field(default_factory=time.monotonic)

    def outcome(self, status: Outcome, attempt: Attempt, log: str, error: str | None = None, **extra) -> StepOutcome:
        return StepOutcome(
            status, self.started, utc_now(), time.monotonic() - self.t0, error, attempt.number, log, extra
        )


def _attempt(task: StepTask, lease: Lease, previous: State | None, action: Action) -> StepOutcome:
    """One attempt under `lease` (`action`: RUN or REUSE). `previous`: the step's state when the lease was
    taken, put back if the attempt is interrupted. A failure of the bookkeeping itself still ends in FAILED."""
    attempt = start_attempt(task.output_path, lease.owner, fresh=task.rerun_succeeded, took_over=lease.took_over)
    try:
        _publish(lease, attempt, State.RUNNING, info=task.info)
        pinned: list = []
        if action is Action.REUSE or task.references:
            decided, pinned = _reuse_or_check(task, lease, attempt, action is Action.REUSE)
            if decided is not None:
                return decided
        return _run(task, lease, attempt, pinned)
    except (KeyboardInterrupt, RunnerInterrupted):
        interruptible_now(None)
        logger.warning("step %s: interrupted; left as it was (%s) for a rerun", task.name, previous or "not started")
        _put_back(lease, attempt, previous)
        return StepOutcome(Outcome.INTERRUPTED, error=LEFT_FOR_RERUN, attempt=attempt.number, log_path=attempt.log)
    except (LeaseLost, RunnerTerminated):
        raise
    except BaseException as exc:
        logger.error("step %s: the runner itself failed: %s", task.name, exc)
        try:
            if lease.still_held():
                write_status(task.output_path, State.FAILED)
        except Exception as inner:
            logger.error("step %s: could not record FAILED (%s); its lease will go stale", task.name, inner)
        if isinstance(exc, Exception):
            return StepOutcome(Outcome.FAILED, error=f"runner error: {type(exc).__name__}: {exc}")
        raise


def _run(task: StepTask, lease: Lease, attempt: Attempt, pinned: list) -> StepOutcome:
    """Runs the step function (with `retries`) into the attempt's folder, then publishes SUCCESS or FAILED
    (FAILED too when an input published by reference, `pinned`, changed while the step ran)."""
    out, timer, error = task.output_path, _Timer(), None
    config = rebase(task.config, {**task.inputs_from, out: attempt.staging}, attempt.staging)
    run = task.fn
    if task.gang is not None:
        from marin.execution.gang_launch import run_gang

        run = functools.partial(run_gang, task.gang, task.fn, log_prefix=f"{logs_dir(out)}/{attempt.number:03d}")
    with capture_into(attempt.log, task.capture == "process"), step_resources(task.info.resources):
        logger.info(
            "step %s: attempt %d%s, output %s%s",
            task.name,
            attempt.number,
            " (took over a stale lease)" if lease.took_over else "",
            out,
            f", resuming from the files of attempt {attempt.adopted}" if attempt.adopted else "",
        )
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
        interruptible_now(None)
        with lease.lock:  # the keeper interrupts under this lock: none is sent from here on
            lease.thread_id = None  # a lost lease is noticed by the publication's own check
        if error is None and pinned:
            error = _references_changed(pinned)
        if error is None:
            logger.info("step %s: finished in %.2f s; writing manifest", task.name, time.monotonic() - timer.t0)
            try:
                _publish(lease, attempt, State.SUCCESS, outputs=True)
                return timer.outcome(Outcome.SUCCESS, attempt, attempt.log)
            except _PreparationFailed as exc:
                error = f"writing the manifest failed: {exc}"
                print(traceback.format_exc(), flush=True)
        _publish(lease, attempt, State.FAILED)
    return timer.outcome(Outcome.FAILED, attempt, attempt.log, error)


def _reuse_or_check(task: StepTask, lease: Lease, attempt: Attempt, reuse: bool) -> tuple[StepOutcome | None, list]:
    """Before the step runs, under its lease: REUSED when `reuse` and a source's output verified and was
    published here (marin.execution.reuse); FAILED when an input published by reference changed; None: run
    the step, with its inputs published by reference pinned (`pin_references`) for the check after it."""
    from marin.execution.reuse import ReferenceChanged, pin_references, reuse_output

    log, timer = f"{logs_dir(task.output_path)}/{attempt.number:03d}.reuse.log", _Timer()
    with capture_into(log, task.capture == "process"):
        try:
            pinned = pin_references(task.references)
            reused = reuse_output(task.reuse, task.info.to_json(), attempt.staging) if reuse else None
        except ReferenceChanged as exc:
            logger.error("step %s: %s; refusing to run on it", task.name, exc)
            _publish(lease, attempt, State.FAILED)
            return timer.outcome(Outcome.FAILED, attempt, log, str(exc)), []
        if reused is None:
            return None, pinned
        info = dataclasses.replace(task.info, reused_from=reused.origin)
        _publish(lease, attempt, State.SUCCESS, info=info, outputs=True, manifest=reused.manifest)
    extra = {"reused_from": reused.origin}
    if reused.origin["mode"] == "reference":
        versions = {} if reused.versions is None else {"versions": reused.versions}
        extra["reference"] = {**reused.manifest, **versions}
    return timer.outcome(Outcome.REUSED, attempt, log, **extra), []


def _references_changed(pinned: list) -> str | None:
    """Why the step's output must not be published: an input published by reference changed while it ran."""
    from marin.execution.reuse import ReferenceChanged, check_pinned

    try:
        check_pinned(pinned)
    except ReferenceChanged as exc:
        logger.error("%s", exc)
        return str(exc)
    return None


class _PreparationFailed(RuntimeError):
    """Staging the manifest or listing the publication failed (nothing was published)."""


def _publish(
    lease: Lease,
    attempt: Attempt,
    state: State,
    info: StepInfo | None = None,
    outputs: bool = False,
    manifest: dict | None = None,
) -> None:
    """Publishes `state`, in the one order readers rely on: [info,] [outputs, manifest,] status[, cleanup].

    `outputs` (SUCCESS only) publishes the step's files with their manifest (`manifest`, when given, is
    one already verified: a reused output's). Everything is staged in the attempt's folder first (SUCCESS:
    the manifest of exactly the staged files); then, after one last lease check, the runner only moves
    files out of that folder. A runner paused right after the check finds, when it resumes, its folder
    taken by the new owner: every move then fails (Fenced), so nothing of it reaches the final folder.
    After the outputs, the attempt folders are removed in the background, and the lease is released once
    they are gone (`discard_attempts`); otherwise the caller's `with` releases it once this returns.
    """
    staging, out = attempt.staging, attempt.output_path
    names = [INFO_FILE] if info is not None else []
    publication = None
    if info is not None:
        stage_commit_file(staging, INFO_FILE, dump_json(info.to_json()))
    if outputs:
        try:
            listing = None if manifest is not None or is_local(staging) else backend_for(staging).list_files(staging)
            listed = manifest if manifest is not None else compute_manifest(staging, listing=listing)
            stage_commit_file(staging, MANIFEST_FILE, dump_json(listed))
            stage_commit_file(staging, STATUS_FILE, state.encode())
            files = [rel for rel, _ in listing] if listing is not None else None
            publication = prepare_publication(staging, out, files)
        except Exception as exc:
            raise _PreparationFailed(f"{type(exc).__name__}: {exc}") from exc
        names.append(MANIFEST_FILE)
    else:
        stage_commit_file(staging, STATUS_FILE, state.encode())
    lease.check()
    try:
        if publication is not None:
            publish(publication)
        for name in names:
            publish_commit_file(staging, out, name)
        if publication is not None:
            sync_folder(out)
        publish_commit_file(staging, out, STATUS_FILE)
    except Fenced as exc:
        logger.error("%s", exc)
        lease.lost.set()
        raise LeaseLost() from exc
    if publication is not None:
        discard_attempts(out, lease, only=staging if attempt.first else None)


def _put_back(lease: Lease, attempt: Attempt, previous: State | None) -> None:
    """After an interrupt: puts back the status the step had before this attempt (none: no status file).

    The staging folder stays: the next attempt resumes from (a copy of) it. Nothing was published, so
    an earlier SUCCESS still vouches for the files in the final folder.
    """
    out = attempt.output_path
    try:
        if previous not in (None, State.RUNNING):
            _publish(lease, attempt, previous)
        else:
            current = read_with_version(status_path(out))
            if current is not None and current.data.strip() == State.RUNNING.encode() and lease.still_held():
                delete_if_unchanged(status_path(out), current.version)
    except (LeaseLost, Exception) as exc:
        logger.warning("could not put back the status of %s (%s); a rerun still resumes it", out, exc)


def mark_dep_failed(output_path: str, info: StepInfo) -> None:
    """Marks a step whose dependency failed, unless it succeeded or runs elsewhere."""
    if read_status(output_path) in (State.SUCCESS, State.RUNNING):
        return
    write_bytes(info_path(output_path), dump_json(info.to_json()))
    write_status(output_path, State.DEP_FAILED)
