"""`marin submit` uploads the working directory without `.git`: the checkout's git state travels in a file
beside it, and records made inside the job name the commit and store the patch as a run at home would."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from marin.storage import read_bytes
from marin.tools.submit import build_job, job_checkout_state, staged_git_state
from tests.code_lab import make_lab, marin_in, record_of


def _upload(working_dir: str, runtime_env: dict, zip_path: Path) -> None:
    """What `JobSubmissionClient.submit_job` uploads: Ray's own packaging of the working dir and its excludes."""
    from ray._private.runtime_env.packaging import create_package
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    def package(path, excludes):
        create_package(path, zip_path, include_gitignore=True, excludes=excludes)

    upload_working_dir_if_needed(dict(runtime_env), include_gitignore=True, upload_fn=package)


def test_a_job_records_the_commit_branch_and_patch_of_the_submitting_checkout(tmp_path):
    lab = make_lab(tmp_path)
    commit = subprocess.run(
        ["git", "-C", str(lab), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    prefix = str(tmp_path / "out")
    argv = ["python", "exp.py", "--prefix", prefix, "--backend", "local"]
    job = build_job(argv, str(lab))
    state = job_checkout_state(argv, str(lab))
    zip_path = tmp_path / "upload.zip"
    with staged_git_state(str(lab), state):
        _upload(job["runtime_env"]["working_dir"], job["runtime_env"], zip_path)
    assert sorted(p.name for p in lab.iterdir()) == [".git", "exp.py", "helper.py"]

    job_dir = tmp_path / "job"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(job_dir)
    assert not (job_dir / ".git").exists() and (job_dir / ".marin_git_state.json").exists()
    record = record_of(marin_in(job_dir, "run", *argv[1:]))
    git = json.loads(read_bytes(record))["git"]
    assert git["commit"] == commit and git["branch"] in ("master", "main") and git["dirty"] is True
    assert git["untracked"] == ["exp.py"]
    patch = read_bytes(f"{prefix}/{git['patch']}")
    assert b"+    return x * 3" in patch and b"+++ b/exp.py" in patch
