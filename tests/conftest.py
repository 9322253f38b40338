"""Shared fixtures: a storage prefix per backend, a shared Ray cluster, and the repo on every worker's path."""

from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("WANDB_MODE", "offline")
# One XLA compilation cache for the session (this process, its subprocesses and Ray workers): dozens of
# tests train the same tiny models, and compiling them dominates a tiny training on the CPU (measured:
# a 12-step training test went from 54 s to 23 s with a warm cache). A compiled executable does not change
# what it computes, so the byte-for-byte tests hold either way. Fresh per session: nothing leaks between runs.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="marin-test-xla-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
if REPO not in sys.path:
    sys.path.insert(0, REPO)

# Storage kinds every executor test runs on. tests/emulators.py adds "gcs" and "s3" when it is present.
STORAGE_KINDS = ["local"]
try:
    from tests import emulators  # noqa: F401

    STORAGE_KINDS = emulators.STORAGE_KINDS
    from tests.emulators import *  # noqa: F403
except ImportError:
    emulators = None


@pytest.fixture(params=STORAGE_KINDS)
def prefix(request, tmp_path) -> str:
    """A fresh, empty experiment prefix on each storage kind."""
    if request.param == "local":
        return str(tmp_path / "prefix")
    return request.getfixturevalue("bucket_prefix_factory")(request.param)


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the whole test session (starting one costs several seconds)."""
    import ray

    from marin.execution.backends import start_local_ray

    if not ray.is_initialized():
        start_local_ray(ray, num_cpus=4, log_to_driver=False)
    yield ray
    ray.shutdown()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ray: uses the session's Ray cluster (the ray_cluster fixture); left out of `make test-fast`"
    )


LONGEST_FIRST = (
    "test_gang.py",
    "test_cluster.py",
    "test_tiny_ladder.py",
    "test_readme_commands.py",
    "test_executor_interrupt.py",
    "test_executor_buckets.py",
    "test_isoflop_ladder.py",
    "test_tutorial.py",
    "test_rerun_chain.py",
    "test_mesh_layouts.py",
    "test_reuse_tutorial.py",
    "test_executor_leases.py",
    "test_train.py",
)
"""The test files that take longest in `make test` (over ~50 s each on 2 cores, docs/testing.md), longest first.
They are collected first (the Makefile turns off pytest-xdist's own order, which puts the files with most
tests first and left these, a few long tests each, to run last on one worker while the other idled), and
`pytest_xdist_make_scheduler` hands them to one worker in that order while the other takes the short files
from the other end: the long files, most of which start Ray clusters, gangs or trainings, never run two at
once on the two cores (two at once made a local Ray miss its 30 s start-up deadline three times running)."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the first worker taking files from the front of the collection (LONGEST_FIRST)
    and the others from its back, the shortest first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestOnOneWorker(LoadFileScheduling):
        def _assign_work_unit(self, node) -> None:
            if node.gateway.id != "gw0" and len(self.workqueue) > 1:
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            super()._assign_work_unit(node)

    return LongestOnOneWorker(config, log)


def pytest_collection_modifyitems(config, items):
    """Marks every test that uses the `ray_cluster` fixture `ray`, so that `make test-fast` can leave it out
    (starting a cluster costs 10-20 s on 2 cores) without a list of names to keep up to date; puts the files
    of LONGEST_FIRST first, in that order (the others keep theirs)."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
