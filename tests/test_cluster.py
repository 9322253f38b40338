"""marin beyond one machine: a real three-node Ray cluster on 127.0.0.1 (head + worker_a + worker_b).

Placement by resources, plan-time refusal of what no node has, `marin submit` of hello world through
the dashboard, shards spread over nodes with the same bytes as locally, a driver killed mid-run, and
a worker node's raylet killed mid-step, the data steps (filter, tokenize) fanning their shards out
over the nodes with the bytes of a local run, and a node killed under a sharded step (the two kills
come last: each leaves the cluster one node short).
"""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from marin.execution import Executor, ExecutorRunError, ResourceConfig
from marin.execution.authoring import canonical_accelerator
from marin.execution.backends import ray_options, start_local_ray
from marin.execution.resources_check import unsatisfiable_reason
from marin.stepkit.sharding import LEDGERS
from marin.storage import compute_manifest
from marin.tools.submit import build_job, prefix_warning, submit_main
from tests.cluster_steps import (
    ShardedConfig,
    chain_steps,
    data_steps,
    probe_step,
    read_lines,
    sharded_step_fn,
    write_shard,
)
from tests.data_docs import doc, english_doc
from tests.data_docs import write_shard as write_doc_shard
from tests.ray_nodes import REPO, LocalRayCluster

LEASE_ENV = {"MARIN_LEASE_TIMEOUT_S": "3", "MARIN_LEASE_HEARTBEAT_S": "0.5"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import ray

    previous_cpus = None
    if ray.is_initialized():
        previous_cpus = int(ray.cluster_resources().get("CPU", 1))
        ray.shutdown()
    saved = {k: os.environ.get(k) for k in LEASE_ENV}
    os.environ.update(LEASE_ENV)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("MARIN_")}
    env.update(
        RAY_AUTH_MODE="disabled",
        PYTHONPATH=REPO,
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    )
    c = LocalRayCluster(str(tmp_path_factory.mktemp("ray")), env)
    try:
        c.start_head({"head": 1})
        c.start_workers(
            {"worker_a": {"worker_a": 1, "pool": 1}, "worker_b": {"worker_b": 1, "pool": 1, "accelerator_type:T4": 1}}
        )
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
        c.wait_for_nodes(ray)
        yield c
    finally:
        ray.shutdown()
        c.stop()
        if previous_cpus:  # give back the session's local Ray (tests/conftest.py::ray_cluster) as it was
            start_local_ray(ray, num_cpus=previous_cpus, log_to_driver=False)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(prefix: str, steps, cluster, name: str):
    return Executor(prefix, backend="ray", ray_address=cluster.address, experiment_name=name).run(steps)


def test_resources_map_to_ray_options_with_accelerator_labels():
    opts = ray_options(ResourceConfig(cpu=2, memory_gb=1.5, gpu=1, tpu=4, accelerator_type="tpu-v4", custom={"x": 1}))
    assert opts == {
        "num_cpus": 2,
        "num_gpus": 1,
        "memory": int(1.5 * 1024**3),
        "accelerator_type": "TPU-V4",
        "resources": {"x": 1, "TPU": 4},
    }
    assert canonical_accelerator("a100") == "A100"
    assert canonical_accelerator("my-own-label") == "my-own-label"
    node = {"Alive": True, "Resources": {"CPU": 8.0, "GPU": 1.0, "accelerator_type:A100": 1.0}}
    assert unsatisfiable_reason(ray_options(ResourceConfig(gpu=1, accelerator_type="A100")), [node]) is None
    reason = unsatisfiable_reason(ray_options(ResourceConfig(gpu=1, accelerator_type="H100")), [node])
    assert "accelerator_type:H100" in reason and "accelerator_type:A100" in reason


