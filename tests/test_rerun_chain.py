"""Reruns chain: a rerun's record names the same code as the original's, so it can be rerun in turn, on
either backend, and a published record reruns from a fresh clone at its commit plus what the bucket holds."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from marin.storage import read_bytes
from tests.cli_support import REPO, marin
from tests.code_lab import make_lab, marin_in, record_of

HELLO = os.path.join(REPO, "experiments", "tutorial", "hello_world.py")


def _fns(record: str) -> list[str]:
    return [step["fn"] for step in json.loads(read_bytes(record))["steps"]]


def test_hello_world_reruns_of_reruns_verify_identical_on_the_local_backend(prefix):
    a, b, c = (prefix + "/" + name for name in "ABC")
    record_a = record_of(marin("run", HELLO, "--prefix", a, "--backend", "local"))
    record_b = record_of(marin("rerun", record_a, "--prefix", b, "--backend", "local"))
    record_c = record_of(marin("rerun", record_b, "--prefix", c, "--backend", "local"))
    expected = ["experiments/tutorial/hello_world.py:generate", "experiments/tutorial/hello_world.py:compute_stats"]
    assert _fns(record_a) == _fns(record_b) == _fns(record_c) == expected
    verify = marin("verify", record_a, record_c)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "2 identical of 2 steps" in verify.stdout and "all steps identical" in verify.stdout


def test_hello_world_reruns_of_reruns_verify_identical_on_a_ray_cluster(ray_cluster, tmp_path):
    """The workers belong to a cluster started elsewhere: they never imported the rerun's script module."""
    address = ray_cluster.get_runtime_context().gcs_address
    a, b, c = (str(tmp_path / name) for name in "ABC")
    record_a = record_of(marin("run", HELLO, "--prefix", a, "--ray_address", address))
    record_b = record_of(marin("rerun", record_a, "--prefix", b, "--ray_address", address))
    record_c = record_of(marin("rerun", record_b, "--prefix", c, "--ray_address", address))
    assert _fns(record_c) == _fns(record_a)
    verify = marin("verify", record_a, record_c)
    assert verify.returncode == 0 and "all steps identical" in verify.stdout, verify.stdout


def test_rerun_help_documents_its_flags_and_passes_them_on(tmp_path):
    help_text = marin("rerun", "--help").stdout
    for flag in ("--prefix", "--code", "--backend", "--ray_address", "--max_concurrent", "--dry_run", "--run_only"):
        assert flag in help_text, flag
    record = record_of(marin("run", HELLO, "--prefix", str(tmp_path / "A"), "--backend", "local"))
    rerun = marin("rerun", record, "--prefix", str(tmp_path / "B"), "--backend", "local", "--max_concurrent", "1")
    (line,) = (tmp_path / "B" / "experiments").glob("*.runs.jsonl")
    assert rerun.returncode == 0 and json.loads(line.read_text())["backend"] == "local"
    bad = marin("rerun", record, "--prefix", str(tmp_path / "C"), "--max_concurrent", "many")
    assert bad.returncode == 2 and "--max_concurrent" in bad.stderr


@pytest.fixture
def lab(tmp_path):
    return make_lab(tmp_path)


def test_a_published_record_reruns_from_a_fresh_clone_with_the_stored_patch(lab, prefix, tmp_path):
    a, b, c = (prefix + "/" + name for name in "ABC")
    record_a = record_of(marin_in(lab, "run", "exp.py", "--prefix", a, "--backend", "local"))
    git = json.loads(read_bytes(record_a))["git"]
    assert git["dirty"] is True and git["untracked"] == ["exp.py"], git
    patch = read_bytes(a + "/" + git["patch"])
    assert b"+    return x * 3" in patch and b"+++ b/exp.py" in patch

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(lab), str(clone)], check=True)
    assert not (clone / "exp.py").exists()
    rerun = marin_in(clone, "rerun", record_a, "--prefix", b, "--backend", "local")
    record_b = record_of(rerun)
    assert "running the recorded code (commit " in rerun.stderr and git["patch"] in rerun.stderr
    record_c = record_of(marin_in(clone, "rerun", record_b, "--prefix", c, "--backend", "local"))
    assert _fns(record_c) == _fns(record_a) == ["exp.py:make"]
    assert json.loads(read_bytes(record_c))["git"]["patch_sha256"] == git["patch_sha256"]
    fingerprints = [[s["code_fingerprint"] for s in json.loads(read_bytes(r))["steps"]] for r in (record_a, record_c)]
    assert fingerprints[0] == fingerprints[1]  # the same code in another folder has the same fingerprint
    verify = marin("verify", record_a, record_c)
    assert verify.returncode == 0 and "all steps identical" in verify.stdout, verify.stdout


def test_rerun_warns_before_running_when_the_code_differs_from_the_record(lab, tmp_path):
    record = record_of(marin_in(lab, "run", "exp.py", "--prefix", str(tmp_path / "A"), "--backend", "local"))
    (lab / "helper.py").write_text("def scale(x):\n    return x * 5\n")
    here = marin_in(lab, "rerun", record, "--prefix", str(tmp_path / "B"), "--backend", "local", "--code", "checkout")
    assert here.returncode == 0, here.stderr
    warning = here.stderr.index("the code differs from the record's")
    assert warning < here.stderr.index("t/make-"), here.stderr
    (numbers,) = (tmp_path / "B" / "t").glob("make-*/numbers.json")
    assert json.loads(numbers.read_text()) == [0, 5, 10, 15]

    recorded = marin_in(lab, "rerun", record, "--prefix", str(tmp_path / "C"), "--backend", "local")
    assert recorded.returncode == 0 and "running the recorded code" in recorded.stderr, recorded.stderr
    (numbers,) = (tmp_path / "C" / "t").glob("make-*/numbers.json")
    assert json.loads(numbers.read_text()) == [0, 3, 6, 9]


def test_loading_a_script_by_reference_does_not_run_its_main_block(tmp_path):
    from marin.provenance.references import reference_of, resolve_reference

    script = tmp_path / "guarded.py"
    script.write_text("def fn():\n    return 1\n\nif __name__ == '__main__':\n    raise SystemExit('main ran')\n")
    fn = resolve_reference(f"{script}:fn")
    assert fn() == 1 and reference_of(fn) == f"{script}:fn"


def test_a_record_whose_commit_this_repository_lacks_reruns_the_checkout_and_says_why(tmp_path):
    lab = make_lab(tmp_path)
    record = record_of(marin_in(lab, "run", "exp.py", "--prefix", str(tmp_path / "A"), "--backend", "local"))
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "exp.py").write_text((lab / "exp.py").read_text())
    (other / "helper.py").write_text("def scale(x):\n    return x * 3\n")
    subprocess.run(["git", "-C", str(other), "add", "exp.py", "helper.py"], check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@e", "-c", "user.name=t", "-C", str(other), "commit", "-qm", "x"], check=True
    )
    rerun = marin_in(other, "rerun", record, "--prefix", str(tmp_path / "B"), "--backend", "local")
    assert rerun.returncode == 0, rerun.stderr
    assert "cannot run the recorded code (this repository does not have commit" in rerun.stderr
    assert "the code differs from the record's" in rerun.stderr
    verify = marin("verify", record, str(tmp_path / "B"))
    assert verify.returncode == 0, verify.stdout
