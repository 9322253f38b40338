"""The step library reads and writes through marin.storage: `make lint` refuses fsspec there, and
marin.storage has what the steps needed fsspec for (an object's modification time, publishing a folder a
library wrote locally), on every storage."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from marin.storage import join, modified_time, put_folder, read_bytes, write_bytes
from tests.conftest import REPO

BYPASS = """import fsspec

from marin.storage import url_to_fs


def publish(path: str, data: bytes) -> None:
    fs, plain = url_to_fs(path)
    with fs.open(plain, "wb") as f:
        f.write(data)
    with fsspec.open(path + ".copy", "wb") as f:
        f.write(data)
"""


def _ruff(filename: str, source: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", filename, "-"],
        input=source,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("package", ["download", "processing", "training", "evaluation"])
def test_make_lint_refuses_fsspec_in_a_step_module(package):
    found = _ruff(f"marin/{package}/new_step.py", BYPASS)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "`fsspec` is banned" in found.stdout and "`marin.storage.url_to_fs` is banned" in found.stdout


def test_storage_and_the_tools_may_use_fsspec():
    for filename in ("marin/storage/new_backend.py", "marin/browser/new_page.py", "tests/test_new.py"):
        found = _ruff(filename, BYPASS)
        assert found.returncode == 0, f"{filename}: {found.stdout}{found.stderr}"


def test_modified_time_is_the_storages_stamp_and_none_when_absent(prefix):
    path = join(prefix, "a", "forecast.json")
    assert modified_time(path) is None
    before = datetime.now(UTC)
    write_bytes(path, b"{}")
    first = modified_time(path)
    assert first is not None and first.tzinfo is not None
    # the emulators and the local disk run on this machine's clock (buckets stamp whole seconds or ms)
    assert before - timedelta(seconds=5) <= first <= datetime.now(UTC) + timedelta(seconds=5)
    time.sleep(1.1)
    write_bytes(path, b"{} ")
    assert modified_time(path) > first
    assert modified_time(join(prefix, "a", "missing.json")) is None


def test_put_folder_publishes_every_file_below_a_local_folder(prefix, tmp_path):
    local = tmp_path / "saved"
    (local / "sub").mkdir(parents=True)
    (local / "tokenizer.json").write_bytes(b'{"v": 1}')
    (local / "sub" / "vocab.txt").write_bytes(b"a\nb\n")
    out = join(prefix, "tok")
    assert put_folder(str(local), out) == ["sub/vocab.txt", "tokenizer.json"]
    assert read_bytes(join(out, "tokenizer.json")) == b'{"v": 1}'
    assert read_bytes(join(out, "sub", "vocab.txt")) == b"a\nb\n"
    if not prefix.startswith(("gs://", "s3://")):
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(os.stat(os.path.join(out, "tokenizer.json")).st_mode) == 0o666 & ~umask
