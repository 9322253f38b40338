"""Tiny step functions for the executor tests: each records its invocation in an append-only file."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field

from marin.execution import THIS_OUTPUT_PATH
from marin.storage import join, read_bytes, write_bytes
from marin.storage.staging import published_path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CountConfig:
    value: int = 0
    """A versioned payload."""
    inputs: list = field(default_factory=list)
    """Output paths of dependencies (output_path_of)."""
    counter_path: str = ""
    """Append-only file: one line per invocation (not versioned)."""
    fail: bool = False
    """Raise instead of succeeding (not versioned)."""
    sleep_s: float = 0.0
    """Seconds to sleep before writing (not versioned)."""
    wait_for: str | None = None
    """A file to wait for before finishing (not versioned)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def count_step(config: CountConfig) -> None:
    """Records the call, checks inputs exist, writes out.json (from the inputs' contents)."""
    if config.counter_path:
        with open(config.counter_path, "a") as f:
            f.write(json.dumps({"output": published_path(config.output_path), "pid": os.getpid()}) + "\n")
    print(f"counting into {config.output_path}")
    logger.info("log line from the step")
    total = config.value
    for path in config.inputs:
        data = read_bytes(join(path, "out.json"))
        if data is None:
            raise FileNotFoundError(f"input {path}/out.json is missing: a dependency has not run")
        total += json.loads(data)["total"]
    if config.wait_for:
        deadline = time.time() + 60
        while not os.path.exists(config.wait_for):
            if time.time() > deadline:
                raise TimeoutError(f"{config.wait_for} never appeared")
            time.sleep(0.05)
    if config.sleep_s:
        time.sleep(config.sleep_s)
    if config.fail:
        raise RuntimeError("planned failure")
    write_bytes(join(config.output_path, "out.json"), json.dumps({"total": total}).encode())


def invocations(counter_path: str) -> list[str]:
    if not os.path.exists(counter_path):
        return []
    with open(counter_path) as f:
        return [json.loads(line)["output"] for line in f if line.strip()]
