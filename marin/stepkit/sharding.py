"""The one shard runner of every data step: Ray tasks on a cluster, a local process pool, or inline.

    stats = run_shards(filter_shard, config, shards, desc="filter", ledger_dir=join(out, ".shards", "filter"))

A data step splits its work into shards (input files, key partitions, buckets) and writes only
`process_shard(config, shard) -> stats`; `run_shards` owns the rest:

- where shards run: when Ray is there (this process runs a Ray task, as a step on the Ray backend
  does, or `RAY_ADDRESS` is set) each shard is a Ray task with the step's per-shard resources (`ShardResources`), spread over
  the cluster's nodes (SPREAD scheduling); otherwise a local pool of `workers` spawn processes
  (forking a process that holds threads can deadlock); inline with one worker, so tests and pdb see
  everything. A task lost to a dead node or worker is retried by Ray on another node
  (`RAY_SYSTEM_RETRIES`); an exception in `process_shard` fails the whole run: the step's own
  exception, with a note naming the shard.
- resume: with a `ledger_dir`, a shard that finishes writes its ledger `part-<i>.json` (its stats and
  where it ran: Ray node id, host, pid, attempt) and a shard with a ledger is never run again; a rerun
  after a crash or a kill -9 runs only the shards without one. A step writes a shard's outputs before
  returning (atomically, as marin.storage does), so a ledger means the outputs are there. Each start
  of a shard is counted in `part-<i>.attempts.json` first, so the ledger's `attempt` says how often
  the shard was started (2: redone after a lost node or a killed run).
- results: the stats of every shard in shard order (read back from the ledgers for skipped shards),
  never in completion order, so a step that totals them or whose shard i writes file i produces the
  same bytes wherever and however its shards ran. Ledgers say where shards ran, so they differ
  between identical runs: a step lists `LEDGERS + "/"` in its volatile_files.txt.
- progress: a tqdm bar per run.

Without a `ledger_dir` (map-style stages whose results the step consumes at once) nothing is skipped
or written and results may be any picklable value. This module lives outside `marin.execution` so
that step code may use it; the executor's own Ray retries use `RAY_SYSTEM_RETRIES` too.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

logger = logging.getLogger(__name__)

C = TypeVar("C")
S = TypeVar("S")

RAY_SYSTEM_RETRIES = 3
"""Ray retries a task lost to a dead worker or node this often (steps and shards alike); never an exception."""
LEDGERS = ".shards"
"""The folder of a step's output that holds its shard ledgers, one sub-folder per stage."""


@dataclass(frozen=True, kw_only=True)
class ShardResources:
    """What one shard needs when it runs as a Ray task (a local pool ignores it); the base of a step's
    `ResourceConfig`, which adds accelerators, retries and gangs."""

    cpu: float = 1
    """Logical CPUs (Ray `num_cpus`)."""
    memory_gb: float | None = None
    """Memory to reserve, in GiB (Ray `memory`), or None for no reservation."""
    custom: dict[str, float] = field(default_factory=dict)
    """Ray custom resources, e.g. {'data_node': 1}."""

    def __post_init__(self):
        name = type(self).__name__
        if not isinstance(self.cpu, int | float) or self.cpu < 0:
            raise ValueError(f"{name}.cpu must be a number >= 0, got {self.cpu!r}")
        if self.memory_gb is not None and self.memory_gb <= 0:
            raise ValueError(f"{name}.memory_gb must be > 0, got {self.memory_gb!r}")

    def ray_options(self) -> dict:
        """These resources as Ray task options."""
        opts: dict[str, Any] = {"num_cpus": self.cpu}
        if self.memory_gb is not None:
            opts["memory"] = int(self.memory_gb * 1024**3)
        if self.custom:
            opts["resources"] = dict(self.custom)
        return opts


def _in_ray_task() -> bool:
    if "ray" not in sys.modules:  # a Ray worker imports ray before it runs a task; importing it here costs ~1.5 CPU-s
        return False
    try:
        import ray
        from ray._private import worker
    except ImportError:
        return False
    return ray.is_initialized() and worker.global_worker.mode == worker.WORKER_MODE