def test_step_pinned_by_custom_resource_runs_on_that_node(cluster, tmp_path):
    inv = str(tmp_path / "inv.jsonl")
    on_a = probe_step("on-a", inv, resources=ResourceConfig(custom={"worker_a": 1}))
    on_b = probe_step("on-b", inv, resources=ResourceConfig(custom={"worker_b": 1}))
    on_t4 = probe_step("on-t4", inv, resources=ResourceConfig(cpu=0, accelerator_type="t4"))
    paths = run(str(tmp_path / "prefix"), [on_a, on_b, on_t4], cluster, "pinned")
    ran = {line["tag"]: cluster.name_of(line["node"]) for line in read_lines(inv)}
    assert ran == {"on-a": "worker_a", "on-b": "worker_b", "on-t4": "worker_b"}
    with open(os.path.join(paths[on_a], "where.json")) as f:
        assert json.load(f)["node"] == cluster.nodes["worker_a"].node_id


def test_unsatisfiable_request_is_refused_at_plan_time_naming_step_and_resource(cluster, tmp_path):
    inv = str(tmp_path / "inv.jsonl")
    fine = probe_step("fine", inv)
    gpu = probe_step("a100", inv, resources=ResourceConfig(gpu=1, accelerator_type="A100"))
    with pytest.raises(ValueError, match=r"step 'probe/a100' can never run on this Ray cluster: .*GPU=1"):
        run(str(tmp_path / "prefix"), [fine, gpu], cluster, "refused")
    nowhere = probe_step("nowhere", inv, resources=ResourceConfig(custom={"worker_c": 1}))
    with pytest.raises(ValueError, match=r"step 'probe/nowhere' .* asks for .*worker_c=1.*no node has that"):
        run(str(tmp_path / "prefix"), [nowhere], cluster, "refused")
    assert read_lines(inv) == []
    assert not os.path.exists(tmp_path / "prefix" / "probe")


def test_node_types_the_autoscaler_can_add_count_at_plan_time(cluster):
    """The cluster config is what an autoscaler (v2, KubeRay) reports to the GCS; here we report it."""
    import ray
    import ray._raylet
    from ray.core.generated import autoscaler_pb2
    from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_put

    from marin.execution.backends import Backend

    config = autoscaler_pb2.ClusterConfig()
    group = config.node_group_configs.add(name="gpu_worker", max_count=8)
    group.resources.update({"CPU": 12, "GPU": 1, "accelerator_type:A100": 1})
    namespace = ray._raylet.GCS_AUTOSCALER_STATE_NAMESPACE.encode()
    key = ray._raylet.GCS_AUTOSCALER_CLUSTER_CONFIG_KEY.encode()
    _internal_kv_put(key, config.SerializeToString(), namespace=namespace)
    try:
        backend = Backend("ray", cluster.address)
        backend.check_resources("train/gpu", ResourceConfig(gpu=1, accelerator_type="a100"))
        with pytest.raises(ValueError, match=r"'train/h100' can never run.*node type gpu_worker: "):
            backend.check_resources("train/h100", ResourceConfig(gpu=1, accelerator_type="H100"))
    finally:
        _internal_kv_del(key, namespace=namespace)


def test_launcher_config_node_types_count_at_plan_time(cluster, monkeypatch):
    from marin.execution.backends import Backend

    monkeypatch.setenv("MARIN_AUTOSCALING_CONFIG", os.path.join(REPO, "infra", "marin-cluster-gcp.yaml"))
    backend = Backend("ray", cluster.address)
    backend.check_resources("train/tpu", ResourceConfig(tpu=4, accelerator_type="TPU-V4"))
    with pytest.raises(ValueError, match=r"'train/v5' can never run.*node type tpu_worker: "):
        backend.check_resources("train/v5", ResourceConfig(tpu=4, accelerator_type="TPU-V5P"))


