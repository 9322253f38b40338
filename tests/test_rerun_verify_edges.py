"""Rerun and verify at the edges: fixed output paths, --rerun_code_changed, missing steps on either side,
and steps paired by folder when a setting in their name changed."""

from __future__ import annotations

import json

import pytest

from marin.execution.planning import plan_steps
from marin.tools.rebuild import RerunError, rebuild_steps
from marin.tools.verify import compare_records
from tests.cli_support import marin

SCRIPT = '''
import json, os
from dataclasses import dataclass
from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, output_path_of, versioned


@dataclass(frozen=True)
class MakeConfig:
    n: int = 3
    """How many numbers to write."""
    output_path: str = THIS_OUTPUT_PATH
    """Where numbers.json goes."""


@dataclass(frozen=True)
class SumConfig:
    input_path: str = ""
    """numbers.json to add up."""
    output_path: str = THIS_OUTPUT_PATH
    """Where sum.txt goes."""


def make(config):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "numbers.json"), "w") as f:
        json.dump(list(range(config.n)), f)


def add(config):
    with open(config.input_path) as f:
        total = sum(json.load(f))
    with open(os.path.join(config.output_path, "sum.txt"), "w") as f:
        f.write(str(total))


FIRST = int(os.environ.get("FIRST_N", "3"))
SECOND = int(os.environ.get("SECOND_N", "4"))
first = ExecutorStep("g/first", make, MakeConfig(n=versioned(FIRST)), override_output_path="fixed/first")
second = ExecutorStep(f"g/second{SECOND}", make, MakeConfig(n=versioned(SECOND)))
total = ExecutorStep("g/sum", add, SumConfig(input_path=output_path_of(first, "numbers.json")))
roots = [total, second]
if os.environ.get("EXTRA"):
    roots.append(ExecutorStep("extra/only", make, MakeConfig(n=versioned(1))))

if __name__ == "__main__":
    executor_main(steps=roots, description="edges")
'''


def _run(script, prefix, **env) -> dict:
    result = marin("run", str(script), "--prefix", str(prefix), "--backend", "local", env=env)
    assert result.returncode == 0, result.stderr
    (record,) = (prefix / "experiments").glob("edges-*.json")
    return record


@pytest.fixture
def first_run(tmp_path):
    script = tmp_path / "edges.py"
    script.write_text(SCRIPT)
    return script, _run(script, tmp_path / "A")


def test_rerun_keeps_a_recorded_fixed_output_path(first_run, tmp_path):
    script, record = first_run
    data = json.loads(record.read_text())
    recorded = {s["name"]: s["relative_output_path"] for s in data["steps"]}
    assert recorded["g/first"] == "fixed/first"

    planned = plan_steps(rebuild_steps(data, str(tmp_path / "B")), str(tmp_path / "B"))
    assert {p.name: p.relative_output_path for p in planned.steps} == recorded

    b = tmp_path / "B"
    result = marin("rerun", str(record), "--prefix", str(b), "--backend", "local")
    assert result.returncode == 0, result.stderr
    assert (b / "fixed" / "first" / ".executor_status").read_text().strip() == "SUCCESS"
    assert not list((b / "g").glob("first-*"))
    (sum_dir,) = (b / "g").glob("sum-*")
    assert (sum_dir / "sum.txt").read_text() == "3"
    verify = marin("verify", str(record), str(b))
    assert verify.returncode == 0, verify.stdout
    assert "3 identical of 3 steps" in verify.stdout


def test_rerun_refuses_a_fixed_output_path_outside_the_records_prefix(first_run, tmp_path):
    script, record = first_run
    data = json.loads(record.read_text())
    step = next(s for s in data["steps"] if s["name"] == "g/first")
    step["relative_output_path"] = "/elsewhere/first"
    with pytest.raises(
        RerunError, match=r"step 'g/first': recorded at '/elsewhere/first', outside the record's prefix"
    ):
        rebuild_steps(data, str(tmp_path / "B"))


def test_rerun_forwards_rerun_code_changed(first_run, tmp_path):
    script, record = first_run
    b = tmp_path / "B"
    assert marin("rerun", str(record), "--prefix", str(b), "--backend", "local").returncode == 0
    (sum_dir,) = (b / "g").glob("sum-*")
    assert (sum_dir / "sum.txt").read_text() == "3"
    script.write_text(SCRIPT.replace("total = sum(json.load(f))", "total = 100 + sum(json.load(f))"))

    here = ("--backend", "local", "--code", "checkout")
    plain = marin("rerun", str(record), "--prefix", str(b), *here)
    assert plain.returncode == 0, plain.stderr
    assert (sum_dir / "sum.txt").read_text() == "3"
    assert "code behind 3 succeeded step(s) changed since they ran" in plain.stderr

    recorded = marin("rerun", str(record), "--prefix", str(b), "--backend", "local", "--rerun_code_changed")
    assert recorded.returncode == 0, recorded.stderr
    assert f"script {script}: using the recorded source experiments/code/" in recorded.stderr
    assert (sum_dir / "sum.txt").read_text() == "3"

    forced = marin("rerun", str(record), "--prefix", str(b), *here, "--rerun_code_changed")
    assert forced.returncode == 0, forced.stderr
    assert (sum_dir / "sum.txt").read_text() == "103"


