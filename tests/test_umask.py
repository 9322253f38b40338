"""Published files follow the umask, as any tool's output does (colleagues sharing a lab folder read them)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["022", "027"])
def test_every_file_of_a_hello_world_and_data_run_follows_the_umask(tmp_path, umask):
    prefix, corpus = tmp_path / "lab", tmp_path / "corpus"
    corpus.mkdir()
    run = subprocess.run(
        [sys.executable, os.path.join(REPO, "tests", "umask_run.py"), f"{umask:o}", str(prefix), str(corpus)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    modes = {}
    for folder, _, files in os.walk(prefix):
        for name in files:
            path = os.path.join(folder, name)
            modes[os.path.relpath(path, prefix)] = stat.S_IMODE(os.stat(path).st_mode)
    assert len(modes) > 20 and any(p.endswith("docs.jsonl") for p in modes) and any(".jsonl.gz" in p for p in modes)
    wrong = {p: oct(m) for p, m in modes.items() if m != 0o666 & ~umask}
    assert not wrong, f"{len(wrong)} of {len(modes)} files not {0o666 & ~umask:o}: {sorted(wrong.items())[:10]}"