def ray_available() -> bool:
    """True when shards run as Ray tasks: this process runs a Ray task (the step is one), or RAY_ADDRESS is set.

    A driver that merely called `ray.init` (a test session, a notebook) but runs the step in its own
    process keeps its shards local, so what the step logs and what a test patches stay in the process.
    """
    return bool(os.environ.get("RAY_ADDRESS")) or _in_ray_task()


def ledger_path(ledger_dir: str, index: int, kind: str = "") -> str:
    """The ledger of shard `index` (`kind` "attempts": the file counting its starts)."""
    from marin.storage import join

    return join(ledger_dir, f"part-{index:05d}{'.' + kind if kind else ''}.json")


def _where() -> dict:
    """Where this shard runs: the Ray node id when it is a Ray task (else None), host and pid."""
    node = None
    if _in_ray_task():
        import ray

        node = ray.get_runtime_context().get_node_id()
    return {"node": node, "host": socket.gethostname(), "pid": os.getpid()}


def run_one(process_shard: Callable[[C, S], Any], config: C, shard: S, index: int, ledger_dir: str | None) -> Any:
    """Run one shard where this is called (inline, a pool process or a Ray task); write its ledger."""
    if ledger_dir is None:
        return process_shard(config, shard)
    from marin.storage import read_bytes, write_bytes

    where = _where()
    attempts_file = ledger_path(ledger_dir, index, "attempts")
    previous = read_bytes(attempts_file)
    starts = json.loads(previous)["starts"] if previous else []
    starts.append({**where, "t": round(time.time(), 3)})
    write_bytes(attempts_file, json.dumps({"starts": starts}, sort_keys=True).encode())
    began = time.monotonic()
    stats = process_shard(config, shard)
    ran = {**where, "attempt": len(starts), "seconds": round(time.monotonic() - began, 3)}
    ledger = {"shard": index, "stats": stats, "ran": ran}
    write_bytes(ledger_path(ledger_dir, index), json.dumps(ledger, sort_keys=True, indent=1).encode())
    return stats


@contextlib.contextmanager
def local_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """One spawn process pool to share between a step's runs (None when workers <= 1 or on Ray)."""
    if workers <= 1 or ray_available():
        yield None
        return
    with _spawn_pool(workers) as pool:
        yield pool


def _spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of spawn processes (imported here: multiprocessing is not needed to declare a step)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def run_shards(
    process_shard: Callable[[C, S], Any],
    config: C,
    shards: Sequence[S],
    *,
    desc: str,
    ledger_dir: str | None = None,
    workers: int = 1,
    resources: ShardResources | None = None,
    where: Literal["auto", "ray", "local"] = "auto",
    pool: ProcessPoolExecutor | None = None,
    local: Literal["process", "thread"] = "process",
) -> list[Any]:
    """`process_shard(config, shards[i])` for every shard without a ledger; each shard's stats, in shard order.

    process_shard: a module-level function (pickled by reference for processes and Ray tasks); with a
        ledger_dir it returns JSON-able stats (or None).
    ledger_dir: where shard ledgers go (resume per shard); None runs every shard and writes nothing.
    workers: the local pool's size (1: inline); Ray ignores it (the cluster's resources bound it).
    resources: each shard's Ray task resources (default: one CPU).
    where: 'auto' (Ray when `ray_available()`, else local), or force 'ray' / 'local'.
    pool: a pool from `local_pool`, to share between stages; used unless on Ray.
    local: without Ray, 'process' (real parallelism) or 'thread' (I/O-bound shards such as downloads).
    """
    if where not in ("auto", "ray", "local"):
        raise ValueError(f"run_shards: where must be 'auto', 'ray' or 'local', got {where!r}")
    if local not in ("process", "thread"):
        raise ValueError(f"run_shards: local must be 'process' or 'thread', got {local!r}")
    if resources is not None and not isinstance(resources, ShardResources):
        raise TypeError(f"run_shards: resources must be a ShardResources or None, got {type(resources).__name__}")
    if workers < 1:
        raise ValueError(f"run_shards: workers must be >= 1, got {workers}")
    shards = list(shards)
    results: list[Any] = [None] * len(shards)
    todo = list(range(len(shards)))
    if ledger_dir is not None and shards:
        todo = _unfinished(ledger_dir, len(shards), results, desc)
    if not todo:
        return results
    from tqdm import tqdm

    on_ray = where == "ray" or (where == "auto" and ray_available())
    with tqdm(total=len(shards), initial=len(shards) - len(todo), desc=desc, unit="shard", mininterval=1.0) as bar:
        args = (process_shard, config, shards, todo, ledger_dir, results, bar)
        if on_ray:
            _run_ray(*args, (resources or ShardResources()).ray_options(), desc)
        elif pool is None and (workers <= 1 or len(todo) <= 1):
            for i in todo:
                try:
                    results[i] = run_one(process_shard, config, shards[i], i, ledger_dir)
                except Exception as exc:
                    raise _failed(i, shards[i], exc, desc) from None
                bar.update(1)
        else:
            _run_pool(*args, pool, min(workers, len(todo)), local, desc)
    return results


