"""W&B writes outside the step; its files (never its links) are copied into `<output>/wandb/` at each new
checkpoint and at the end, on a local folder and on the GCS and S3 emulators alike."""

from __future__ import annotations

import os
import time

import pytest

from marin.storage import exists, join, read_bytes, write_text
from marin.training.wandb_sync import WandbSync
from tests.emulators import STORES


def _wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.mark.parametrize("store", STORES)
def test_wandb_files_reach_the_step_folder_at_each_checkpoint_and_at_the_end_without_links(
    bucket_prefix, store, tmp_path
):
    out = join(bucket_prefix(store), "checkpoints", "run")
    live = tmp_path / "live"
    run = live / "wandb" / "offline-run-1"
    (run / "files").mkdir(parents=True)
    (run / "run-1.wandb").write_bytes(b"step0 ")
    (run / "files" / "config.yaml").write_text("lr: 3e-3\n")
    os.symlink("offline-run-1", live / "wandb" / "latest-run")
    os.symlink(run / "run-1.wandb", live / "wandb" / "debug-internal.log")
    sync = WandbSync(str(live), join(out, "wandb"), out, poll_s=0.05).start()

    write_text(join(out, "checkpoints", "step-3", "metadata.json"), '{"step": 3}')
    _wait_for(lambda: sync.synced_checkpoints == [3])
    copied = join(out, "wandb", "wandb", "offline-run-1", "run-1.wandb")
    assert read_bytes(copied) == b"step0 "
    assert sync.sync() == 0, "unchanged files are not copied again"

    with open(run / "run-1.wandb", "ab") as f:
        f.write(b"step5")
    sync.close()
    assert read_bytes(copied) == b"step0 step5"
    assert read_bytes(join(out, "wandb", "wandb", "offline-run-1", "files", "config.yaml")) == b"lr: 3e-3\n"
    assert not exists(join(out, "wandb", "wandb", "latest-run", "run-1.wandb"))
    assert not exists(join(out, "wandb", "wandb", "debug-internal.log"))
    assert not live.exists(), "the live folder is removed once copied"
