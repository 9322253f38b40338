"""The `marin` command line: plan says what would run and why, explain says why a hash is what it is."""

from __future__ import annotations

import os

from tests.cli_support import HELLO, marin, ran_hello_copy


def test_plan_says_what_would_run_and_why(tmp_path):
    prefix = str(tmp_path / "lab")
    before = marin("plan", HELLO, "--prefix", prefix)
    assert before.returncode == 0, before.stderr
    assert before.stdout.count("new hash: no output yet") == 2 and not os.path.exists(prefix)
    assert marin("run", HELLO, "--prefix", prefix, "--backend", "local").returncode == 0
    after = marin("plan", HELLO, "--prefix", prefix)
    assert "2 steps (2 skip)" in after.stdout and "succeeded" in after.stdout


def test_plan_warns_when_code_changed_and_rerun_code_changed_reruns(tmp_path):
    script, source, prefix = ran_hello_copy(tmp_path)
    script.write_text(source.replace('print(f"stats: {stats}")', 'print(f"statistics: {stats}")'))
    plan = marin("plan", str(script), "--prefix", prefix)
    assert plan.stdout.count("WARNING: code changed since") == 2, plan.stdout
    rerun = marin("run", str(script), "--prefix", prefix, "--backend", "local", "--rerun_code_changed")
    assert rerun.returncode == 0 and "2 steps: 2 SUCCESS" in rerun.stdout, rerun.stdout + rerun.stderr


def test_explain_prints_the_version_and_the_field_that_changed(tmp_path):
    script, source, prefix = ran_hello_copy(tmp_path)
    script.write_text(source.replace("min_len=versioned(3)", "min_len=versioned(5)"))
    out = marin("explain", str(script), "hello/stats", "--prefix", prefix).stdout
    assert '"min_len": 5' in out and "= sha256(canonical_json(version))[:8]" in out
    assert "1 field(s) differ" in out and "config.min_len: 3 -> 5" in out
    script.write_text(source.replace("n=versioned(1000)", "n=versioned(10)"))
    out = marin("explain", str(script), "hello/stats", "--prefix", prefix).stdout
    assert 'dependencies[0]: "hello/data-' in out and "upstream step 'hello/data' has a new hash" in out


def test_status_lists_experiments_and_step_states(tmp_path):
    prefix = str(tmp_path / "lab")
    assert marin("run", HELLO, "--prefix", prefix, "--backend", "local").returncode == 0
    out = marin("status", prefix).stdout
    assert "experiments/hello_world-" in out and "2 SUCCESS" in out and "SUCCESS    hello/stats-" in out


def test_unknown_step_in_explain_and_a_run_only_matching_nothing_are_one_line_errors(tmp_path):
    result = marin("explain", HELLO, "no/such", "--prefix", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: no step named 'no/such' in this experiment (steps: hello/data, hello/stats)"
    )
    assert "Traceback" not in result.stderr
    result = marin("plan", HELLO, "--prefix", str(tmp_path), "--run_only", "zzz")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: --run_only ['zzz'] matches no step"


def test_plan_hands_the_script_its_flags_so_a_script_reading_its_prefix_plans_under_it(tmp_path):
    script = tmp_path / "reads_prefix.py"
    script.write_text(HELLO_READS_PREFIX)
    prefix = str(tmp_path / "elsewhere")
    result = marin("plan", str(script), "--prefix", prefix)
    assert result.returncode == 0, result.stderr
    assert f"script sees prefix {prefix}" in result.stdout, result.stdout


HELLO_READS_PREFIX = """
import runpy
import sys

from marin.execution.main import parse_main_args

if __name__ == "__main__":
    print("script sees prefix", parse_main_args(sys.argv[1:]).prefix)
    runpy.run_path(HELLO, run_name="__main__")
""".replace("HELLO", repr(os.path.abspath(HELLO)))
