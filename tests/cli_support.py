"""Running the `marin` command in a subprocess from the repository, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELLO = os.path.join(REPO, "experiments", "tutorial", "hello_world.py")


def marin(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m marin.cli ARGS` with the repository on the path; output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO, **(env or {})),
        timeout=timeout,
    )


def ran_hello_copy(tmp_path) -> tuple:
    """A copy of the hello_world tutorial (script path, its source) run once into `tmp_path/lab` (the prefix)."""
    script = tmp_path / "hello_copy.py"
    source = open(HELLO).read()
    script.write_text(source)
    prefix = str(tmp_path / "lab")
    result = marin("run", str(script), "--prefix", prefix, "--backend", "local")
    assert result.returncode == 0, result.stdout + result.stderr
    return script, source, prefix
