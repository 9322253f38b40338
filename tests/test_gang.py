"""A train step on a gang of 2 hosts (a 127.0.0.1 Ray cluster of 2 nodes, 2 forced CPU devices per host).

One gang run trains as one step (one SUCCESS, one metrics.jsonl, one checkpoint folder) and lands within
a stated tolerance of the same training in one process; a second gang run on the GCS emulator, with one
host killed -9 after a checkpoint, is torn down, restarted, resumes from that checkpoint and ends with a
final checkpoint byte-identical to the first run's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from marin.execution import Executor, ExecutorRunError, ExecutorStep, ResourceConfig
from marin.execution.backends import start_local_ray
from marin.execution.resources_check import gang_unsatisfiable_reason
from marin.storage import read_bytes
from marin.training.checkpoints import list_checkpoints
from tests.emulators import clear_storage_caches
from tests.gang_steps import (
    CHECKPOINT_EVERY,
    STEPS,
    checkpoint_tensors,
    fail_on_host_1,
    gang_step,
    metric_steps,
    reproducible_files,
)
from tests.ray_nodes import REPO, LocalRayCluster
from tests.training_fixtures import corpus, reference_run

TOLERANCE = 1e-4
"""Largest relative difference (to the tensor's largest magnitude) allowed between the gang's parameters
and one process's after the run: the same math, with sums over 4 devices' shards in another order."""


@pytest.fixture(scope="module")
def gang(tmp_path_factory, gcs_emulator):
    """A head and a worker node (1 CPU each), the emulator's endpoints in every process, and the corpus."""
    import ray

    previous_cpus = None
    if ray.is_initialized():
        previous_cpus = int(ray.cluster_resources().get("CPU", 1))
        ray.shutdown()
    endpoints = {
        **gcs_emulator.env(),
        "TENSORSTORE_GCS_HTTP_URL": gcs_emulator.url,
        "GCE_METADATA_ROOT": "127.0.0.1:1",
    }
    saved = {k: os.environ.get(k) for k in endpoints}
    os.environ.update(endpoints)
    clear_storage_caches()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("MARIN_")}
    env.update(
        RAY_AUTH_MODE="disabled",
        PYTHONPATH=REPO,
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    )
    root = tmp_path_factory.mktemp("gang")
    data = str(corpus(root / "corpus")["plays_a"])
    c = LocalRayCluster(str(root / "ray"), env)
    try:
        c.start_head({"head": 1})
        c.start_workers({"worker": {"worker": 1}})
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
        c.wait_for_nodes(ray)
        yield c, data, root
    finally:
        ray.shutdown()
        c.stop()
        if previous_cpus:
            start_local_ray(ray, num_cpus=previous_cpus, log_to_driver=False)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        clear_storage_caches()


@pytest.fixture(scope="module")
def gang_run(gang):
    """One uninterrupted gang run on a local prefix: (output folder, the hosts' node ids)."""
    cluster, data, root = gang
    step = gang_step(data, compile_cache=str(root / "jax-cache"))
    result = Executor(str(root / "lab"), backend="ray", ray_address=cluster.address, experiment_name="gang").run([step])
    return Path(result[step]), cluster


def test_local_backend_refuses_a_gang_naming_the_step(tmp_path):
    step = ExecutorStep("train/gang", print, None, resources=ResourceConfig(hosts=2))
    with pytest.raises(ValueError, match=r"step 'train/gang' asks for hosts=2: .*only on the Ray backend"):
        Executor(str(tmp_path), backend="local").run([step])
    with pytest.raises(ValueError, match=r"ResourceConfig.hosts must be an integer >= 1, got 0"):
        ResourceConfig(hosts=0)


def test_a_gang_no_cluster_could_place_is_refused_before_it_runs():
    nodes = [{"Alive": True, "Resources": {"CPU": 4.0}}, {"Alive": True, "Resources": {"CPU": 1.0}}]
    opts = {"num_cpus": 2}
    assert gang_unsatisfiable_reason(opts, 2, "SPREAD", nodes) is None
    assert gang_unsatisfiable_reason(opts, 2, "STRICT_PACK", nodes) is None
    reason = gang_unsatisfiable_reason(opts, 2, "STRICT_SPREAD", nodes)
    assert reason == "its 2 hosts need 2 nodes (STRICT_SPREAD) with that, but 1 have it"
    assert "no node has that" in gang_unsatisfiable_reason(opts, 3, "STRICT_PACK", nodes)


def test_a_host_that_raises_fails_the_step_and_stops_the_others_without_a_restart(gang, monkeypatch):
    cluster, _, root = gang
    monkeypatch.setenv("MARIN_GANG_DEATH_GRACE_S", "1")
    step = ExecutorStep("fails/gang", fail_on_host_1, None, resources=ResourceConfig(hosts=2, cpu=1))
    executor = Executor(str(root / "fails"), backend="ray", ray_address=cluster.address, experiment_name="fails")
    t0 = time.monotonic()
    with pytest.raises(ExecutorRunError) as caught:
        executor.run([step])
    assert time.monotonic() - t0 < 120  # host 0 (asleep for an hour) was stopped
    (outcome,) = caught.value.outcomes.values()
    assert "host 1 raised ValueError: a bad shard on host 1" in outcome.error
    log = (Path(executor.plan([step])[step]) / ".executor_logs" / "001.log").read_text()
    assert "restart" not in log and "launch 2" not in log
    assert not _alive_gang_hosts(cluster.address)