def test_shards_spread_over_nodes_with_the_same_bytes_as_a_local_pool(cluster, tmp_path):
    local_out = tmp_path / "local" / "out"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    subprocess.run(
        [sys.executable, "-m", "tests.cluster_steps", str(local_out), "6", "50"], cwd=REPO, env=env, check=True
    )
    assert {line["node"] for line in read_lines(str(tmp_path / "local" / "out" / "shard_nodes.jsonl"))} == {None}

    from marin.execution import ExecutorStep

    step = ExecutorStep(name="sharded", fn=sharded_step_fn, config=ShardedConfig(shards=6, docs_per_shard=50))
    out = run(str(tmp_path / "prefix"), [step], cluster, "sharded")[step]
    nodes = {line["node"] for line in read_lines(os.path.join(out, "shard_nodes.jsonl"))}
    assert len(nodes) >= 2, f"all shards ran on one node: {nodes}"
    for name in ["index.json", *(f"shards/shard-{i:05d}.jsonl" for i in range(6))]:
        assert (local_out / name).read_bytes() == open(os.path.join(out, name), "rb").read(), name


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Six shards of English documents that pass the filters, and a tokenizer trained on them."""
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(3)
    for s in range(6):
        docs = [doc(f"d{s}-{i}", english_doc(rng, rng.randint(60, 160))) for i in range(20)]
        write_doc_shard(root / "docs" / f"part-{s:05d}.jsonl.gz", docs)
    train_tokenizer(TrainTokenizerConfig(input_path=str(root / "docs"), output_path=str(root / "tok"), vocab_size=300))
    return str(root / "docs"), str(root / "tok")


def _stable(manifest: dict) -> list[tuple]:
    """A manifest's files with their hashes, a volatile file (a shard ledger) by its path only."""
    return [(f["path"], None if f.get("volatile") else f["sha256"]) for f in manifest["files"]]


def _ledgers(folder: str) -> dict[int, dict]:
    ledgers = {}
    for path in glob.glob(os.path.join(folder, "part-*[0-9].json")):
        with open(path) as f:
            ledger = json.load(f)
        ledgers[ledger["shard"]] = ledger
    return ledgers


def test_data_steps_fan_shards_out_over_the_nodes_with_the_bytes_of_a_local_run(cluster, corpus, tmp_path):
    """The local run is this process's own (a driver that called ray.init but runs the step itself keeps
    its shards local; the ledgers say node null)."""
    docs, tok = corpus
    steps = data_steps(docs, tok)
    local = Executor(str(tmp_path / "local"), backend="local", experiment_name="data").run(steps)
    assert {
        ledger["ran"]["node"] for ledger in _ledgers(os.path.join(local[steps[0]], LEDGERS, "filter")).values()
    } == {None}
    paths = run(str(tmp_path / "prefix"), steps, cluster, "data")
    for step in steps:
        rel = os.path.relpath(paths[step], tmp_path / "prefix")
        assert _stable(compute_manifest(paths[step])) == _stable(compute_manifest(str(tmp_path / "local" / rel))), rel
    ledgers = _ledgers(os.path.join(paths[steps[0]], LEDGERS, "filter"))
    nodes = {cluster.name_of(ledger["ran"]["node"]) for ledger in ledgers.values()}
    assert sorted(ledgers) == list(range(6)) and len(nodes) >= 2, nodes
    assert os.path.exists(os.path.join(paths[steps[1]], "train", "shard_ledger.json"))


def test_marin_submit_runs_hello_world_on_the_cluster(cluster, tmp_path):
    prefix = str(tmp_path / "hello")
    cmd = [sys.executable, "-m", "marin.cli", "submit", "--address", cluster.dashboard, "--wait", "--"]
    cmd += ["python", "experiments/tutorial/hello_world.py", "--prefix", prefix]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ray job logs --follow raysubmit_" in proc.stdout
    assert f"--address {cluster.dashboard}" in proc.stdout
    assert "2 steps: 2 SUCCESS" in proc.stdout
    (stats_dir,) = [d for d in os.listdir(os.path.join(prefix, "hello")) if d.startswith("stats-")]
    with open(os.path.join(prefix, "hello", stats_dir, "stats.json")) as f:
        assert json.load(f)["documents"] == 1000
    with open(os.path.join(prefix, "hello", stats_dir, ".executor_status")) as f:
        assert f.read().strip() == "SUCCESS"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    (record,) = [n for n in os.listdir(os.path.join(prefix, "experiments")) if n.endswith(".json")]
    with open(os.path.join(prefix, "experiments", record)) as f:
        assert json.load(f)["git"]["commit"] == head  # the upload has no .git: submit carried the state


