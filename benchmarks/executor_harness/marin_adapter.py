"""Adapter: Marin's content-hashed executor (``marin.execution.executor``).

This is the reference implementation of the adapter interface used by
``marin_baseline.py``.  An adapter module must define:

    NAME: str
    def import_api() -> module-like
        Imports the implementation and returns an object exposing
        ExecutorStep / versioned / output_path_of / this_output_path
        (used by dag.py to build the DAG).  Timed as "cold import".
    def plan(api, steps, prefix) -> Mapping[step, str]
        Compute versions/hashes and output paths of all ``steps`` (and their
        transitive deps) without touching the filesystem; return a mapping
        step-object -> output path covering every step of the DAG.
    def dry_run(api, steps, prefix) -> Mapping[step, str]
        The implementation's own "dry run" (may be identical to plan).
    def run(api, steps, prefix, max_concurrent=None) -> Mapping[step, str]
        Execute (or skip already-SUCCEEDED) steps under the local ``prefix``;
        same mapping as plan.
    def describe() -> dict   (versions, knobs; goes into the JSON result)

Because it only uses ``marin.execution`` names (ExecutorStep, versioned,
output_path_of, this_output_path, Executor), this same file
works unchanged against any other project that ships a drop-in
``marin.execution`` package (run marin_baseline.py with that project's
interpreter / PYTHONPATH).  Write ``ours_adapter.py`` only if the other
project's API differs.
"""

from __future__ import annotations

import logging
import os

NAME = "marin-core"


def import_api():
    # NOTE: in marin-core 0.2.20.dev202606180959 `this_output_path` is NOT
    # re-exported by marin.execution.executor (it lives in marin.execution.types
    # and is re-exported by the package marin.execution), so use the package.
    # Importing the package imports marin.execution.executor (the timed cost).
    import marin.execution as api  # noqa: PLC0415  (this is the timed import)

    return api


def _executor(api, prefix):
    return api.Executor(prefix=prefix, executor_info_base_path=os.path.join(prefix, "experiments"))


def plan(api, steps, prefix):
    """Hash-only planning: Executor.compute_version on every step (no I/O).

    Returns {step: output_path} for every step reachable from ``steps``.
    """
    ex = _executor(api, prefix)
    for s in steps:
        ex.compute_version(s, is_pseudo_dep=False)
    return ex.output_paths


def dry_run(api, steps, prefix):
    """Executor.run(dry_run=True): versions + infos + StepRunner dry run, no writes."""
    ex = _executor(api, prefix)
    return ex.run(steps, dry_run=True)


def run(api, steps, prefix, max_concurrent=None):
    """Executor.run(steps): runs steps whose status is not SUCCESS; returns {step: path}."""
    ex = _executor(api, prefix)
    return ex.run(steps, max_concurrent=max_concurrent)


def describe():
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    out = {}
    for dist in (
        "marin-core",
        "marin-fray",
        "marin-rigging",
        "marin-iris",
        "marin-levanter",
        "jax",
        "draccus",
        "fsspec",
    ):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    out["default_max_concurrent"] = 8  # StepRunner: max_workers = max_concurrent or 8
    return out


def set_log_level(level: str):
    logging.getLogger().setLevel(level)
    for name in ("marin", "rigging", "fray", "iris"):
        logging.getLogger(name).setLevel(level)
