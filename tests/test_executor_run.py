"""Running: what runs, what is skipped, failures and their propagation, records, logs, both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from marin.execution import Executor, ExecutorRunError, ExecutorStep, output_path_of, versioned
from marin.storage import exists, join, list_dir, read_bytes, read_text
from tests.executor_steps import CountConfig, count_step, invocations

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def diamond(counter, fail_b=False):
    a = ExecutorStep("d/a", count_step, CountConfig(value=versioned(1), counter_path=counter))
    b = ExecutorStep(
        "d/b",
        count_step,
        CountConfig(value=versioned(2), inputs=[output_path_of(a)], counter_path=counter, fail=fail_b),
    )
    c = ExecutorStep(
        "d/c", count_step, CountConfig(value=versioned(3), inputs=[output_path_of(a)], counter_path=counter)
    )
    d = ExecutorStep(
        "d/d", count_step, CountConfig(value=versioned(4), inputs=[output_path_of(b)], counter_path=counter)
    )
    return a, b, c, d


def status(path):
    return read_text(join(path, ".executor_status"))


def test_run_writes_outputs_status_manifest_logs_and_record(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    a, b, c, d = diamond(counter)
    executor = Executor(prefix, backend="local", experiment_name="diamond")
    paths = result = executor.run([d, c])
    assert sorted(invocations(counter)) == sorted(paths.values())
    assert json.loads(read_bytes(join(paths[d], "out.json"))) == {"total": 1 + 2 + 4}
    for step in (a, b, c, d):
        out = paths[step]
        assert status(out) == "SUCCESS"
        assert not exists(join(out, ".executor_lease"))
        manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
        assert [f["path"] for f in manifest["files"]] == ["out.json"]
        import hashlib

        assert manifest["files"][0]["sha256"] == hashlib.sha256(read_bytes(join(out, "out.json"))).hexdigest()
        info = json.loads(read_bytes(join(out, ".executor_info")))
        assert info["fn"] == "tests.executor_steps:count_step"
        assert info["config_type"] == "tests.executor_steps:CountConfig"
        assert info["config"]["output_path"] == out
        log = read_text(join(out, ".executor_logs", "001.log"))
        assert f"counting into {out}" in log and "log line from the step" in log
    record = json.loads(read_bytes(result.record_path))
    assert record["name"] == "diamond" and record["prefix"] == executor.prefix
    assert [s["name"] for s in record["steps"]] == ["d/a", "d/b", "d/d", "d/c"]
    assert record["environment"]["packages"]["ray"] == "2.60.0"
    runs = read_text(result.record_path.replace(".json", ".runs.jsonl")).splitlines()
    assert len(runs) == 1 and {s["outcome"] for s in json.loads(runs[0])["steps"].values()} == {"SUCCESS"}


def test_second_run_runs_nothing_and_appends_a_run_line(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    steps = diamond(counter)
    executor = Executor(prefix, backend="local")
    first = executor.run(steps)
    record_before = read_bytes(first.record_path)
    second = executor.run(steps)
    assert len(invocations(counter)) == 4
    assert second.record_path == first.record_path
    assert read_bytes(second.record_path) == record_before
    assert set(second.statuses().values()) == {"SKIPPED"}
    runs = read_text(second.record_path.replace(".json", ".runs.jsonl")).splitlines()
    assert len(runs) == 2 and {s["outcome"] for s in json.loads(runs[1])["steps"].values()} == {"SKIPPED"}


def test_failed_step_marks_descendants_dep_failed_and_independent_branch_finishes(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    a, b, c, d = diamond(counter, fail_b=True)
    executor = Executor(prefix, backend="local")
    with pytest.raises(ExecutorRunError, match="2 step\\(s\\) did not succeed: d/b, d/d") as info:
        executor.run([d, c])
    paths = executor.plan([d, c])
    assert status(paths[b]) == "FAILED" and status(paths[d]) == "DEP_FAILED"
    assert status(paths[a]) == "SUCCESS" and status(paths[c]) == "SUCCESS"
    assert not exists(join(paths[b], ".executor_manifest.json"))
    assert "RuntimeError: planned failure" in read_text(join(paths[b], ".executor_logs", "001.log"))
    assert paths[d] not in invocations(counter)
    assert {o.status for o in info.value.outcomes.values()} == {"SUCCESS", "FAILED", "DEP_FAILED"}


def test_failed_step_is_rerun_only_with_force_run_failed(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    a, b, c, d = diamond(counter, fail_b=True)
    executor = Executor(prefix, backend="local")
    with pytest.raises(ExecutorRunError):
        executor.run([b])
    with pytest.raises(ExecutorRunError, match="d/b"):
        executor.run([b])
    assert invocations(counter).count(executor.plan([b])[b]) == 1
    fixed = diamond(counter, fail_b=False)[1]
    executor.run([fixed], force_run_failed=True)
    path = executor.plan([fixed])[fixed]
    assert invocations(counter).count(path) == 2 and status(path) == "SUCCESS"
    assert list_dir(join(path, ".executor_logs")) == ["001.log", "002.log"]


def test_run_only_runs_matching_steps_and_their_dependencies(tmp_path, prefix):
    counter = str(tmp_path / "calls")
    a, b, c, d = diamond(counter)
    executor = Executor(prefix, backend="local")
    paths = executor.run([d, c], run_only=["d/b$"])
    assert sorted(invocations(counter)) == sorted([paths[a], paths[b]])
    assert status(paths[c]) is None and status(paths[d]) is None


def test_dry_run_writes_nothing(tmp_path, capsys):
    prefix = str(tmp_path / "prefix")
    steps = diamond(str(tmp_path / "calls"))
    paths = Executor(prefix, backend="local").run(steps, dry_run=True)
    assert len(paths) == 4 and not os.path.exists(prefix) and not os.path.exists(tmp_path / "calls")
    out = capsys.readouterr().out
    assert "new hash: no output yet" in out and "4 steps (4 run)" in out


@dataclass(frozen=True)
class WatchConfig:
    trainer_path: str
    """The trainer's output (a nonblocking input)."""
    flag_path: str
    """Written when this step runs; the trainer waits for it."""


