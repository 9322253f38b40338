"""Each step's `.executor_info` says which run, with which code, made its output; the code fingerprint
follows the project modules a step imports, and a plain run warns when the code behind an output changed."""

from __future__ import annotations

import hashlib
import json

from marin.storage import exists, read_bytes
from tests.code_lab import GIT, MAKE_STEP, marin_in

TWO_STEPS = (
    MAKE_STEP
    + """

first = ExecutorStep("p/first", make, MakeConfig(n=versioned(4)))
second = ExecutorStep("p/second", make, MakeConfig(n=versioned(5)))
if __name__ == "__main__":
    executor_main(steps=[first, second])
"""
)


def _lab(tmp_path):
    import subprocess

    repo = tmp_path / "lab"
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    (repo / "helper.py").write_text("def scale(x):\n    return x * 2\n")
    (repo / "exp.py").write_text(TWO_STEPS)
    (repo / "uv.lock").write_text("# the project's lock file\n")
    subprocess.run([*GIT, "-C", str(repo), "add", "helper.py", "exp.py", "uv.lock"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "lab"], check=True)
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return repo, commit


def _info(prefix: str, record: dict, name: str) -> dict:
    step = next(s for s in record["steps"] if s["name"] == name)
    return json.loads(read_bytes(f"{prefix}/{step['relative_output_path']}/.executor_info"))


def test_each_step_records_the_run_and_code_that_made_it(tmp_path, prefix):
    repo, commit = _lab(tmp_path)
    first = marin_in(repo, "run", "exp.py", "--prefix", prefix, "--backend", "local", "--run_only", "p/first")
    assert first.returncode == 0, first.stderr
    (repo / "helper.py").write_text("def scale(x):\n    return x * 3\n")
    second = marin_in(repo, "run", "exp.py", "--prefix", prefix, "--backend", "local")
    assert second.returncode == 0, second.stderr

    record_path = [ln.split("record: ", 1)[1] for ln in second.stdout.splitlines() if ln.startswith("record: ")][0]
    record = json.loads(read_bytes(record_path))
    runs = [json.loads(line) for line in read_bytes(record_path[: -len(".json")] + ".runs.jsonl").splitlines()]
    made_first, made_second = _info(prefix, record, "p/first")["run"], _info(prefix, record, "p/second")["run"]

    assert record["git"] == made_first["git"] == {**runs[0]["git"]}
    assert made_first["git"]["commit"] == commit and made_first["git"]["dirty"] is False
    assert made_first["run_id"] == runs[0]["run_id"] and made_second["run_id"] == runs[1]["run_id"]
    assert made_second["git"]["commit"] == commit and made_second["git"]["dirty"] is True
    patch = read_bytes(f"{prefix}/{made_second['git']['patch']}")
    assert b"+    return x * 3" in patch
    for key in ("user", "host", "started", "command", "environment_sha256"):
        assert made_second[key], key
    assert made_second["lock_sha256"] == hashlib.sha256(b"# the project's lock file\n").hexdigest()
    assert made_second["command"][:2] == ["exp.py", "--prefix"]
    environment = json.loads(read_bytes(f"{prefix}/{made_second['environment']}"))
    assert environment["packages"]["ray"] and exists(f"{prefix}/{made_first['environment']}")

    rerun = marin_in(repo, "rerun", record_path, "--prefix", prefix + "/again", "--backend", "local")
    assert rerun.returncode == 0, rerun.stderr
    assert f"these outputs were made by other code than the record's commit {commit[:12]}: p/second (" in rerun.stderr


def test_a_change_in_an_imported_project_module_is_a_code_change_a_plain_run_warns_about(tmp_path):
    repo, _ = _lab(tmp_path)
    prefix = str(tmp_path / "prefix")
    assert marin_in(repo, "run", "exp.py", "--prefix", prefix, "--backend", "local").returncode == 0
    unchanged = marin_in(repo, "run", "exp.py", "--prefix", prefix, "--backend", "local")
    assert unchanged.returncode == 0 and "code behind" not in unchanged.stderr
    (repo / "helper.py").write_text("def scale(x):\n    return x * 3\n")
    again = marin_in(repo, "run", "exp.py", "--prefix", prefix, "--backend", "local")
    assert again.returncode == 0 and "2 steps: 2 SKIPPED" in again.stdout
    assert "code behind 2 succeeded step(s) changed since they ran" in again.stderr and "p/first" in again.stderr
    plan = marin_in(repo, "plan", "exp.py", "--prefix", prefix)
    assert plan.stdout.count("WARNING: code changed since") == 2, plan.stdout
