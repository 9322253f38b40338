"""A git checkout of its own for tests of code provenance: a committed helper module, then a tracked change
to it and an untracked experiment script that imports it, and `marin` run from inside it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli_support import REPO

MAKE_STEP = '''
import json, os
from dataclasses import dataclass
from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, versioned
from helper import scale


@dataclass(frozen=True)
class MakeConfig:
    n: int = 3
    """How many numbers."""
    output_path: str = THIS_OUTPUT_PATH
    """Where numbers.json goes."""


def make(config):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "numbers.json"), "w") as f:
        json.dump([scale(i) for i in range(config.n)], f)
'''
"""A config and a step function that imports the checkout's helper module; experiments add their steps."""

EXPERIMENT = (
    MAKE_STEP
    + """

step = ExecutorStep("t/make", make, MakeConfig(n=versioned(4)))
if __name__ == "__main__":
    executor_main(steps=[step])
"""
)

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def marin_in(cwd, *args: str) -> subprocess.CompletedProcess:
    """`marin ARGS` run from `cwd` (a checkout of its own), with marin importable from this repository."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), REPO]))
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600
    )


def make_lab(tmp_path):
    """A git repository with a committed helper, then a tracked change to it and an untracked script."""
    repo = tmp_path / "lab"
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    (repo / "helper.py").write_text("def scale(x):\n    return x * 2\n")
    subprocess.run([*GIT, "-C", str(repo), "add", "helper.py"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "helper"], check=True)
    (repo / "helper.py").write_text("def scale(x):\n    return x * 3\n")
    (repo / "exp.py").write_text(EXPERIMENT)
    return repo


def record_of(result: subprocess.CompletedProcess) -> str:
    """The record path a `marin run`/`marin rerun` printed last; the command must have succeeded."""
    assert result.returncode == 0, result.stdout + result.stderr
    return [line.split("record: ", 1)[1] for line in result.stdout.splitlines() if line.startswith("record: ")][-1]