def _unfinished(ledger_dir: str, count: int, results: list, desc: str) -> list[int]:
    """The shards without a ledger; fills `results` with the stats of those that have one (a ledger listed but
    gone when read is an error naming it)."""
    from marin.storage import list_dir, read_bytes_many

    names = set(list_dir(ledger_dir))
    done = [i for i in range(count) if f"part-{i:05d}.json" in names]
    if done:
        raw = read_bytes_many([ledger_path(ledger_dir, i) for i in done])
        missing = [i for i, r in zip(done, raw, strict=True) if r is None]
        if missing:
            raise FileNotFoundError(f"shard ledgers {missing} vanished from {ledger_dir} while the step ran")
        for i, r in zip(done, raw, strict=True):
            results[i] = json.loads(r)["stats"]
        logger.info("%s: %d of %d shards already done, running %d", desc, len(done), count, count - len(done))
    return [i for i in range(count) if f"part-{i:05d}.json" not in names]


def _failed(index: int, shard: Any, exc: BaseException, desc: str) -> BaseException:
    """`exc` itself (callers catch what the step raises), noting which shard raised it."""
    exc.add_note(f"{desc}: raised by shard {index} ({shard!r:.200})")
    return exc


def _run_pool(process_shard, config, shards, todo, ledger_dir, results, bar, pool, workers, local, desc) -> None:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    logger.info("%s: %d shards in a local pool of %d %ss", desc, len(todo), workers, local)
    with contextlib.ExitStack() as stack:
        if pool is None and local == "thread":
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers, thread_name_prefix=desc))
        elif pool is None:
            pool = stack.enter_context(_spawn_pool(workers))
        # threads run in a copy of this context, so what they log reaches the step's log
        futures = {
            pool.submit(contextvars.copy_context().run, run_one, process_shard, config, shards[i], i, ledger_dir)
            if local == "thread"
            else pool.submit(run_one, process_shard, config, shards[i], i, ledger_dir): i
            for i in todo
        }
        for future in as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except Exception as exc:
                for other in futures:
                    other.cancel()
                raise _failed(i, shards[i], exc, desc) from None
            bar.update(1)


def _run_ray(process_shard, config, shards, todo, ledger_dir, results, bar, options: dict, desc: str) -> None:
    import ray

    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=True)
    logger.info("%s: %d shards as Ray tasks (%s, spread over the nodes)", desc, len(todo), options)
    remote = ray.remote(run_one).options(
        max_retries=RAY_SYSTEM_RETRIES, retry_exceptions=False, scheduling_strategy="SPREAD", **options
    )
    config_ref = ray.put(config)
    refs = {remote.remote(process_shard, config_ref, shards[i], i, ledger_dir): i for i in todo}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            i = refs[ref]
            try:
                results[i] = ray.get(ref)
            except Exception as exc:
                for other in pending:
                    ray.cancel(other)
                cause = getattr(exc, "cause", None) or exc
                raise _failed(i, shards[i], cause, desc) from None
            bar.update(1)
