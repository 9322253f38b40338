"""A child process for tests/test_train_settled.py: two tiny trainings (W&B offline), one after the other.

`python -m tests.settled_training ROOT` trains ROOT/first, writes what ROOT/first holds the moment `train`
returned (and which files under it any process of this tree still holds open) to ROOT/first.json, then
trains ROOT/second, writes ROOT/first-after-second.json and ROOT/second.json, and exits normally, so that
W&B's exit hooks run too. The test compares those snapshots with the folders once the process is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def snapshot(out: Path) -> dict[str, list]:
    """Size and sha256 of every file under `out`, read through links as the executor's manifest reads them;
    a link also records where it points."""
    files: dict[str, list] = {}
    for path in sorted(out.rglob("*")):
        rel = str(path.relative_to(out))
        if path.is_symlink():
            files[rel + " ->"] = [os.readlink(path)]
        if path.is_file():
            data = path.read_bytes()
            files[rel] = [len(data), hashlib.sha256(data).hexdigest()]
    return files


def _process_tree(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return [pid] + [p for kid in kids for p in _process_tree(kid)]


def open_under(out: Path) -> list[str]:
    """Files under `out` that this process or one of its children (W&B's service) holds open."""
    held = []
    for pid in _process_tree(os.getpid()):
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except (FileNotFoundError, PermissionError):
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(str(out) + "/"):
                held.append(f"pid {pid}: {target}")
    return held


def main(root: Path) -> None:
    from marin.training.train import train
    from tests.training_fixtures import corpus, tiny_train_config

    data = {"plays_a": str(corpus(root / "corpus")["plays_a"])}
    for name in ("first", "second"):
        out = root / name
        train(tiny_train_config(str(out), data, num_train_steps=4, checkpoint_every_steps=2, hf_export=False))
        state = {"files": snapshot(out), "open": open_under(out)}
        (root / f"{name}.json").write_text(json.dumps(state, indent=1))
        if name == "second":
            (root / "first-after-second.json").write_text(json.dumps({"files": snapshot(root / "first")}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
