"""The git state in records and run lines: read once per process and checkout, not on every run."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from marin.execution import Executor, ExecutorStep, versioned
from marin.provenance import probe
from tests.executor_steps import CountConfig, count_step


def make_checkout(path, dirty=False) -> str:
    path.mkdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    if dirty:
        (path / "a.txt").write_text("changed\n")
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """No state remembered from earlier tests; the project root follows the working directory."""
    monkeypatch.setattr(probe, "_GIT_STATES", {})
    monkeypatch.setattr(probe, "project_root", lambda: os.getcwd())


def test_git_state_asks_git_once_per_checkout(tmp_path, monkeypatch):
    clean, dirty = tmp_path / "clean", tmp_path / "dirty"
    clean_commit, dirty_commit = make_checkout(clean), make_checkout(dirty, dirty=True)
    calls = []
    real_run = subprocess.run

    def counting_run(*args, **kwargs):
        calls.append(kwargs.get("cwd"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(probe.subprocess, "run", counting_run)
    monkeypatch.chdir(clean)
    clean_state = {"commit": clean_commit, "branch": "master", "dirty": False, "patch_sha256": None, "untracked": []}
    assert probe.git_state() == clean_state
    assert probe.git_state() == clean_state
    assert calls == [str(clean), str(clean)]  # rev-parse and diff, once
    monkeypatch.chdir(dirty)
    assert probe.git_state()["commit"] == dirty_commit and probe.git_state()["dirty"] is True
    assert b"+changed" in probe.checkout_state().patch
    assert len(calls) == 4
    probe.git_state()["commit"] = "mutated by a caller"
    assert probe.git_state()["commit"] == dirty_commit


def test_git_state_is_retried_when_git_could_not_run(tmp_path, monkeypatch):
    checkout = tmp_path / "repo"
    commit = make_checkout(checkout)
    monkeypatch.chdir(checkout)
    real_run = subprocess.run

    def git_missing(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(probe.subprocess, "run", git_missing)
    assert probe.git_state()["commit"] is None and probe.git_state()["dirty"] is None
    monkeypatch.setattr(probe.subprocess, "run", real_run)
    assert probe.git_state()["commit"] == commit and probe.git_state()["dirty"] is False


def test_every_run_line_carries_the_git_state(tmp_path, monkeypatch):
    checkout = tmp_path / "repo"
    commit = make_checkout(checkout, dirty=True)
    monkeypatch.chdir(checkout)
    step = ExecutorStep("g/a", count_step, CountConfig(value=versioned(1)))
    executor = Executor(str(tmp_path / "prefix"), backend="local", experiment_name="git")
    executor.run([step])
    record_path = executor.run([step]).record_path
    record = json.loads(open(record_path).read())
    lines = [json.loads(line) for line in open(record_path[: -len(".json")] + ".runs.jsonl")]
    assert record["git"]["commit"] == commit and record["git"]["dirty"] is True
    assert [line["git"] for line in lines] == [record["git"]] * 2


def test_an_untracked_file_the_experiment_needs_makes_the_checkout_dirty(tmp_path, monkeypatch):
    checkout = tmp_path / "repo"
    commit = make_checkout(checkout)
    (checkout / "mine.py").write_text("print('not committed')\n")
    (checkout / "unrelated.txt").write_text("scratch\n")
    monkeypatch.chdir(checkout)
    assert probe.git_state()["dirty"] is False
    state = probe.checkout_state([str(checkout / "mine.py")])
    assert state.commit == commit and state.dirty is True and state.untracked == ("mine.py",)
    assert b"+++ b/mine.py" in state.patch and b"unrelated" not in state.patch
