"""What a new user reads first: help texts, one-line errors, and failures that point at the log and the fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.cli_support import HELLO, REPO, marin


def _flag_help(text: str) -> dict[str, str]:
    """`--flag` -> its help text (joined across wrapped lines) in an argparse help page."""
    flags: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^\s{2}(-{1,2}[\w-]+)(?:[ ,]+\S+)*?(?:\s{2,}(.*))?$", line)
        if m and line.lstrip().startswith("-"):
            current = m[1]
            flags[current] = (m[2] or "").strip()
        elif current and line.startswith(" " * 10):
            flags[current] = (flags[current] + " " + line.strip()).strip()
        else:
            current = None
    return flags


def test_status_and_browse_help_describe_the_command_and_every_flag():
    for command in ("status", "browse"):
        out = marin(command, "--help").stdout
        description = out.split("\n\n")[1]
        assert not description.startswith("positional") and len(description) > 40, out
    browse = _flag_help(marin("browse", "--help").stdout)
    assert browse["--host"] and browse["--port"] and "8765" in browse["--port"] and browse["--allowed_host"]


def test_explain_help_names_a_step_the_tutorial_has():
    out = marin("explain", "--help").stdout
    assert "tokenized/tiny" not in out and "tokenized/shakespeare" in out
    assert "tokenized/shakespeare" in open(os.path.join(REPO, "experiments", "tutorial", "tiny_lm.py")).read() or (
        "shakespeare" in open(os.path.join(REPO, "experiments", "defaults.py")).read()
    )


def test_an_experiments_help_says_each_default_once_and_where_the_prefix_comes_from():
    run = subprocess.run([sys.executable, HELLO, "--help"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0
    flags = _flag_help(run.stdout)
    assert "(default: None)" not in " ".join(flags.values())
    assert all(text.count("(default") <= 1 for text in flags.values()), flags
    assert "MARIN_PREFIX" in flags["--prefix"] and "local_store" in flags["--prefix"]
    assert "(default: " in flags["--backend"] and "auto" in flags["--backend"]


def test_bad_backend_and_max_concurrent_are_one_line_errors(tmp_path):
    for flag, value in (("--backend", "rey"), ("--max_concurrent", "0"), ("--max_concurrent", "many")):
        run = subprocess.run(
            [sys.executable, HELLO, "--prefix", str(tmp_path), flag, value],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().splitlines() == [run.stderr.strip()] and run.stderr.startswith(f"error: {flag}")
        assert value in run.stderr
    assert not os.listdir(tmp_path)


def test_plan_does_not_name_a_record_it_does_not_write(tmp_path):
    prefix = str(tmp_path / "lab")
    out = marin("plan", HELLO, "--prefix", prefix).stdout
    assert "record: none yet (a run writes " in out and not os.path.exists(prefix)
    assert marin("run", HELLO, "--prefix", prefix, "--backend", "local").returncode == 0
    after = marin("plan", HELLO, "--prefix", prefix).stdout.strip().splitlines()[-1]
    assert after.startswith("record: ") and os.path.exists(after.removeprefix("record: "))


def test_plan_names_the_record_a_run_writes_when_the_script_names_its_experiment(tmp_path):
    source = open(HELLO).read()
    call = 'executor_main(steps=[stats], description="Hello world: generate documents, then count them")'
    assert call in source
    script = tmp_path / "my_exp_lr.py"
    script.write_text(source.replace(call, call[:-1] + ', experiment_name="my_exp")'))
    prefix = str(tmp_path / "lab")
    predicted = marin("plan", str(script), "--prefix", prefix).stdout.strip().splitlines()[-1]
    assert predicted.startswith("record: none yet (a run writes ") and "/experiments/my_exp-" in predicted, predicted
    assert marin("run", str(script), "--prefix", prefix, "--backend", "local").returncode == 0
    written = os.listdir(os.path.join(prefix, "experiments"))
    record = next(name for name in written if name.endswith(".json"))
    assert predicted == f"record: none yet (a run writes {os.path.join(prefix, 'experiments', record)})"
    assert marin("plan", str(script), "--prefix", prefix).stdout.strip().splitlines()[-1] == (
        f"record: {os.path.join(prefix, 'experiments', record)}"
    )


def test_plan_of_a_script_that_never_calls_executor_main_is_an_error(tmp_path):
    for source in ("print('hello')\n", "import sys\nprint('hello')\nsys.exit(0)\n"):
        script = tmp_path / "not_an_experiment.py"
        script.write_text(source)
        result = marin("plan", str(script), "--prefix", str(tmp_path / "lab"))
        assert result.returncode != 0, source
        assert "did not call executor_main" in result.stderr and "Traceback" not in result.stderr


FAILING = """
from marin.execution import ExecutorStep, executor_main, versioned
from tests.executor_steps import CountConfig, count_step

