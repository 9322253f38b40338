"""Running the `marin` command in a subprocess from the repository, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
