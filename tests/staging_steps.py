"""A step whose config names its own output twice (`output_path` and `this_output_path("ckpt")`) and that
records a path relative to its output, for the attempt-scoped staging tests."""

from __future__ import annotations

import json
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, this_output_path
from marin.storage import join, portable_path, write_bytes


@dataclass(frozen=True)
class SelfPathsConfig:
    source: str
    """A path outside the output, recorded relative to it."""
    checkpoint_dir: str = this_output_path("ckpt")
    """A sub-folder of this step's output, named by a field of its own."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def self_paths_step(config: SelfPathsConfig) -> None:
    write_bytes(join(config.checkpoint_dir, "step-1.bin"), b"weights")
    record = {"source": portable_path(config.source, config.output_path), "seen_output": config.output_path}
    write_bytes(join(config.output_path, "provenance.json"), json.dumps(record).encode())
