"""Every ```bash block of README.md runs as written, in a fresh clone of this repository.

The README is the single source: its bash blocks are read from it, in order, and each runs as one bash
script (`set -eo pipefail`) in a `git clone` of this repository's HEAD (commit README edits first; edits
not committed are not in a clone). The clone uses the environment that runs the tests: its `.venv` is a
link to it and PYTHONPATH points at the clone, so the clone's code is what runs. MARIN_PREFIX and
RAY_ADDRESS are unset and the environment's bin folder is off the PATH, as on a fresh shell.

Every line runs verbatim, globs such as `local_store/experiments/tiny_lm-*.json` included, except:

- `make run` trains the whole tutorial (38 plays, 200 training steps: minutes on 2 cores). It becomes
  `make -n run` (which must still run `experiments/tutorial/tiny_lm.py`; grep reads all of it, since
  `grep -q` would close the pipe early and, under pipefail, a SIGPIPE'd make would end the line
  silently) followed, on a line of its own so that `set -e` stops at either, by that script's `main()` with 3 plays, a 512-token vocabulary and 6 training steps: the same code, executor and
  default backend (Ray), so `local_store` holds a `tiny_lm-*.json` record that the next block reruns and
  verifies as written.
- `make test` is the suite this test belongs to; `make -n test` checks the target and its commands (and
  `make -n test-fast` its edit-loop tier).
- `marin browse ...` serves until stopped: it runs with `--port 0` added (8765 may be taken on a shared
  machine) through `python -m tests.browse_process`, which waits for the address it prints, fetches that
  page, checks it lists the hello_world experiment, and stops the server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL_TUTORIAL = (
    "make -n run | grep experiments/tutorial/tiny_lm.py > /dev/null\n"
    '"$README_PYTHON" -c '
    '"from experiments.tutorial.tiny_lm import main; '
    "main(plays=('hamlet', 'macbeth', 'othello'), vocab_size=512, num_train_steps=6, train_batch_size=4)\""
)
SUBSTITUTES = {"make run": SMALL_TUTORIAL, "make test": "make -n test", "make test-fast": "make -n test-fast"}
SERVERS = ("marin browse ", ".venv/bin/marin browse ")
PRELUDE = "set -eo pipefail\nset -x\n"


def readme_blocks(text: str) -> list[list[str]]:
    """The lines of each ```bash block, in order."""
    return [block.splitlines() for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)]


def command_of(line: str) -> str:
    """The line without its trailing `# comment`."""
    return re.sub(r"(^|\s+)#\s.*$", "", line).strip()


def runnable(line: str) -> str:
    """The line as this test runs it: verbatim unless it is one of the substitutions the docstring lists."""
    command = command_of(line)
    if command in SUBSTITUTES:
        return SUBSTITUTES[command]
    if command.startswith(SERVERS):
        return f'"$README_PYTHON" -m tests.browse_process hello_world {command} --port 0'
    return line


BLOCKS = readme_blocks(open(os.path.join(REPO, "README.md")).read())


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> dict:
    """A fresh clone of HEAD with the test environment linked in, and the outcome of each block run so far."""
    if sys.prefix == sys.base_prefix:
        pytest.fail("run the tests with the project's environment (.venv/bin/python -m pytest), not a bare python")
    path = str(tmp_path_factory.mktemp("readme") / "marin")
    subprocess.run(["git", "clone", "--quiet", REPO, path], check=True, timeout=300)
    os.symlink(sys.prefix, os.path.join(path, ".venv"))
    venv_bin = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("MARIN_PREFIX", "RAY_ADDRESS", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env.update(PYTHONPATH=path, README_PYTHON=sys.executable, RAY_AUTH_MODE="disabled", WANDB_MODE="offline")
    return {"path": path, "env": env, "done": {}}


def run_block(clone: dict, index: int) -> subprocess.CompletedProcess:
    """Runs block `index` in the clone, after the blocks before it (each once)."""
    for i in range(index + 1):
        if i not in clone["done"]:
            script = PRELUDE + "\n".join(runnable(line) for line in BLOCKS[i]) + "\n"
            clone["done"][i] = subprocess.run(
                ["bash", "-c", script],
                cwd=clone["path"],
                env=clone["env"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=1800,
            )
    return clone["done"][index]


def test_the_readme_has_the_blocks_this_test_knows():
    commands = [command_of(line) for block in BLOCKS for line in block]
    assert len(BLOCKS) >= 3 and set(SUBSTITUTES) <= set(commands)
    assert any(c.startswith(SERVERS) for c in commands)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(clone, index):
    result = run_block(clone, index)
    block = "\n".join(BLOCKS[index])
    assert result.returncode == 0, f"README block failed:\n{block}\n--- output ---\n{result.stdout[-6000:]}"