executor_main([ExecutorStep("f/bad", count_step, CountConfig(value=versioned(1), fail=True))])
"""


def test_a_failed_run_names_the_log_and_its_last_error_and_a_second_run_the_fix(tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    prefix = str(tmp_path / "lab")
    first = marin("run", str(script), "--prefix", prefix, "--backend", "local")
    assert first.returncode == 1
    (step,) = os.listdir(os.path.join(prefix, "f"))
    logs = os.path.join(prefix, "f", step, ".executor_logs")
    log = os.path.join(logs, sorted(os.listdir(logs))[-1])
    assert f"  log:        {log}" in first.stdout
    assert "  last error: RuntimeError: planned failure" in first.stdout
    second = marin("run", str(script), "--prefix", prefix, "--backend", "local")
    assert second.returncode == 1
    assert f"  log:        {log}" in second.stdout and "--force_run_failed reruns it" in second.stdout
    assert "  last error: RuntimeError: planned failure" in second.stdout


def _record(prefix: str) -> str:
    (name,) = [n for n in os.listdir(os.path.join(prefix, "experiments")) if n.endswith(".json")]
    return os.path.join(prefix, "experiments", name)


def test_verify_says_when_two_records_are_of_different_experiments(tmp_path):
    script = tmp_path / "other_experiment.py"
    script.write_text(FAILING.replace('"f/bad"', '"o/other"').replace("fail=True", "fail=False"))
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert marin("run", HELLO, "--prefix", a, "--backend", "local").returncode == 0
    assert marin("run", str(script), "--prefix", b, "--backend", "local").returncode == 0
    record_a, record_b = (_record(p) for p in (a, b))
    result = marin("verify", record_a, record_b)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "experiment 'hello_world'" in result.stderr and "experiment 'other_experiment'" in result.stderr
    assert "different experiments" in result.stderr


def test_the_readme_rerun_prefix_is_ignored_by_git():
    check = subprocess.run(["git", "check-ignore", "-q", "again/x"], cwd=REPO)
    assert check.returncode == 0


WRONG_TYPE = """
from experiments.defaults import default_tokenize, default_tokenizer
from experiments.defaults_training import default_train
from marin.execution import executor_main

tokenizer = default_tokenizer("mine-bpe", "/nonexistent/docs", vocab_size=256)
tokenized = default_tokenize("mine", "/nonexistent/docs", tokenizer)
trained = default_train("mine", tokenized, num_train_steps=10, checkpoint_every_steps="25")

if __name__ == "__main__":
    executor_main(steps=[trained])
"""


def test_a_wrong_typed_config_value_is_one_error_line_naming_the_step_and_the_field(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(WRONG_TYPE)
    line = 8
    expected = (
        f"error: step 'checkpoints/mine' ({script}:{line}): TrainConfig.checkpoint_every_steps: "
        "expected int, got str '25'"
    )
    env = dict(os.environ, PYTHONPATH=REPO)
    runs = {
        "marin run": marin("run", str(script), "--prefix", str(tmp_path / "lab")),
        "marin plan": marin("plan", str(script), "--prefix", str(tmp_path / "lab")),
        "python": subprocess.run(
            [sys.executable, str(script), "--prefix", str(tmp_path / "lab")],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=120,
        ),
    }
    for how, run in runs.items():
        assert run.returncode == (1 if how == "python" else 2), (how, run.stderr)
        assert "Traceback" not in run.stderr, (how, run.stderr)
        errors = [text for text in run.stderr.splitlines() if text.startswith("error:")]
        assert errors == [expected], (how, run.stderr)
        assert "--traceback" in run.stderr
    assert not (tmp_path / "lab").exists()
    shown = marin("plan", str(script), "--prefix", str(tmp_path / "lab"), "--traceback")
    assert shown.returncode == 2 and "Traceback" in shown.stderr and "__post_init__" in shown.stderr
    assert shown.stderr.strip().splitlines()[-1] == expected
