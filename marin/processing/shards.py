"""Run one function per shard, in parallel, resumably, with the output independent of the worker count.

A data step maps input shard i to output shard i (`part-0000i.jsonl.gz`). `run_shards` skips every
shard whose output already exists (outputs are only ever moved into place complete, so existing means
done), runs the rest in a process pool of `workers` (inline when 1, so tests and pdb see everything),
and returns each shard's result in shard order. Because shard i's bytes depend only on input shard i
and on the config, one worker and eight workers write the same files; only the wall time changes.
Processes are started with `spawn`: forking a process that holds threads (the executor's, Ray's,
tokenizers') can deadlock.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from marin.storage import exists

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """One spawn-context process pool for a whole step (None when workers <= 1): workers import once."""
    if workers <= 1:
        yield None
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def pending_shards(count: int, done_path: Callable[[int], str] | None, desc: str) -> list[int]:
    """The shards among `count` whose `done_path(i)` is absent (all when done_path is None), logged."""
    todo = [i for i in range(count) if done_path is None or not exists(done_path(i))]
    if len(todo) < count:
        logger.info("%s: %d of %d shards already done, running %d", desc, count - len(todo), count, len(todo))
    return todo


def run_shards(
    fn: Callable[..., Any],
    tasks: Sequence[tuple],
    *,
    workers: int,
    desc: str,
    done_path: Callable[[int], str] | None = None,
    pool: ProcessPoolExecutor | None = None,
) -> list[Any]:
    """Call `fn(*tasks[i])` for every i whose `done_path(i)` is absent; results in task order (None if skipped).

    Runs in `pool` when given, else in a pool of `workers` processes made for this call, else inline.
    """
    todo = pending_shards(len(tasks), done_path, desc)
    skipped = len(tasks) - len(todo)
    results: list[Any] = [None] * len(tasks)
    from tqdm import tqdm

    with tqdm(total=len(tasks), initial=skipped, desc=desc, unit="shard") as bar:
        if pool is None and (workers <= 1 or len(todo) <= 1):
            for i in todo:
                results[i] = fn(*tasks[i])
                bar.update(1)
            return results
        with contextlib.ExitStack() as stack:
            if pool is None:
                pool = stack.enter_context(worker_pool(min(workers, len(todo))))
            futures = {i: pool.submit(fn, *tasks[i]) for i in todo}
            for i in todo:
                results[i] = futures[i].result()
                bar.update(1)
    return results
