"""Adapter of the executor benchmark for this project's executor (`marin.execution.Executor`, local backend).

`benchmarks/ray_adapter.py` is the same adapter with `backend="ray"`: every function here takes the backend.
"""

from __future__ import annotations

import logging

NAME = "ours"


def import_api():
    import marin.execution as api  # noqa: PLC0415  (the timed import)

    return api


def plan(api, steps, prefix, backend="local"):
    return api.Executor(prefix=prefix, backend=backend).plan(steps)


def dry_run(api, steps, prefix, backend="local"):
    return api.Executor(prefix=prefix, backend=backend).run(steps, dry_run=True)


def run(api, steps, prefix, max_concurrent=None, backend="local"):
    return api.Executor(prefix=prefix, backend=backend, max_concurrent=max_concurrent).run(steps)


def describe():
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    out = {}
    for dist in ("marin", "ray", "draccus", "fsspec"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def set_log_level(level: str):
    logging.getLogger().setLevel(level)
    logging.getLogger("marin").setLevel(level)
