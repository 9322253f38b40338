"""Every ```bash block of docs/your-own-data.md runs as written, in a fresh clone of this repository.

The machinery is the README's (tests/test_readme_commands.py): the page's blocks are read from it, in order,
and each runs as one bash script (`set -eo pipefail`) from the root of a `git clone` of HEAD that uses the
test environment (commit edits to the page first). A reader runs the page in one terminal, so the `source`
lines of the blocks before a block (the environment's activation) run first in its script. Nothing else is
added or substituted: the page's training is the tutorial's tiny model for 4 steps, and its steps run with
`--backend local` (no Ray).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.test_readme_commands import PRELUDE, REPO, clone, command_of, readme_blocks  # noqa: F401 - clone: a fixture

pytestmark = pytest.mark.slow  # trains: in make test-slow (docs/testing.md)

PAGE = os.path.join(REPO, "docs", "your-own-data.md")
BLOCKS = readme_blocks(open(PAGE).read())


def run_page_block(clone: dict, index: int) -> subprocess.CompletedProcess:  # noqa: F811 - the fixture's value
    """Runs block `index` in the clone, after the blocks before it (each once)."""
    for i in range(index + 1):
        if i not in clone["done"]:
            sourced = [line for block in BLOCKS[:i] for line in block if command_of(line).startswith("source ")]
            clone["done"][i] = subprocess.run(
                ["bash", "-c", PRELUDE + "\n".join(sourced + BLOCKS[i]) + "\n"],
                cwd=clone["path"],
                env=clone["env"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=1200,
            )
    return clone["done"][index]


def test_the_page_is_linked_from_the_readme_and_has_the_blocks_this_test_knows():
    assert "docs/your-own-data.md" in open(os.path.join(REPO, "README.md")).read()
    commands = [command_of(line) for block in BLOCKS for line in block]
    assert len(BLOCKS) == 3 and any("own_data.py" in c for c in commands)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_your_own_data_block_runs_as_written(clone, index):  # noqa: F811 - clone: the imported fixture
    result = run_page_block(clone, index)
    block = "\n".join(BLOCKS[index])
    assert result.returncode == 0, (
        f"docs/your-own-data.md block failed:\n{block}\n--- output ---\n{result.stdout[-6000:]}"
    )
    out = result.stdout
    if "--run_only 'filtered/'" in block:
        assert '"gopher_short_doc": 3' in out and '"gopher_below_alpha_threshold": 1' in out, out[-4000:]
        assert (
            '"id":"part-00000/48","text":"Exeunt."' in out
            and '"filter_reason":"gopher_quality/gopher_short_doc"' in out
        )
    if "ls lab/checkpoints" in block:
        assert "step-2\nstep-3\n" in out, out[-4000:]