def test_a_two_host_gang_trains_as_one_step_within_tolerance_of_one_process(gang_run, gang):
    out, cluster = gang_run
    _, _, root = gang
    assert (out / ".executor_status").read_text() == "SUCCESS"
    runner_log = (out / ".executor_logs" / "001.log").read_text()
    launch = next(line for line in runner_log.splitlines() if "gang launch 1: 2 hosts ready" in line)
    nodes = {cluster.nodes["head"].node_id[:8], cluster.nodes["worker"].node_id[:8]}
    assert {part.split(" node ")[1] for part in launch.split(";")[1].split(",")} == nodes  # one host per node
    host_logs = sorted(p.name for p in (out / ".executor_logs").iterdir())
    assert host_logs == ["001.launch1-host0.log", "001.launch1-host1.log", "001.log"]
    for i in range(2):
        host_log = (out / ".executor_logs" / f"001.launch{1}-host{i}.log").read_text()
        assert f"host {i} of 2 joined the gang" in host_log and "4 devices in all, 2 here" in host_log
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(STEPS))  # written once, by host 0
    info = json.loads((out / "train_info.json").read_text())
    assert info["complete"] and (out / "hf" / f"step-{STEPS - 1}" / "config.json").exists()  # exported by host 0
    assert [s for s, _ in list_checkpoints(str(out))] == list(range(CHECKPOINT_EVERY, STEPS, CHECKPOINT_EVERY)) + [
        STEPS - 1
    ]

    one = reference_run(root)  # the same config in one process, one device (shared with test_train.py)
    runs = [len(list((d / "wandb").glob("**/offline-run-*"))) for d in (out, one)]
    assert runs[0] == runs[1] > 0  # host 0's W&B runs only, as one process makes
    ours, theirs = (checkpoint_tensors(str(d / "checkpoints" / f"step-{STEPS - 1}")) for d in (out, one))
    assert sorted(ours) == sorted(theirs) and any(k.startswith("model/") for k in ours)
    worst = max(float(np.max(np.abs(ours[k] - theirs[k])) / max(float(np.max(np.abs(theirs[k]))), 1e-12)) for k in ours)
    print(f"largest relative difference, 2x2-device gang vs one process: {worst:.2e}")
    assert worst <= TOLERANCE
    one_loss = json.loads((one / "metrics.jsonl").read_text().splitlines()[-1])["loss"]
    assert abs(lines[-1]["loss"] - one_loss) <= TOLERANCE * abs(one_loss)


def test_a_host_killed_mid_run_restarts_the_gang_which_resumes_to_identical_bytes(gang_run, gang, monkeypatch):
    reference, cluster = gang_run
    _, data, root = gang
    monkeypatch.setenv("MARIN_METRICS_FLUSH_S", "0")  # metrics.jsonl on the bucket at every step: the step reached
    prefix = f"gs://marin-test/gang-{uuid.uuid4().hex[:8]}"
    step = gang_step(data, compile_cache=str(root / "jax-cache"))
    executor = Executor(prefix, backend="ray", ray_address=cluster.address, experiment_name="gang")
    (out,) = executor.plan([step]).values()
    killed: dict = {}

    def kill_host_1_after_a_checkpoint():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and "complete" not in killed:
            clear_storage_caches()
            done = [s for s, _ in list_checkpoints(out)]
            if done and done[-1] >= 2 * CHECKPOINT_EVERY:
                os.kill(_alive_host(cluster.address, 1).pid, signal.SIGKILL)
                clear_storage_caches()
                killed.update(complete=[s for s, _ in list_checkpoints(out)], reached=max(metric_steps(out)))
            time.sleep(0.2)

    watcher = threading.Thread(target=kill_host_1_after_a_checkpoint, daemon=True)
    watcher.start()
    try:
        executor.run([step])
    except BaseException:
        print(f"killed: {killed}\n{_logs(out)}")
        raise
    finally:
        watcher.join(timeout=5)
    assert "complete" in killed, "the run finished before a host could be killed"
    log = read_bytes(f"{out}/.executor_logs/001.log").decode()
    assert "host 1 died" in log and "starting it again (restart 1 of 3)" in log
    assert "gang launch 2: 2 hosts ready" in log and "gang launch 2: every host finished" in log
    resumed = read_bytes(f"{out}/.executor_logs/001.launch2-host0.log").decode()
    match = re.search(rf"resuming from {re.escape(out)}/\.executor_attempt\.[^/]+/checkpoints/step-(\d+)", resumed)
    assert match, resumed[-3000:]
    # the last checkpoint complete when the host died (one being committed then may have completed since)
    assert int(match.group(1)) >= killed["complete"][-1] >= 2 * CHECKPOINT_EVERY
    # work lost: one interval, plus the one more whose checkpoint was still being committed when the host died
    assert 0 <= killed["reached"] - int(match.group(1)) <= 2 * CHECKPOINT_EVERY
    assert read_bytes(f"{out}/.executor_status") == b"SUCCESS"
    assert reproducible_files(out) == reproducible_files(str(reference))  # checkpoints and HF export


def _alive_gang_hosts(address: str) -> list:
    from ray.util.state import list_actors

    actors = list_actors(address=address, filters=[("state", "=", "ALIVE")])
    return [a for a in actors if (a.name or "").startswith("marin-gang-")]


def _alive_host(address: str, i: int):
    (actor,) = [a for a in _alive_gang_hosts(address) if a.name.endswith(f"-host{i}")]
    return actor


def _logs(out: str) -> str:
    """Every log of the step (the runner's and each host's), for a failure's report."""
    from marin.storage import url_to_fs

    clear_storage_caches()
    fs, plain = url_to_fs(f"{out}/.executor_logs")
    texts = []
    for path in sorted(fs.find(plain)):
        lines = [line for line in fs.cat_file(path).decode().splitlines() if "array_serialization" not in line]
        texts.append(f"===== {path.rsplit('/', 1)[-1]}\n" + "\n".join(lines[-60:]))
    return "\n".join(texts)
