"""A local Ray cluster whose start-up times out is started again, and what the timed-out try left is killed.

Ray's own 30-s wait for its raylet cannot be made to run out on demand, so these tests hand
`start_local_ray` a stand-in for the `ray` module whose `init` fails the way Ray's does (its message) after
starting a real process that runs from Ray's folder, as a stranded GCS or raylet would. Everything else
(the process tree, the kill, the retry, the error that finally reaches the run) is real.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest
import ray as real_ray

from marin.execution.backends import LOCAL_RAY_START_TRIES, start_local_ray

TIMEOUT = "The current node timed out during startup. This could happen because some of the raylet failed to startup."


class SlowRay:
    """`ray` as far as `start_local_ray` uses it: the first `fail` calls of `init` time out."""

    __file__ = real_ray.__file__

    def __init__(self, fail: int, error: str = TIMEOUT):
        self.fail, self.error, self.calls, self.shutdowns = fail, error, 0, 0
        self.stranded: list[subprocess.Popen] = []
        self.bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", self.__file__])

    def init(self, **_):
        self.calls += 1
        if self.calls <= self.fail:
            stray = [
                sys.executable,
                "-c",
                "import time; time.sleep(600)",
                os.path.join(os.path.dirname(self.__file__), "raylet"),
            ]
            self.stranded.append(subprocess.Popen(stray))
            raise Exception(self.error)

    def shutdown(self):
        self.shutdowns += 1

    def close(self):
        for proc in [*self.stranded, self.bystander]:
            proc.kill()
            proc.wait()


def alive(proc: subprocess.Popen) -> bool:
    """Whether the process still runs (killed children may already be reaped by the code under test)."""
    try:
        return psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def slow_ray(request):
    made = []

    def make(*args, **kwargs):
        made.append(SlowRay(*args, **kwargs))
        return made[-1]

    yield make
    for ray in made:
        ray.close()


def test_a_start_that_times_out_is_tried_again_and_its_stranded_processes_are_killed(slow_ray):
    ray = slow_ray(fail=LOCAL_RAY_START_TRIES - 1)
    start_local_ray(ray)
    assert ray.calls == LOCAL_RAY_START_TRIES and ray.shutdowns == LOCAL_RAY_START_TRIES - 1
    assert len(ray.stranded) == LOCAL_RAY_START_TRIES - 1 and not any(map(alive, ray.stranded))
    assert alive(ray.bystander)


def test_a_start_that_keeps_timing_out_is_the_runs_error_after_the_last_try(slow_ray):
    ray = slow_ray(fail=LOCAL_RAY_START_TRIES)
    with pytest.raises(Exception, match="timed out during startup"):
        start_local_ray(ray)
    assert ray.calls == LOCAL_RAY_START_TRIES
    assert len(ray.stranded) == LOCAL_RAY_START_TRIES and not any(map(alive, ray.stranded))


def test_any_other_start_failure_is_raised_at_once(slow_ray):
    ray = slow_ray(fail=1, error="Permission denied: /tmp/ray")
    with pytest.raises(Exception, match="Permission denied"):
        start_local_ray(ray)
    assert ray.calls == 1 and ray.shutdowns == 0
