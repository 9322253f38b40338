"""Attempt folders: where each attempt of a step writes, and what a new attempt does with earlier ones.

An attempt writes into its own staging folder (`marin.storage.staging`): it moves the paths of the config
its step was planned with from the step's output folder to that one (`authoring.rebase`). A new attempt claims its number by creating its log, then adopts the latest earlier
attempt's files, copied, to resume from them (or starts empty for a rerun with changed code) and
discards the rest; once no earlier folder survives under its own name, nothing its runner still does
can reach the published output.

Cleaning up, including after kill -9. A succeeded step's attempt folders (on a bucket, a whole copy of
its outputs) are removed in the background, and only then is its lease released: a step lease still
there beside a `SUCCESS` is the trace of a runner that died before it cleaned up. Each run that executes
steps keeps a marker under `<prefix>/.executor_runs/` while it runs: `<run>.lease` (a lease, heartbeated
like a step's) and `<run>.steps.json` (the steps it runs); it removes both at its end. The next run on
the prefix (`sweep_dead_runs`, at its start and again at its end) takes over every marker whose lease it
can take (its process provably gone, or unchanged past the lease timeout, as for step leases), and for
each step of it that is `SUCCESS`, takes the step's lease (if absent, or held by a gone process or by the
dead run's own process) and removes the attempt folders, then releases it. Steps of a dead run that did
not finish keep their attempt folder: the next runner of the step resumes from it. Temporary files of
local writes that a dead writer left (marin.storage.local) are removed from the step folders of a dead
run and from a step folder whose lease is taken over.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass

from marin.execution.lease import (
    Identity,
    Lease,
    LeaseHeld,
    holder_is_gone,
    new_owner_id,
    same_holder,
    try_acquire,
)
from marin.execution.status import read_status
from marin.storage import (
    create_if_absent,
    delete,
    join,
    list_dir,
    makedirs,
    read_bytes,
    remove_orphaned_temps,
    write_bytes,
)
from marin.storage.layout import (
    ATTEMPT_PREFIX,
    LEASE_FILE,
    RUNS_DIR,
    STATUS_FILE,
    State,
    lease_path,
    logs_dir,
)
from marin.storage.local import TEMP_PREFIX
from marin.storage.staging import adopt, attempts, discard, discard_all, staging_path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a step: its number, its staging folder and its log."""

    output_path: str
    number: int
    staging: str
    log: str
    adopted: str | None
    """The earlier attempt whose files this one resumes from (copied into `staging`), or None."""

    @property
    def first(self) -> bool:
        """The step's first attempt (it claimed log 001): no runner made an attempt folder or published before
        it, so there is nothing earlier to list, adopt, replace or remove."""
        return self.number == 1


def start_attempt(out: str, owner: str, fresh: bool, took_over: bool = False) -> Attempt:
    """Claims the next attempt of `out` and gives it a staging folder (under the step's lease).

    It resumes from a copy of the latest earlier attempt's files, discarding every earlier folder, or
    starts empty when `fresh` (a rerun of a step that succeeded, its code changed). Either way no
    earlier attempt's folder survives under its own name, which is what fences its runner out, and no
    file an earlier runner may still hold open is ever in the new folder.
    """
    if took_over:
        remove_orphaned_temps(out)
        remove_orphaned_temps(logs_dir(out))
    number = 1
    if took_over or create_if_absent(f"{logs_dir(out)}/001.log", b"") is None:
        logged = [int(n.split(".")[0]) for n in list_dir(logs_dir(out)) if n.split(".")[0].isdigit()]
        number = max(logged, default=0) + 1
        while create_if_absent(f"{logs_dir(out)}/{number:03d}.log", b"") is None:  # claimed: two never share one
            number += 1
    staging = staging_path(out, f"{number:03d}-{owner[:8]}")
    # Attempt 1 is the step's first: every attempt claims its log before it makes its folder, so none is there.
    earlier = [a for a in attempts(out) if staging_path(out, a) != staging] if number > 1 else []
    keep = None if fresh or not earlier else earlier[-1]
    for name in earlier:
        if name != keep:
            discard(staging_path(out, name))
    if keep is not None:
        adopt(staging_path(out, keep), staging)
    makedirs(staging)
    return Attempt(out, number, staging, f"{logs_dir(out)}/{number:03d}.log", keep)


_cleanups: list = []
_cleanups_lock = threading.Lock()
_cleaner = None


CLEANUP_THREADS = 8
"""Threads that remove succeeded steps' attempt folders and release their leases. Several, because on a file
system mounted with `discard` (common on cloud disks) each `rmdir` and `unlink` waits ~3 ms for the device:
one thread removes ~300 folders a second, fewer than a run of small steps finishes, and its backlog (with
the deferred leases the keeper heartbeats) would grow with the run (docs/benchmarks.md)."""


