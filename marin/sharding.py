"""Fan a step's shards out: Ray tasks on a cluster, a local process pool otherwise, same results either way.

    results = map_shards(hash_shard, shard_paths, resources={"num_cpus": 1, "memory": 2 * 1024**3})

A data step (dedup, tokenize) splits its input into shards and calls `map_shards(fn, items)`. When Ray
is there (this process is a Ray task or driver, or `RAY_ADDRESS` is set) each item becomes a Ray task
with the given options, so the shards spread over the cluster's nodes; otherwise they run in a local
pool. Results come back in input order, never in completion order, so a step that writes its output
from them (or whose shard `i` writes file `i`) produces the same bytes wherever the shards ran. Node
deaths are retried by Ray (system failures only); an exception in `fn` fails the whole map, naming the
shard. This module lives outside `marin.execution` so that step code may use it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal

logger = logging.getLogger(__name__)

RAY_SYSTEM_RETRIES = 3
"""Ray retries a task lost to a dead worker or node this often (steps and shards alike); never an exception."""


class ShardFailed(RuntimeError):
    """A shard's function raised; `index` is the shard's position in the input."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def ray_available() -> bool:
    """True when shards would run as Ray tasks: Ray is initialized here, or RAY_ADDRESS names a cluster."""
    if os.environ.get("RAY_ADDRESS"):
        return True
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized()


def _ray_task_options(resources: dict | None) -> dict:
    if resources is None:
        return {"num_cpus": 1}
    if not isinstance(resources, dict):
        raise TypeError(
            f"map_shards: resources must be a dict of Ray task options or None, got {type(resources).__name__}"
        )
    return dict(resources)


def map_shards(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    resources: dict | None = None,
    *,
    max_workers: int | None = None,
    local: Literal["process", "thread"] = "process",
    where: Literal["auto", "ray", "local"] = "auto",
    desc: str = "shards",
) -> list[Any]:
    """`[fn(item) for item in items]`, in parallel; results in input order.

    fn: a module-level function (it is pickled by reference for processes and Ray).
    resources: Ray task options per shard ({'num_cpus': 1, 'memory': bytes, 'resources': {...}}); None for
        one CPU. Ignored by the local pool. (A step's ResourceConfig belongs to the executor layer, which
        this module may not import.)
    max_workers: the local pool's size (default: the CPU count, at most len(items)).
    local: 'process' (default, real parallelism) or 'thread' (for I/O-bound shards) when Ray is absent.
    where: 'auto' (Ray when `ray_available()`, else local), or force 'ray' / 'local'.
    """
    if where not in ("auto", "ray", "local"):
        raise ValueError(f"map_shards: where must be 'auto', 'ray' or 'local', got {where!r}")
    options = _ray_task_options(resources)
    items = list(items)
    if not items:
        return []
    if where == "ray" or (where == "auto" and ray_available()):
        return _map_ray(fn, items, options, desc)
    return _map_local(fn, items, max_workers, local, desc)


def _progress(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="shard", mininterval=1.0)


def _failed(index: int, item: Any, exc: BaseException) -> ShardFailed:
    return ShardFailed(f"shard {index} ({item!r:.120}) failed: {type(exc).__name__}: {exc}", index)


def _map_local(fn, items: list, max_workers: int | None, local: str, desc: str) -> list:
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(items)))
    logger.info("%s: %d shards in a local %s pool of %d", desc, len(items), local, workers)
    if local == "thread":
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    elif local == "process":
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )
    else:
        raise ValueError(f"map_shards: local must be 'process' or 'thread', got {local!r}")
    results: list = [None] * len(items)
    with pool, _progress(len(items), desc) as bar:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except Exception as exc:
                for other in futures:
                    other.cancel()
                raise _failed(i, items[i], exc) from exc
            bar.update(1)
    return results


def _map_ray(fn, items: list, options: dict, desc: str) -> list:
    import ray

    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=True)
    logger.info("%s: %d shards as Ray tasks (%s)", desc, len(items), options)
    remote = ray.remote(fn).options(max_retries=RAY_SYSTEM_RETRIES, retry_exceptions=False, **options)
    refs = [remote.remote(item) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list = [None] * len(items)
    pending = list(refs)
    with _progress(len(items), desc) as bar:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = index[ref]
                try:
                    results[i] = ray.get(ref)
                except Exception as exc:
                    for other in pending:
                        ray.cancel(other)
                    cause = getattr(exc, "cause", None) or exc
                    raise _failed(i, items[i], cause) from exc
                bar.update(1)
    return results
