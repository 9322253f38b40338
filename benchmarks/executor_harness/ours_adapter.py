"""Adapter of the executor benchmark for this project's executor (`marin.execution.Executor`, local backend)."""

from __future__ import annotations

import logging

NAME = "ours"


def import_api():
    import marin.execution as api  # noqa: PLC0415  (the timed import)

    return api


def plan(api, steps, prefix):
    return api.Executor(prefix=prefix, backend="local").plan(steps)


def dry_run(api, steps, prefix):
    return api.Executor(prefix=prefix, backend="local").run(steps, dry_run=True)


def run(api, steps, prefix, max_concurrent=None):
    return api.Executor(prefix=prefix, backend="local", max_concurrent=max_concurrent).run(steps)


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
