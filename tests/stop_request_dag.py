"""Two steps running side by side, for the Ctrl-C tests of the stop request (marin.stepkit.stop):

python -m tests.stop_request_dag PREFIX STARTED_DIR [stubborn | ray]

`keeper` honours the request: it loops until asked to stop, then takes a second to save its work
(`saved.txt` in its attempt folder) and raises RunnerInterrupted, as the train step does. `plain` loops
without honouring it. With `stubborn`, `keeper` declares that it honours the request but never checks it.
Each step writes `<STARTED_DIR>/<name>` when it has started (`keeper` once it honours the request). With
`ray`, both run as Ray tasks (`--backend ray`), each in a worker process of a local Ray.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.stepkit.stop import RunnerInterrupted, stop_honoured, stop_requested
from marin.storage import join, write_bytes


@dataclass(frozen=True)
class LoopConfig:
    started_dir: str
    """Where the step says it has started (not versioned)."""
    stubborn: bool = False
    """Never checks the request it declares it honours."""
    name: str = "plain"
    """The step's name, versioned."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def keeper(config: LoopConfig) -> None:
    with stop_honoured():
        open(os.path.join(config.started_dir, config.name), "w").close()
        while config.stubborn or not stop_requested():
            time.sleep(0.02)
        time.sleep(1.0)
        write_bytes(join(config.output_path, "saved.txt"), b"saved")
        raise RunnerInterrupted("stopped on request")


def plain(config: LoopConfig) -> None:
    open(os.path.join(config.started_dir, config.name), "w").close()
    while True:
        time.sleep(0.02)


def build(started_dir: str, stubborn: bool = False) -> list[ExecutorStep]:
    return [
        ExecutorStep("stop/keeper", keeper, LoopConfig(started_dir, stubborn, versioned("keeper"))),
        ExecutorStep("stop/plain", plain, LoopConfig(started_dir, name=versioned("plain"))),
    ]


if __name__ == "__main__":
    prefix, started_dir = sys.argv[1:3]
    backend = "ray" if sys.argv[3:] == ["ray"] else "local"
    Executor(prefix, backend=backend, experiment_name="stop").run(build(started_dir, sys.argv[3:] == ["stubborn"]))