def discard_attempts(out: str, lease: Lease, only: str | None = None) -> None:
    """Removes a succeeded step's attempt folders in the background, then releases its `lease` (kept past
    the runner's `with`, and heartbeated, until then): removing a folder costs a few ms even locally, which
    a chain of small steps would otherwise wait for step after step. The lease is released only after the
    folders are gone, which is what lets the sweep tell a runner that died before cleaning up."""
    global _cleaner
    import concurrent.futures

    lease.defer_release()
    with _cleanups_lock:
        if _cleaner is None:
            _cleaner = concurrent.futures.ThreadPoolExecutor(CLEANUP_THREADS, thread_name_prefix="marin-cleanup")
        _cleanups.append(_cleaner.submit(_discard_now, out, lease, only))


def _discard_now(out: str, lease: Lease, only: str | None = None) -> None:
    try:
        discard_all(out, only)
    except Exception as exc:
        logger.warning("could not remove the attempt folders of %s (they stay; harmless): %s", out, exc)
    finally:
        lease.release()


def finish_cleanups() -> None:
    """Waits until the background removal of attempt folders is done (end of a run, end of a Ray task)."""
    import concurrent.futures

    with _cleanups_lock:
        pending = list(_cleanups)
        _cleanups.clear()
    concurrent.futures.wait(pending)


# Run markers and the sweep after runs that died ----------------------------------------------------

_SEEN: dict[str, float] = {}
"""Versions of other runs' marker leases and step leases as this process first met them (staleness)."""


def _runs_dir(prefix: str) -> str:
    return join(prefix, RUNS_DIR)


@dataclass
class RunMarker:
    """The marker of a run in progress under a prefix (see the module's doc); `end()` removes it."""

    prefix: str
    run_id: str
    lease: Lease

    @classmethod
    def begin(cls, prefix: str, run_id: str, outputs: list[str]) -> RunMarker:
        folder = _runs_dir(prefix)
        claim = try_acquire(join(folder, f"{run_id}.lease"), run_id)
        if isinstance(claim, LeaseHeld):
            raise RuntimeError(f"run marker {run_id} exists already")
        claim.__enter__()
        claim.thread_id = None  # a lost marker interrupts nothing: the steps' own leases fence the runners
        body = {"run": run_id, "identity": Identity.of_this_process().fields(), "steps": outputs}
        write_bytes(join(folder, f"{run_id}.steps.json"), json.dumps(body).encode())
        return cls(prefix, run_id, claim)

    def end(self) -> None:
        try:
            delete(join(_runs_dir(self.prefix), f"{self.run_id}.steps.json"))
        except Exception as exc:
            logger.warning("could not remove the run marker %s (a later run does): %s", self.run_id, exc)
            return
        self.lease.release()


def sweep_dead_runs(prefix: str, own_run: str | None = None) -> int:
    """Cleans up after the runs under `prefix` that died (see the module's doc); how many were swept.

    Never raises: what cannot be cleaned now stays for a later run."""
    folder = _runs_dir(prefix)
    try:
        names = list_dir(folder)
    except Exception as exc:
        logger.warning("could not list the run markers in %s: %s", folder, exc)
        return 0
    if not names:
        return 0
    remove_orphaned_temps(folder)
    runs = sorted({n.split(".", 1)[0] for n in names if n.endswith((".lease", ".steps.json"))} - {own_run})
    swept = 0
    for run in runs:
        try:
            swept += _sweep_run(prefix, folder, run)
        except Exception as exc:
            logger.warning("could not clean up after the dead run %s in %s: %s", run, prefix, exc)
    return swept


def _sweep_run(prefix: str, folder: str, run: str) -> int:
    owner = new_owner_id()
    claim = try_acquire(join(folder, f"{run}.lease"), owner, _SEEN, log_takeover=False)
    if isinstance(claim, LeaseHeld):
        return 0
    with claim:
        claim.thread_id = None
        steps_file = join(folder, f"{run}.steps.json")
        raw = read_bytes(steps_file)
        body = json.loads(raw) if raw else {}
        dead = body.get("identity") or {}
        for out in body.get("steps", []):
            sweep_step(out, lambda info, dead=dead: holder_is_gone(info) or same_holder(info, dead))
        if raw is not None:
            delete(steps_file)
    logger.info("cleaned up after the run %s, which ended without doing so", run)
    return 1


def sweep_step(out: str, gone=holder_is_gone) -> bool:
    """Removes what a dead runner left in the step folder `out`: temporary files of local writes, and, when
    the step is SUCCESS, its attempt folders and its lease. True when something was removed."""
    names = list_dir(out)
    temps = any(n.startswith(TEMP_PREFIX) for n in names)
    stale = LEASE_FILE in names or any(n.startswith(ATTEMPT_PREFIX) for n in names)
    removed = False
    if temps:
        removed = remove_orphaned_temps(out) > 0
    if not stale or STATUS_FILE not in names or read_status(out) != State.SUCCESS:
        return removed
    claim = try_acquire(lease_path(out), new_owner_id(), _SEEN, gone=gone, log_takeover=False)
    if isinstance(claim, LeaseHeld):
        return removed
    with claim:
        claim.thread_id = None
        if read_status(out) == State.SUCCESS:
            remove_orphaned_temps(logs_dir(out))
            discard_all(out)
            removed = True
            logger.info("%s: removed the attempt folders and the lease a dead runner left beside its SUCCESS", out)
    return removed