def test_submit_names_a_missing_script_and_warns_about_a_relative_prefix(tmp_path):
    with pytest.raises(ValueError, match=r"experiments/nope\.py is not a file under the project root"):
        build_job(["python", "experiments/nope.py"])
    with pytest.raises(ValueError, match="no command given"):
        build_job([])
    job = build_job(["python", "experiments/tutorial/hello_world.py", "--prefix", "gs://b/p"])
    assert job["entrypoint"] == "python experiments/tutorial/hello_world.py --prefix gs://b/p"
    assert job["runtime_env"]["working_dir"] == REPO and ".venv" in job["runtime_env"]["excludes"]
    assert len(job["metadata"]["marin_uv_lock_sha256"]) == 64
    assert prefix_warning(["python", "x.py", "--prefix", "gs://b/p"], {}) is None
    assert "relative" in prefix_warning(["python", "x.py", "--prefix=scratch/lab"], {})
    assert "local_store" in prefix_warning(["python", "x.py"], {})


def test_submit_to_an_unreachable_dashboard_fails_naming_the_address(capsys):
    from tests.ray_nodes import free_port

    address = f"http://127.0.0.1:{free_port()}"
    assert submit_main(address, ["python", "experiments/tutorial/hello_world.py", "--prefix", "/tmp/x"]) == 2
    assert f"cannot reach the Ray dashboard at {address}" in capsys.readouterr().err


def test_killed_driver_rerun_adopts_finished_steps_and_takes_over_the_rest(cluster, tmp_path):
    prefix, inv = str(tmp_path / "prefix"), str(tmp_path / "inv.jsonl")
    code = f"from tests.cluster_steps import drive_chain; drive_chain({prefix!r}, {cluster.address!r}, {inv!r}, 60.0)"
    driver = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 90
        while not any(line["tag"] == "second" for line in read_lines(inv)):
            assert driver.poll() is None and time.monotonic() < deadline, "the driver never started the second step"
            time.sleep(0.2)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    first, second = chain_steps(inv, slow_s=0.1)
    ex = Executor(prefix, backend="ray", ray_address=cluster.address, experiment_name="chain")
    paths = ex.run([second])
    assert paths.statuses() == {
        "chain/first": "SKIPPED",
        "chain/second": "SUCCESS",
    }
    assert [line["tag"] for line in read_lines(inv)] == ["first", "second", "second"]
    with open(os.path.join(paths[second], "value.txt")) as f:
        assert f.read() == "first\nsecond\n"