def watch(config: WatchConfig) -> None:
    with open(config.flag_path, "w") as f:
        f.write(config.trainer_path)


def test_nonblocking_dependency_does_not_wait(tmp_path):
    flag = str(tmp_path / "watcher-ran")
    trainer = ExecutorStep("nb/train", count_step, CountConfig(value=versioned(1), wait_for=flag))
    watcher = ExecutorStep("nb/watch", watch, WatchConfig(output_path_of(trainer).nonblocking(), flag))
    executor = Executor(str(tmp_path / "prefix"), backend="local")
    paths = executor.run([trainer, watcher])
    assert status(paths[trainer]) == "SUCCESS" and status(paths[watcher]) == "SUCCESS"
    assert open(flag).read() == paths[trainer]


def test_ray_backend_runs_each_step_as_a_task_with_resources(tmp_path, ray_cluster):
    from marin.execution import ResourceConfig

    counter = str(tmp_path / "calls")
    a, b, c, d = diamond(counter)
    heavy = ExecutorStep(
        "d/heavy", count_step, CountConfig(value=versioned(9), counter_path=counter), resources=ResourceConfig(cpu=2)
    )
    paths = Executor(str(tmp_path / "prefix"), backend="ray").run([d, c, heavy])
    calls = invocations(counter)
    assert sorted(calls) == sorted(paths.values())
    pids = {json.loads(line)["pid"] for line in open(counter)}
    assert os.getpid() not in pids
    log = read_text(join(paths[d], ".executor_logs", "001.log"))
    assert "counting into" in log and "log line from the step" in log


def test_unsatisfiable_resources_fail_before_anything_runs(tmp_path, ray_cluster):
    from marin.execution import ResourceConfig

    counter = str(tmp_path / "calls")
    ok = ExecutorStep("r/ok", count_step, CountConfig(value=versioned(1), counter_path=counter))
    huge = ExecutorStep(
        "r/huge",
        count_step,
        CountConfig(value=versioned(2), inputs=[output_path_of(ok)]),
        resources=ResourceConfig(gpu=8),
    )
    with pytest.raises(ValueError, match=r"step 'r/huge' can never run on this Ray cluster: it asks for .*GPU=8"):
        Executor(str(tmp_path / "prefix"), backend="ray").run([huge])
    assert invocations(counter) == []


def run_script(args, env=None, check=False):
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO, **(env or {})),
        check=check,
        timeout=300,
    )


def test_hello_world_script_runs_then_runs_nothing(tmp_path):
    prefix = str(tmp_path / "lab")
    first = run_script(["experiments/tutorial/hello_world.py", "--prefix", prefix, "--backend", "local"])
    assert first.returncode == 0, first.stderr
    assert "2 steps: 2 SUCCESS" in first.stdout and "record: " in first.stdout
    second = run_script(["experiments/tutorial/hello_world.py", "--prefix", prefix, "--backend", "local"])
    assert "nothing to run: every step already succeeded" in second.stdout


def test_failing_experiment_exits_non_zero_with_a_summary(tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(
        "from marin.execution import ExecutorStep, executor_main, versioned\n"
        "from tests.executor_steps import CountConfig, count_step\n"
        "bad = ExecutorStep('f/bad', count_step, CountConfig(value=versioned(1), fail=True))\n"
        "good = ExecutorStep('f/good', count_step, CountConfig(value=versioned(2)))\n"
        "if __name__ == '__main__':\n"
        "    executor_main(steps=[bad, good])\n"
    )
    result = run_script([str(script), "--prefix", str(tmp_path / "p"), "--backend", "local"])
    assert result.returncode == 1
    assert "FAILED" in result.stdout and "RuntimeError: planned failure" in result.stdout
    assert "1 FAILED, 1 SUCCESS" in result.stdout


def test_unwritable_prefix_is_a_one_line_error(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/marin-cannot-write-here"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "p")
    result = run_script(["experiments/tutorial/hello_world.py", "--prefix", target, "--backend", "local"])
    assert result.returncode != 0
    assert target in result.stderr
    assert "Traceback" not in result.stderr