def _rerun(record, prefix):
    result = marin("rerun", str(record), "--prefix", str(prefix), "--backend", "local")
    assert result.returncode == 0, result.stderr
    return prefix / "experiments" / record.name


def test_verify_names_the_first_differing_step_not_an_earlier_missing_one(first_run, tmp_path):
    script, record = first_run
    record_b = _rerun(record, tmp_path / "B")
    (tmp_path / "B" / "fixed" / "first" / ".executor_status").unlink()
    (second_dir,) = (tmp_path / "B" / "g").glob("second4-*")
    manifest = json.loads((second_dir / ".executor_manifest.json").read_text())
    manifest["files"][0]["sha256"] = "0" * 64
    (second_dir / ".executor_manifest.json").write_text(json.dumps(manifest))

    verdicts = [(c.name, c.verdict) for c in compare_records(str(record), str(record_b))]
    assert verdicts == [("g/first", "missing"), ("g/sum", "identical"), ("g/second4", "differs")]
    verify = marin("verify", str(record), str(record_b))
    assert verify.returncode == 1
    assert "first difference in topological order: g/second4\n" in verify.stdout
    assert "missing: g/first (no SUCCESS manifest in B)\n" in verify.stdout


def test_verify_with_only_missing_steps_names_no_difference_and_fails(first_run, tmp_path):
    script, record = first_run
    record_b = _rerun(record, tmp_path / "B")
    (tmp_path / "B" / "fixed" / "first" / ".executor_status").unlink()
    verify = marin("verify", str(record), str(record_b))
    assert verify.returncode == 1
    assert "first difference" not in verify.stdout and "all steps identical" not in verify.stdout
    assert "no step differs; missing: g/first (no SUCCESS manifest in B)\n" in verify.stdout


def test_verify_lists_steps_only_in_b_as_missing_from_a(first_run, tmp_path):
    script, record = first_run
    record_b = _run(script, tmp_path / "B", EXTRA="1")
    comparisons = compare_records(str(record), str(record_b))
    assert [(c.name, c.verdict, c.details) for c in comparisons][-1] == (
        "extra/only",
        "missing",
        ["not in A's record"],
    )
    verify = marin("verify", str(record), str(record_b))
    assert verify.returncode == 1, verify.stdout
    assert "3 identical, 1 missing of 4 steps" in verify.stdout
    assert "missing: extra/only (not in A's record)\n" in verify.stdout

    reverse = marin("verify", str(record_b), str(record))
    assert reverse.returncode == 1 and "missing: extra/only (not in B's record)\n" in reverse.stdout

    only_sum = marin("verify", str(record), str(record_b), "--steps", "sum$")
    assert only_sum.returncode == 0 and "1 identical of 1 steps" in only_sum.stdout


def test_verify_pairs_a_step_renamed_by_a_setting_within_its_folder_and_says_so(first_run, tmp_path):
    script, record = first_run
    record_b = _run(script, tmp_path / "B", SECOND_N="5")
    by_name = {c.name: c for c in compare_records(str(record), str(record_b))}
    assert set(by_name) == {"g/first", "g/sum", "g/second4"}
    renamed = by_name["g/second4"]
    assert renamed.verdict == "differs"
    assert "matched by folder: g/second4 ~ g/second5" in renamed.details
    assert "numbers.json: 12 vs 15 bytes, sha256 differs" in renamed.details
    verify = marin("verify", str(record), str(record_b))
    assert verify.returncode == 1
    assert "differs    g/second4  matched by folder: g/second4 ~ g/second5" in verify.stdout


def test_verify_pairs_by_folder_only_when_there_is_exactly_one_candidate_on_each_side():
    from marin.storage.layout import StepRecord
    from marin.tools.verify import match_steps

    a = [StepRecord(name=n) for n in ("tok/bpe512", "train/x", "tok/a1", "tok/a2")]
    b = [StepRecord(name=n) for n in ("train/x", "tok/bpe384")]
    assert [m and m.name for m in match_steps(a, b)] == [None, "train/x", None, None]
    assert [m and m.name for m in match_steps(a[:2], b)] == ["tok/bpe384", "train/x"]
