"""A train step has finished writing its output when `train` returns: W&B (offline, inside the output)
included, in a process that goes on to train again and then exits.

The executor hashes a step's output into its manifest and writes SUCCESS as soon as the step function
returns; anything that writes there later (W&B's service process, a W&B log handler left open, a link
to a log outside the folder) makes `marin verify` see bytes that no longer match.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.settled_training import snapshot

REPO = Path(__file__).resolve().parents[1]


def test_train_output_no_longer_changes_once_train_returns(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.settled_training", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    time.sleep(3)  # anything W&B's service still had to write has had time to land
    first, second = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("first", "second"))
    assert first["open"] == [] and second["open"] == [], "files under a returned step's output are still open"
    assert any("offline-run-" in path for path in first["files"]), "the offline W&B run lives in the output"
    after_second = json.loads((tmp_path / "first-after-second.json").read_text())["files"]
    assert after_second == first["files"], "the second training wrote into the first one's output"
    assert snapshot(tmp_path / "first") == first["files"], "the first output changed after train returned"
    assert snapshot(tmp_path / "second") == second["files"], "the second output changed after train returned"
    for name in ("first", "second"):
        out = tmp_path / name
        for link in (p for p in out.rglob("*") if p.is_symlink()):
            assert link.resolve().is_relative_to(out.resolve()), f"{link} leads outside its step's output"
