"""The W&B run folder: written by W&B outside the step, copied into `<output>/wandb/` by marin.

W&B writes its offline run into a live folder: it appends to files, keeps them open in its service
process, and keeps replacing symlinks (`wandb/debug.log`, `wandb/debug-internal.log`, `latest-run`) while
a run starts or ends. Inside a step's output that folder is a race: trainings sharing a process (the local
backend's threads) finish at different times, and the executor hashes each finished step's folder for its
manifest while W&B may still be rewriting links there (the tiny ladder lost a rung to a
`FileNotFoundError` on `wandb/wandb/debug-internal.log` that way). On a bucket W&B cannot write at all.

So W&B always writes into a local temporary folder (`WANDB_DIR`), and `WandbSync` copies it into the
step's `wandb/` folder: after every new complete checkpoint (a thread watches `checkpoints/`) and once
at the end, after W&B has stopped. Only regular files are copied, never links, and a file is copied
again only when its size or modification time changed; the copy is atomic per file (a reader of the
step folder sees whole files of some sync). The step's folder thus holds only files marin wrote and
finished writing by the time the step returns, on local folders and buckets alike, and `wandb sync`
works on it as on W&B's own folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading

from marin.storage import join, write_bytes
from marin.training.checkpoints import list_checkpoints

logger = logging.getLogger(__name__)


def live_wandb_dir() -> str:
    """A fresh local folder for W&B to write its run into (WANDB_DIR), outside any step output."""
    return tempfile.mkdtemp(prefix="marin-wandb-")


class WandbSync:
    """Copies W&B's live folder `source` into `dest` (a folder on any storage) when asked, when a new
    checkpoint of `train_output` appears (checked every `poll_s` while running), and at `close()`."""

    def __init__(self, source: str, dest: str, train_output: str, poll_s: float = 5.0):
        self.source = source
        self.dest = dest
        self.train_output = train_output
        self.poll_s = poll_s
        self.synced_checkpoints: list[int] = []
        """Steps of the checkpoints after which a sync ran (for the logs and the tests)."""
        self._copied: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync(self) -> int:
        """Copies every regular file of `source` that changed since the last sync; returns how many."""
        copied = 0
        with self._lock:
            for dirpath, dirnames, filenames in os.walk(self.source):
                dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
                for name in sorted(filenames):
                    path = os.path.join(dirpath, name)
                    try:
                        if os.path.islink(path) or not os.path.isfile(path):
                            continue
                        stat = os.stat(path)
                        key = (stat.st_size, stat.st_mtime_ns)
                        rel = os.path.relpath(path, self.source)
                        if self._copied.get(rel) == key:
                            continue
                        with open(path, "rb") as f:
                            data = f.read()
                    except FileNotFoundError:
                        continue  # W&B removed it meanwhile (a temporary file): nothing to keep
                    write_bytes(join(self.dest, *rel.split(os.sep)), data)
                    self._copied[rel] = key
                    copied += 1
        return copied

    def start(self) -> WandbSync:
        """Starts watching `train_output` for new checkpoints (those present now do not trigger a sync)."""
        self._seen = {step for step, _ in list_checkpoints(self.train_output)}
        self._thread = threading.Thread(target=self._watch, name="marin-wandb-sync", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.after_new_checkpoints()
            except Exception as exc:  # a failed copy is retried at the next checkpoint and at the end
                logger.warning("syncing W&B's folder into %s failed: %s", self.dest, exc)

    def after_new_checkpoints(self) -> None:
        """Syncs once if a checkpoint appeared since the last look."""
        steps = {step for step, _ in list_checkpoints(self.train_output)}
        new = sorted(steps - self._seen)
        if new:
            self._seen |= steps
            n = self.sync()
            self.synced_checkpoints.append(new[-1])
            logger.info("checkpoint %d: copied %d W&B file(s) into %s", new[-1], n, self.dest)

    def close(self, remove_source: bool = True) -> None:
        """Stops watching, syncs a last time, and removes the live folder."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sync()
        if remove_source:
            shutil.rmtree(self.source, ignore_errors=True)
