"""A run killed while Levanter writes a checkpoint leaves an empty metadata.json: resume must not trip on it."""

from __future__ import annotations

import json

from marin.storage import join, list_dir, write_bytes
from marin.training.checkpoints import (
    checkpoint_step,
    discard_checkpoints_after,
    discard_incomplete_checkpoints,
    is_checkpoint,
    list_checkpoints,
    resolve_checkpoint,
)


def test_half_written_checkpoint_is_not_counted_and_is_discarded_before_resuming(tmp_path):
    out = tmp_path / "train"
    good, empty, missing = (out / "checkpoints" / f"step-{n}" for n in (4, 8, 12))
    for folder in (good, empty, missing):
        folder.mkdir(parents=True)
        (folder / "params.bin").write_bytes(b"x")
    (good / "metadata.json").write_text(json.dumps({"step": 4}))
    (empty / "metadata.json").write_text("")
    assert list_checkpoints(str(out)) == [(4, str(good))]
    removed = discard_incomplete_checkpoints(str(out))
    assert sorted(removed) == sorted([str(empty), str(missing)])
    assert good.exists() and not empty.exists() and not missing.exists()


def test_checkpoints_are_listed_and_discarded_on_every_storage(prefix):
    out = join(prefix, "train")
    for step, metadata in ((4, b'{"step": 4}'), (8, b""), (12, b'{"step": 12}')):
        write_bytes(join(out, "checkpoints", f"step-{step}", "params", "0"), b"x")
        write_bytes(join(out, "checkpoints", f"step-{step}", "metadata.json"), metadata)
    write_bytes(join(out, "checkpoints", "step-16", "params", "0"), b"x")  # no metadata.json yet

    def step(n: int) -> str:
        return join(out, "checkpoints", f"step-{n}")

    assert list_checkpoints(out) == [(4, step(4)), (12, step(12))]
    assert is_checkpoint(step(12)) and not is_checkpoint(step(16)) and checkpoint_step(step(12)) == 12
    assert resolve_checkpoint(out) == step(12)
    assert sorted(discard_incomplete_checkpoints(out)) == sorted([step(8), step(16)])
    assert discard_checkpoints_after(out, 4) == [step(12)]
    assert list_dir(join(out, "checkpoints")) == ["step-4"]
    assert list_checkpoints(out) == [(4, step(4))]
