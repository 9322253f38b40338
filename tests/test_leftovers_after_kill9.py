"""After kill -9 at random moments, the next run leaves nothing of the dead runners behind.

Runners are real processes (`python -m tests.lease_dag`), killed with SIGKILL at random moments of their
run, several times over one prefix; then one run to the end. After it: every step SUCCESS with the
output its inputs determine and a manifest of exactly its files (never a wrong SUCCESS), and no attempt
folder, no step lease, no temporary file and no run marker anywhere under the prefix. On S3 the
requests go through a proxy adding latency, which widens the moment between a step's SUCCESS and the
removal of its attempt folder (a whole copy of its outputs there) that a kill must hit to leave one.
The unit tests below take apart the two mechanisms: the temporary files of dead writers (their flock is
free) and the sweep of a dead run's marker.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from urllib.parse import unquote

from marin.execution import Executor
from marin.execution.attempts import RunMarker, sweep_dead_runs
from marin.storage import compute_manifest, join, list_dir, read_bytes, remove_orphaned_temps
from marin.storage.backends import backend_for
from marin.storage.local import LocalBackend
from tests.lease_dag import WIDTH, build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_STEPS, SLEEP_S = 10, 0.1


def _runner(prefix: str, counter: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lease_dag", prefix, counter, str(N_STEPS), str(SLEEP_S)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _leftovers(prefix: str) -> list[str]:
    """Every object or file under `prefix` that a finished run must not leave."""
    files = [rel for rel, _ in backend_for(prefix).list_files(prefix)]
    bad = [
        rel
        for rel in files
        if ".executor_attempt." in rel
        or rel.endswith("/.executor_lease")
        or ".executor_runs/" in rel
        or os.path.basename(rel).startswith(".tmp-")
    ]
    if not prefix.startswith(("s3://", "gs://")):
        bad += [d for d, _, _ in os.walk(prefix) if os.path.basename(d).startswith(".executor_attempt.")]
    return bad


def _after_success(prefix: str, paths: list[str]) -> list[str]:
    """Steps that are SUCCESS and still have an attempt folder or a lease: a runner died before cleaning up."""
    return [
        out
        for out in paths
        if read_bytes(join(out, ".executor_status")) == b"SUCCESS"
        and any(n.startswith(".executor_attempt.") or n == ".executor_lease" for n in list_dir(out))
    ]


def _expected_totals(n: int) -> list[int]:
    totals: list[int] = []
    for layer in range((n + WIDTH - 1) // WIDTH):
        previous = totals[(layer - 1) * WIDTH : layer * WIDTH] if layer else []
        for i in range(min(WIDTH, n - layer * WIDTH)):
            deps = [previous[(i + k) % len(previous)] for k in range(2)] if previous else []
            totals.append(layer * WIDTH + i + sum(deps))
    return totals


def _kill_at_a_random_moment(prefix: str, counter: str, rng: random.Random) -> bool:
    """Starts a runner and kills it with SIGKILL at a random moment while its steps run; False when the run
    had already ended at that moment (nothing was killed)."""
    proc = _runner(prefix, counter)
    deadline = time.monotonic() + 60
    while not os.path.exists(counter) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(rng.uniform(0, SLEEP_S * N_STEPS / WIDTH))
    alive = proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return alive


def _run_and_check(prefix: str, counter: str) -> tuple[list[str], list[str]]:
    """Runs the experiment to the end in this process and checks it; returns what the dead runners had
    left, and the steps they left SUCCESS but not cleaned up."""
    steps = build(counter, N_STEPS, SLEEP_S)
    executor = Executor(prefix, backend="local", experiment_name="race")
    paths = list(executor.plan(steps).values())
    left, unclean = _leftovers(prefix), _after_success(prefix, paths)
    executor.run(steps)
    for out, total in zip(paths, _expected_totals(N_STEPS), strict=True):
        assert read_bytes(join(out, ".executor_status")) == b"SUCCESS", out
        assert json.loads(read_bytes(join(out, "out.json"))) == {"total": total}, out
        assert json.loads(read_bytes(join(out, ".executor_manifest.json"))) == compute_manifest(out), out
    assert _leftovers(prefix) == []
    return left, unclean


def test_kill9_at_random_moments_then_a_run_leaves_nothing_behind_locally(tmp_path):
    rng = random.Random(3)
    killed = 0
    for i in range(12):
        prefix, counter = str(tmp_path / f"p{i}"), str(tmp_path / f"calls{i}")
        hit = _kill_at_a_random_moment(prefix, counter, rng)
        left, _ = _run_and_check(prefix, counter)
        if hit:
            assert left  # the kill hit a live run (its marker at least was there): it left something to clean up
            killed += 1
            if killed == 4:
                break
    assert killed == 4, f"only {killed} of 12 random moments fell inside a run"


def _deletes_in_an_attempt_folder(request) -> bool:
    return request.method == "DELETE" and ".executor_attempt." in unquote(request.path)


def test_kill9_after_success_or_at_a_random_moment_then_a_run_leaves_nothing_behind_on_s3(
    tmp_path, bucket_prefix, fault_endpoint
):
    """First the worst moment: a step is SUCCESS and its runner is removing the attempt folder (a whole
    copy of its outputs) when it is killed; then a random moment."""
    prefix, counter = bucket_prefix("s3"), str(tmp_path / "calls")
    proxy = fault_endpoint("s3")
    cleanup = proxy.hold(_deletes_in_an_attempt_folder)
    proc = _runner(prefix, counter)
    assert cleanup.hit.wait(120), "the runner never removed an attempt folder"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    cleanup.release(drop=True)
    left, unclean = _run_and_check(prefix, counter)
    assert unclean and any(".executor_attempt." in rel for rel in left)

    prefix, counter = bucket_prefix("s3"), str(tmp_path / "calls-random")
    _kill_at_a_random_moment(prefix, counter, random.Random(5))
    left, _ = _run_and_check(prefix, counter)
    assert left


def _hold_lock(path: str) -> subprocess.Popen:
    """A process that creates `path`, flocks it as a writer does, and keeps it until killed."""
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({path!r}, os.O_CREAT | os.O_WRONLY, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_temp_files_are_removed_only_once_their_writer_is_dead(tmp_path):
    live, dead = str(tmp_path / ".tmp-cond-live"), str(tmp_path / ".tmp-cond-dead")
    writer, victim = _hold_lock(live), _hold_lock(dead)
    try:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        (tmp_path / "data.txt").write_text("kept")
        assert remove_orphaned_temps(str(tmp_path)) == 1
        assert sorted(os.listdir(tmp_path)) == [".tmp-cond-live", "data.txt"]
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert remove_orphaned_temps(str(tmp_path)) == 1
    assert os.listdir(tmp_path) == ["data.txt"]


def test_a_writer_whose_fresh_temp_file_was_taken_for_an_orphan_starts_over(tmp_path, monkeypatch):
    """The window between a temp file's creation and its lock: a cleaner there removes it, and the writer,
    once it holds the lock, finds its name gone and writes through a new one. (The cleaner is run at that
    moment by wrapping `flock`; the only way to land a real cleaner in a window of microseconds.)"""
    import marin.storage.local as local

    real_flock, cleaned = fcntl.flock, []

    def flock_after_a_cleaner(fd, op):
        if op == fcntl.LOCK_EX and not cleaned:
            cleaned.append(remove_orphaned_temps(str(tmp_path)))
        return real_flock(fd, op)

    monkeypatch.setattr(local.fcntl, "flock", flock_after_a_cleaner)
    store = LocalBackend()
    assert store.create_if_absent(str(tmp_path / "lease"), b"mine") is not None
    assert cleaned == [1]
    assert (tmp_path / "lease").read_bytes() == b"mine" and os.listdir(tmp_path) == ["lease"]


def test_the_sweep_leaves_a_live_run_alone_and_cleans_up_after_a_dead_one(tmp_path):
    """A dead run (its process gone) that published SUCCESS but died before removing its attempt folder and
    its lease: the sweep removes both; the live run's marker and everything of its step stay."""
    prefix = str(tmp_path / "prefix")
    steps = build(str(tmp_path / "calls"), 2)
    done, running = list(Executor(prefix, backend="local", experiment_name="race").plan(steps).values())
    os.makedirs(join(done, ".executor_attempt.001-deadbeef"))
    (tmp_path / "prefix").mkdir(exist_ok=True)
    for out, status in ((done, b"SUCCESS"), (running, b"RUNNING")):
        os.makedirs(out, exist_ok=True)
        with open(join(out, ".executor_status"), "wb") as f:
            f.write(status)
    os.makedirs(join(running, ".executor_attempt.001-cafecafe"))
    code = (
        "import sys\n"
        "from marin.execution.attempts import RunMarker\n"
        "from marin.execution.lease import try_acquire\n"
        f"try_acquire({join(done, '.executor_lease')!r}, 'dead-runner').__enter__()\n"
        f"RunMarker.begin({prefix!r}, 'deadrun', [{done!r}, {running!r}])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    dead = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert dead.stdout.readline().strip() == "ready"
    live = RunMarker.begin(prefix, "liverun", [running])
    try:
        assert sweep_dead_runs(prefix, "myrun") == 0  # the dead run's process is still alive
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(timeout=30)
        assert sweep_dead_runs(prefix, "myrun") == 1
        assert sorted(list_dir(join(prefix, ".executor_runs"))) == ["liverun.lease", "liverun.steps.json"]
        assert ".executor_attempt.001-deadbeef" not in list_dir(done)
        assert ".executor_lease" not in list_dir(done)
        assert ".executor_attempt.001-cafecafe" in list_dir(running)  # not finished: resumed from later
    finally:
        live.end()
    assert list_dir(join(prefix, ".executor_runs")) == []
