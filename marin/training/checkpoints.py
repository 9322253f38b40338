"""Finding checkpoints in a train step's output, on any storage (through marin.storage), without importing Levanter.

Levanter writes a checkpoint as `checkpoints/step-<N>/` and writes its `metadata.json` last, in the commit
callback; a folder without it is a checkpoint still being written (or one a crash cut short). Readers here
trust only that marker, so an evaluation pointed at a run still in progress reads its latest complete
checkpoint and never a half-written one.
"""

from __future__ import annotations

import json
import re

from marin.storage import delete, exists, join, list_dir, read_bytes

_STEP_DIR = re.compile(r"^step-(\d+)$")


def list_checkpoints(train_output: str) -> list[tuple[int, str]]:
    """Complete checkpoints under `<train_output>/checkpoints/` as (step, path), oldest first.

    While the train step still runs, its checkpoints are in its attempt's staging folder (see
    marin.storage.staging): those of the latest attempt count then, so an evaluation that depends on it
    `nonblocking()` finds them.
    """
    found = _complete_checkpoints(train_output)
    if found:
        return found
    from marin.storage.staging import attempts, staging_path

    names = attempts(train_output)
    return _complete_checkpoints(staging_path(train_output, names[-1])) if names else []


def _complete_checkpoints(train_output: str) -> list[tuple[int, str]]:
    root = join(train_output, "checkpoints")
    found = []
    for name in list_dir(root):  # never a cached listing: a gang's host 0 may have written since
        match = _STEP_DIR.match(name)
        if match and _metadata_ok(join(root, name)):
            found.append((int(match.group(1)), join(root, name)))
    return sorted(found)


def _metadata_ok(checkpoint_dir: str) -> bool:
    """A checkpoint counts once its metadata.json is complete JSON (a kill can leave it empty)."""
    raw = read_bytes(join(checkpoint_dir, "metadata.json"))
    try:
        return raw is not None and "step" in json.loads(raw)
    except (ValueError, TypeError):
        return False


def discard_incomplete_checkpoints(train_output: str) -> list[str]:
    """Deletes step folders a killed run left unfinished (no or unreadable metadata.json), so that
    resuming starts from the last complete checkpoint instead of tripping over a half-written one.
    Only called by the train step while it holds the step's lease: nobody else writes here."""
    root = join(train_output, "checkpoints")
    removed = []
    for name in list_dir(root):
        path = join(root, name)
        if _STEP_DIR.match(name) and not _metadata_ok(path):
            delete(path, recursive=True)
            removed.append(path)
    return removed


def discard_checkpoints_after(train_output: str, step: int) -> list[str]:
    """Deletes the complete checkpoints of steps after `step` (the last step whose metrics are on disk).

    Levanter starts a step's checkpoint in the hooks that run before the step's last figures are logged,
    and commits it in the background: a run killed in between leaves a checkpoint whose step has no
    metrics line. Resuming from it would leave that line out for good, so the run resumes from an earlier
    checkpoint instead and logs the step again. Called, like `discard_incomplete_checkpoints`, only by the
    train step holding the step's lease."""
    removed = []
    for found, path in _complete_checkpoints(train_output):
        if found > step:
            delete(path, recursive=True)
            removed.append(path)
    return removed


def checkpoint_step(checkpoint: str) -> int:
    """The step recorded in a checkpoint's `metadata.json`."""
    raw = read_bytes(join(checkpoint, "metadata.json"))
    if raw is None:
        raise FileNotFoundError(f"{join(checkpoint, 'metadata.json')} does not exist (not a complete checkpoint)")
    return int(json.loads(raw)["step"])


def is_checkpoint(path: str) -> bool:
    return exists(join(path, "metadata.json"))


def resolve_checkpoint(path: str) -> str:
    """A checkpoint folder itself, or the latest complete checkpoint of a train step's output."""
    if is_checkpoint(path):
        return path
    found = list_checkpoints(path)
    if not found:
        raise FileNotFoundError(f"no complete checkpoint (a step-N folder with metadata.json) under {path}/checkpoints")
    return found[-1][1]


def train_output_of(checkpoint: str) -> str:
    """The train step's output folder that holds `checkpoint` (`<out>/checkpoints/step-N`)."""
    return checkpoint.rstrip("/").rsplit("/", 2)[0]


def unfinished_training(train_output: str) -> tuple[int | None, int | None] | None:
    """Where a train step that has not finished stands, from its latest attempt's staging folder: (the last
    step whose metrics line was written, None when none was; the checkpoint step a rerun resumes from, None
    when it starts again from step 0). None when no attempt has left a folder. The resume point is what the
    train step picks on its rerun: the latest complete checkpoint that its metrics reach."""
    from marin.storage.staging import attempts, staging_path
    from marin.training.metrics import last_logged_step

    names = attempts(train_output)
    if not names:
        return None
    staged = staging_path(train_output, names[-1])
    logged = last_logged_step(join(staged, "metrics.jsonl"))
    steps = [step for step, _ in _complete_checkpoints(staged) if logged is None or step <= logged]
    return (None if logged is None or logged < 0 else logged), (steps[-1] if steps else None)