def test_node_killed_mid_step_is_retried_elsewhere_and_output_written_once(cluster, tmp_path):
    """Runs last: the node it kills stays dead."""
    inv = str(tmp_path / "inv.jsonl")
    step = probe_step("survivor", inv, sleep_s=4.0, resources=ResourceConfig(cpu=0, custom={"pool": 1}))
    result: dict = {}

    import threading

    def drive():
        try:
            result["paths"] = run(str(tmp_path / "prefix"), [step], cluster, "survivor")
        except ExecutorRunError as exc:
            result["error"] = exc

    thread = threading.Thread(target=drive)
    thread.start()
    deadline = time.monotonic() + 60
    while not read_lines(inv):
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.1)
    victim = cluster.name_of(read_lines(inv)[0]["node"])
    killed_at = time.time()
    os.kill(cluster.raylet_pid(victim), signal.SIGKILL)
    thread.join(timeout=120)
    assert not thread.is_alive() and "error" not in result, result
    attempts = read_lines(inv)
    assert len(attempts) == 2
    survivor = cluster.name_of(attempts[1]["node"])
    assert {victim, survivor} == {"worker_a", "worker_b"}
    print(f"retry started {attempts[1]['t'] - killed_at:.1f} s after the raylet was killed (lease timeout 3 s)")
    out = result["paths"][step]
    with open(os.path.join(out, ".executor_status")) as f:
        assert f.read().strip() == "SUCCESS"
    with open(os.path.join(out, "where.json")) as f:
        assert json.load(f)["pid"] == attempts[1]["pid"]
    with open(os.path.join(out, ".executor_manifest.json")) as f:
        assert json.load(f) == compute_manifest(out)
    assert sorted(os.listdir(os.path.join(out, ".executor_logs"))) == ["001.log", "002.log"]


def test_a_node_killed_under_a_sharded_step_loses_only_its_shards_which_run_once_elsewhere(cluster, tmp_path):
    """Runs after the step-level kill: it kills a worker node (one still alive) while it runs a shard."""
    import threading

    import ray

    from marin.execution import ExecutorStep

    config = ShardedConfig(shards=6, docs_per_shard=50, sleep_s=3.0)
    step = ExecutorStep(
        name="sharded-kill", fn=sharded_step_fn, config=config, resources=ResourceConfig(cpu=0, custom={"head": 1})
    )
    prefix = str(tmp_path / "prefix")
    result: dict = {}

    def drive():
        try:
            result["paths"] = run(prefix, [step], cluster, "sharded-kill")
        except ExecutorRunError as exc:
            result["error"] = exc

    def starts() -> list[dict]:
        found = glob.glob(os.path.join(prefix, "**", "shard_starts.jsonl"), recursive=True, include_hidden=True)
        return [line for path in found for line in read_lines(path)]

    workers = {n["NodeID"] for n in ray.nodes() if n["Alive"]} - {cluster.nodes["head"].node_id}
    thread = threading.Thread(target=drive)
    thread.start()
    deadline = time.monotonic() + 90
    while not (on_worker := [s for s in starts() if s["node"] in workers]):
        assert time.monotonic() < deadline and thread.is_alive(), f"no shard started on a worker node: {result}"
        time.sleep(0.1)
    victim, lost = on_worker[0]["node"], on_worker[0]["shard"]
    os.kill(cluster.raylet_pid(cluster.name_of(victim)), signal.SIGKILL)
    thread.join(timeout=180)
    assert not thread.is_alive() and "error" not in result, result

    out = result["paths"][step]
    ledgers = _ledgers(os.path.join(out, LEDGERS, "sharded"))
    assert sorted(ledgers) == list(range(6))
    assert ledgers[lost]["ran"]["node"] != victim and ledgers[lost]["ran"]["attempt"] >= 2, ledgers[lost]
    assert len({s["node"] for s in starts()}) >= 2
    assert sorted(n for n in os.listdir(os.path.join(out, "shards")) if not n.startswith(".")) == [
        f"shard-{i:05d}.jsonl" for i in range(6)
    ]
    finished = [line["shard"] for line in read_lines(os.path.join(out, "shard_nodes.jsonl"))]
    assert sorted(finished) == list(range(6)), f"a shard was written twice or never: {finished}"
    clean = tmp_path / "clean"
    expected = [
        write_shard(ShardedConfig(shards=6, docs_per_shard=50, sleep_s=0, output_path=str(clean)), i) for i in range(6)
    ]
    with open(os.path.join(out, "index.json")) as f:
        assert json.load(f) == expected
    for i in range(6):
        name = f"shards/shard-{i:05d}.jsonl"
        assert (clean / name).read_bytes() == open(os.path.join(out, name), "rb").read(), name
