"""The default backend (`auto`): threads for steps that declare no resources, Ray tasks for the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from marin.execution import Executor, ExecutorStep, ResourceConfig, output_path_of, versioned
from marin.storage import join, read_text
from tests.executor_steps import CountConfig, count_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pids(counter: str) -> dict[str, int]:
    """Step output folder name -> the pid that ran it."""
    lines = [json.loads(line) for line in open(counter)]
    return {os.path.basename(line["output"]).rsplit("-", 1)[0]: line["pid"] for line in lines}


def _chain(counter: str, resources: ResourceConfig | None = None):
    a = ExecutorStep("auto/a", count_step, CountConfig(value=versioned(1), counter_path=counter))
    b = ExecutorStep(
        "auto/b",
        count_step,
        CountConfig(value=versioned(2), inputs=[output_path_of(a)], counter_path=counter),
        resources=resources,
    )
    return a, b


def test_default_backend_runs_undeclared_steps_as_threads_of_the_driver(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    counter = str(tmp_path / "calls")
    executor = Executor(str(tmp_path / "prefix"))
    assert executor.backend_kind == "auto"
    executor.run(list(_chain(counter)))
    assert _pids(counter) == {"a": os.getpid(), "b": os.getpid()}


def test_hello_world_on_the_default_backend_never_imports_ray(tmp_path):
    """Importing Ray alone costs about a second and starting it 7-20 s: a run of plain steps needs neither."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['hello_world.py', '--prefix', {str(tmp_path / 'lab')!r}]\n"
        "try:\n"
        "    runpy.run_path('experiments/tutorial/hello_world.py', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('ray imported:', 'ray' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(env, PYTHONPATH=REPO),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "ray imported: False" in result.stdout
    assert "2 SUCCESS" in result.stdout + result.stderr


def test_auto_backend_sends_declared_steps_to_ray_and_keeps_the_rest_local(tmp_path, ray_cluster, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    counter = str(tmp_path / "calls")
    a, b = _chain(counter, resources=ResourceConfig(cpu=1))
    paths = Executor(str(tmp_path / "prefix"), backend="auto").run([b])
    pids = _pids(counter)
    assert pids["a"] == os.getpid() and pids["b"] != os.getpid()
    for step in (a, b):
        log = read_text(join(paths[step], ".executor_logs", "001.log"))
        assert "counting into" in log and "log line from the step" in log


def test_auto_backend_given_a_cluster_address_runs_every_step_on_ray(tmp_path, ray_cluster):
    address = ray_cluster.get_runtime_context().gcs_address
    counter = str(tmp_path / "calls")
    Executor(str(tmp_path / "prefix"), backend="auto", ray_address=address).run(list(_chain(counter)))
    assert os.getpid() not in _pids(counter).values()


def test_a_rerun_of_hello_world_runs_its_steps_where_the_original_ran_and_starts_no_ray(tmp_path):
    """Its steps declare no resources, and its record says so: `marin rerun` runs them as threads of the
    driver, as the original run did, instead of starting a local Ray for them (17-38 s on 2 cores)."""
    lab, again = tmp_path / "lab", tmp_path / "again"
    code = (
        "import glob, json, runpy, sys\n"
        f"sys.argv = ['hello_world.py', '--prefix', {str(lab)!r}]\n"
        "try:\n"
        "    runpy.run_path('experiments/tutorial/hello_world.py', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"(record,) = glob.glob({str(lab / 'experiments' / 'hello_world-*.json')!r})\n"
        "print('recorded resources:', [s['resources'] for s in json.load(open(record))['steps']])\n"
        "from marin.cli import main\n"
        f"code = main(['rerun', record, '--prefix', {str(again)!r}, '--code', 'checkout'])\n"
        "print('rerun exit:', code, 'ray imported:', 'ray' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(env, PYTHONPATH=REPO),
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "recorded resources: [None, None]" in result.stdout
    assert "rerun exit: 0 ray imported: False" in result.stdout, result.stdout + result.stderr
    assert "starting a local Ray cluster" not in result.stderr
    assert len(list(again.glob("hello/stats-*/stats.json"))) == 1
