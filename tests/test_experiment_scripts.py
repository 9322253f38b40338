"""Every experiment script under experiments/ runs as its docstring says, as shipped.

The scripts are found, not listed: every file under experiments/ with a `__main__` block is one (the
others are the helper libraries), so a new script is covered the day it is
added. For each, `marin plan` must plan it, and every command its docstring shows is run the way a user
would type it, with the prefix pointed at a temporary folder: `marin plan` and `marin explain` as written,
`python <script> ...` with `--dry_run` added (which must write nothing). The docstring commands that start a
server (`marin browse`) are not run here. hello_world, whose steps take a second, is also run for real, twice,
as its docstring says (the second run runs nothing). The other scripts' full runs belong to their own tests:
the tutorial's DAG (tests/test_tutorial.py), the quality-filter experiment's steps on a smaller corpus
(tests/test_quality_experiment.py; as shipped it starts a Ray cluster for its resource-declaring steps and
takes over a minute), and the ladders with their targets (tests/test_*ladder*.py).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import REPO, marin

EXPERIMENTS = Path(REPO) / "experiments"
COMMAND = re.compile(r"^\s+((?:python|marin) .+?)\s*(?:#.*)?$")
INLINE = re.compile(r"`((?:python|marin) [^`]+)`")
READ_ONLY = ("plan", "explain")


def _has_main_block(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def scripts() -> list[Path]:
    found = []
    for path in sorted(EXPERIMENTS.rglob("*.py")):
        text = path.read_text()
        if "executor_main" in text and _has_main_block(ast.parse(text, str(path))):
            found.append(path)
    return found


SCRIPTS = scripts()


def docstring_commands(path: Path) -> list[list[str]]:
    """The commands the script's docstring shows (indented lines, or quoted in backticks, starting `python ` or
    `marin ` and naming a script), as argv, in order, each once."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    found = []
    for line in doc.splitlines():
        m = COMMAND.match("    " + line) if line.startswith(" ") else None
        found += [m[1]] if m else INLINE.findall(line)
    commands = []
    for text in found:
        argv = shlex.split(text)
        if any(a.endswith(".py") for a in argv) and argv not in commands:
            commands.append(argv)
    return commands


def _with_prefix(argv: list[str], prefix: str) -> list[str]:
    """`argv` with its `--prefix` value (or none) replaced by `prefix`."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--prefix":
            skip = i + 1 < len(argv)
            continue
        if arg.startswith("--prefix="):
            continue
        out.append(arg)
    return [*out, "--prefix", prefix]


def python(argv: list[str]) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` from the repository, as the docstrings show it (the checkout is installed)."""
    return subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=900)


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_the_scripts_are_found_and_each_one_shows_how_to_run_it():
    names = {p.relative_to(EXPERIMENTS).as_posix() for p in SCRIPTS}
    assert {"tutorial/hello_world.py", "tutorial/tiny_lm.py", "tutorial/tiny_ladder.py"} <= names, names
    assert not any(p.name.startswith("defaults") for p in SCRIPTS), "the helper libraries are not scripts"
    for path in SCRIPTS:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        rel = path.relative_to(REPO).as_posix()
        assert rel in doc or "make run" in doc, f"{rel}: its docstring does not say how to run it"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.relative_to(EXPERIMENTS).as_posix() for p in SCRIPTS])
def test_the_script_plans_as_shipped_and_its_docstring_commands_run(script, tmp_path):
    rel = script.relative_to(REPO).as_posix()
    prefix = tmp_path / "lab"
    shown_commands = docstring_commands(script)
    planned = any(argv[:2] == ["marin", "plan"] for argv in shown_commands)
    commands = ([] if planned else [["marin", "plan", rel]]) + shown_commands
    ran = []
    for argv in commands:
        if argv[0] == "python":
            assert argv[1] == rel, f"{rel}: its docstring runs another script: {argv}"
            argv = [*argv, "--dry_run"]
            result = python(_with_prefix(argv[1:], str(prefix)))
        elif argv[1] in READ_ONLY:
            assert argv[2] == rel, f"{rel}: its docstring plans another script: {argv}"
            result = marin(*_with_prefix(argv[1:], str(prefix)))
        else:
            continue  # a server (marin browse), not run here
        shown = " ".join(argv)
        assert result.returncode == 0, f"`{shown}` failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        if argv[-1] == "--dry_run" or argv[1] == "plan":
            assert re.search(r"plan under \S+: \d+ steps", result.stdout), f"`{shown}` printed no plan"
        ran.append(shown)
    assert _files_under(prefix) == [], f"{rel}: planning wrote into the prefix: {_files_under(prefix)[:10]}"
    assert ran, f"{rel}: nothing ran"


def test_hello_world_runs_twice_as_its_docstring_says_and_the_second_run_runs_nothing(tmp_path):
    (first, *_) = docstring_commands(EXPERIMENTS / "tutorial" / "hello_world.py")
    assert first[:2] == ["python", "experiments/tutorial/hello_world.py"]
    argv = _with_prefix(first[1:], str(tmp_path / "lab"))
    once = python(argv)
    assert once.returncode == 0, once.stderr[-3000:]
    statuses = sorted((tmp_path / "lab").glob("hello/*/.executor_status"))
    assert len(statuses) == 2 and all(p.read_text().strip() == "SUCCESS" for p in statuses)
    stamps = [os.stat(p).st_mtime_ns for p in statuses]
    twice = python(argv)
    assert twice.returncode == 0, twice.stderr[-3000:]
    assert [os.stat(p).st_mtime_ns for p in statuses] == stamps, "the second run ran a step again"
    outcomes = re.findall(r"^\s+([A-Z_]+)\s+\S+\s+hello/", twice.stdout, re.M)
    assert outcomes == ["SKIPPED", "SKIPPED"], twice.stdout
