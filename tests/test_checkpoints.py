"""A run killed while Levanter writes a checkpoint leaves an empty metadata.json: resume must not trip on it."""

from __future__ import annotations

import json

from marin.training.checkpoints import discard_incomplete_checkpoints, list_checkpoints


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
