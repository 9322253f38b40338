"""Rerun an experiment from its record into another prefix, and verify the two runs step by step."""

from __future__ import annotations

import json
import os

import pytest

from marin.tools.rebuild import RerunError, rebuild_steps
from marin.tools.verify import compare_records
from tests.cli_support import marin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = '''
import json, os
from dataclasses import dataclass, field
from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, output_path_of, versioned


@dataclass(frozen=True)
class Inner:
    scale: int = 1
    """A nested, versioned dataclass field."""


@dataclass(frozen=True)
class MakeConfig:
    n: int = 3
    inner: Inner = field(default_factory=Inner)
    output_path: str = THIS_OUTPUT_PATH


@dataclass(frozen=True)
class SumConfig:
    input_path: str = ""
    offset: int = 0
    output_path: str = THIS_OUTPUT_PATH


def make(config):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "numbers.json"), "w") as f:
        json.dump([i * config.inner.scale for i in range(config.n)], f)


def add(config):
    with open(config.input_path) as f:
        total = sum(json.load(f)) + config.offset
    with open(os.path.join(config.output_path, "sum.txt"), "w") as f:
        f.write(str(total))


N = int(os.environ.get("CHAIN_N", "3"))
base = ExecutorStep("chain/make", make, MakeConfig(n=versioned(N), inner=versioned(Inner(2))))
other = ExecutorStep("chain/other", make, MakeConfig(n=versioned(5)))
total = ExecutorStep("chain/sum", add, SumConfig(input_path=output_path_of(base, "numbers.json"), offset=versioned(1)))
again = ExecutorStep("chain/sum2", add, SumConfig(input_path=output_path_of(base, "numbers.json"), offset=versioned(7)))

if __name__ == "__main__":
    executor_main(steps=[total, again, other], description="a small chain")
'''


@pytest.fixture
def first_run(tmp_path):
    script = tmp_path / "chain.py"
    script.write_text(SCRIPT)
    a = tmp_path / "A"
    result = marin("run", str(script), "--prefix", str(a), "--backend", "local")
    assert result.returncode == 0, result.stderr
    (record,) = (a / "experiments").glob("chain-*.json")
    return script, record


def test_rerun_into_another_prefix_verifies_identical(first_run, tmp_path):
    script, record = first_run
    b = tmp_path / "B"
    result = marin("rerun", str(record), "--prefix", str(b), "--backend", "local")
    assert result.returncode == 0, result.stderr
    assert (b / "experiments" / record.name).exists()
    rerun_record = json.loads((b / "experiments" / record.name).read_text())
    assert rerun_record["rerun_of"] == str(record)
    verify = marin("verify", str(record), str(b / "experiments" / record.name))
    assert verify.returncode == 0, verify.stdout
    assert "4 identical of 4 steps" in verify.stdout and "all steps identical" in verify.stdout


def test_changed_versioned_field_is_named_with_its_descendants_only(first_run, tmp_path):
    script, record = first_run
    b = tmp_path / "B"
    result = marin("run", str(script), "--prefix", str(b), "--backend", "local", env={"CHAIN_N": "4"})
    assert result.returncode == 0, result.stderr
    (record_b,) = (b / "experiments").glob("chain-*.json")
    verdicts = {c.name: c.verdict for c in compare_records(str(record), str(record_b))}
    assert verdicts == {
        "chain/make": "differs",
        "chain/sum": "differs",
        "chain/sum2": "differs",
        "chain/other": "identical",
    }
    verify = marin("verify", str(record), str(record_b))
    assert verify.returncode == 1
    assert "first difference in topological order: chain/make" in verify.stdout


def test_tampered_output_is_reported_as_differing_file(first_run, tmp_path):
    script, record = first_run
    b = tmp_path / "B"
    assert marin("rerun", str(record), "--prefix", str(b), "--backend", "local").returncode == 0
    (sum_dir,) = (b / "chain").glob("sum-*")
    manifest = json.loads((sum_dir / ".executor_manifest.json").read_text())
    manifest["files"][0]["sha256"] = "0" * 64
    (sum_dir / ".executor_manifest.json").write_text(json.dumps(manifest))
    verify = marin("verify", str(record), str(b / "experiments" / record.name), "--steps", "sum$")
    assert verify.returncode == 1
    assert "differs    chain/sum  sum.txt: 1 vs 1 bytes, sha256 differs" in verify.stdout


def test_corrupted_records_are_clear_errors(first_run, tmp_path):
    script, record = first_run
    data = json.loads(record.read_text())

    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    result = marin("rerun", str(bad_json), "--prefix", str(tmp_path / "X"))
    assert result.returncode == 2 and "is not valid JSON" in result.stderr and "Traceback" not in result.stderr

    missing_fn = json.loads(json.dumps(data))
    missing_fn["steps"][0]["fn"] = missing_fn["steps"][0]["fn"].rsplit(":", 1)[0] + ":vanished"
    with pytest.raises(RerunError, match=r"step 'chain/make': cannot find 'vanished'"):
        rebuild_steps(missing_fn, str(tmp_path / "X"))

    no_fit = json.loads(json.dumps(data))
    no_fit["steps"][0]["config"]["renamed_field"] = 1
    with pytest.raises(RerunError, match=r"step 'chain/make'.*field\(s\) \['renamed_field'\].*no longer has"):
        rebuild_steps(no_fit, str(tmp_path / "X"))

    wrong_hash = json.loads(json.dumps(data))
    wrong_hash["steps"][0]["version"]["config"]["n"] = 99
    with pytest.raises(RerunError, match=r"step 'chain/make': rebuilt version hashes to"):
        rebuild_steps(wrong_hash, str(tmp_path / "X"))


def test_rerun_dry_run_writes_nothing(first_run, tmp_path):
    script, record = first_run
    result = marin("rerun", str(record), "--prefix", str(tmp_path / "C"), "--dry_run")
    assert result.returncode == 0, result.stderr
    assert "4 steps (4 run)" in result.stdout and not (tmp_path / "C").exists()


def test_record_on_the_gcs_emulator_reruns_into_a_local_prefix(bucket_prefix, tmp_path):
    gcs = bucket_prefix("gcs")
    hello = os.path.join(REPO, "experiments", "tutorial", "hello_world.py")
    first = marin("run", hello, "--prefix", gcs, "--backend", "local")
    assert first.returncode == 0, first.stderr
    record = [line.split("record: ", 1)[1] for line in first.stdout.splitlines() if line.startswith("record: ")][0]
    assert record.startswith("gs://")
    local = str(tmp_path / "local")
    rerun = marin("rerun", record, "--prefix", local, "--backend", "local")
    assert rerun.returncode == 0, rerun.stderr
    verify = marin("verify", record, local)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "2 identical of 2 steps" in verify.stdout
