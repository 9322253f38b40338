"""Adapter for benchmarks/executor_harness/marin_baseline.py: this project's executor with the Ray backend.

The local-backend adapter is benchmarks/executor_harness/ours_adapter.py; this one differs only in `backend="ray"`
(a local Ray cluster is started in each measured process, and its start-up is part of the timed run).
"""

from __future__ import annotations

import logging

NAME = "ours-ray"


def import_api():
    import marin.execution as api

    return api


def plan(api, steps, prefix):
    return api.Executor(prefix=prefix, backend="ray").plan(steps)


def dry_run(api, steps, prefix):
    return api.Executor(prefix=prefix, backend="ray").run(steps, dry_run=True)


def run(api, steps, prefix, max_concurrent=None):
    return api.Executor(prefix=prefix, backend="ray", max_concurrent=max_concurrent).run(steps)


def describe():
    from importlib.metadata import version

    return {dist: version(dist) for dist in ("marin", "ray")}


def set_log_level(level: str):
    logging.getLogger().setLevel(level)
