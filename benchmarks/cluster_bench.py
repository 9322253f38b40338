"""Cluster benchmark: what a node death costs a running step, on a real three-node Ray cluster.

    PYTHONPATH=. .venv/bin/python benchmarks/cluster_bench.py [--lease-timeouts 3 60] [--workdir DIR]

Starts a head and two workers on 127.0.0.1 (as tests/test_cluster.py does) and prints how long that
took, then for each lease timeout: starts a 4 s step on a worker, SIGKILLs that worker's raylet, and
prints when the retry started on the other worker (Ray's node-death detection, then the wait for the
dead attempt's lease to go stale) and when the step finished. The worker is started again between
rounds. Expect roughly detection (a few to ~15 s) + the lease timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from marin.execution import Executor, ResourceConfig  # noqa: E402
from tests.cluster_steps import probe_step, read_lines  # noqa: E402
from tests.ray_nodes import LocalRayCluster  # noqa: E402

WORKERS = {"worker_a": {"worker_a": 1, "pool": 1}, "worker_b": {"worker_b": 1, "pool": 1}}


def one_round(cluster: LocalRayCluster, workdir: str, lease_timeout: float) -> None:
    os.environ["MARIN_LEASE_TIMEOUT_S"] = str(lease_timeout)
    os.environ["MARIN_LEASE_HEARTBEAT_S"] = str(max(0.5, lease_timeout / 6))
    inv = os.path.join(workdir, f"inv-{lease_timeout}.jsonl")
    step = probe_step(f"bench-{lease_timeout}", inv, sleep_s=4.0, resources=ResourceConfig(cpu=0, custom={"pool": 1}))
    done: dict = {}
    ex = Executor(os.path.join(workdir, "prefix"), backend="ray", ray_address=cluster.address, experiment_name="bench")
    thread = threading.Thread(target=lambda: done.update(paths=ex.run([step]), t=time.time()))
    thread.start()
    while not read_lines(inv):
        time.sleep(0.05)
    victim = cluster.name_of(read_lines(inv)[0]["node"])
    killed = time.time()
    os.kill(cluster.raylet_pid(victim), signal.SIGKILL)
    thread.join()
    retry = read_lines(inv)[1]
    print(
        f"lease timeout {lease_timeout:>4.0f} s: retry started {retry['t'] - killed:5.1f} s after the kill "
        f"on {cluster.name_of(retry['node'])}; step done {done['t'] - killed:5.1f} s after the kill"
    )
    cluster.nodes.pop(victim)
    cluster.start_workers({victim: WORKERS[victim]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lease-timeouts", type=float, nargs="+", default=[3.0, 60.0])
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    import ray

    workdir = args.workdir or tempfile.mkdtemp(prefix="marin-cluster-bench-")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("MARIN_")}
    env.update(RAY_AUTH_MODE="disabled", PYTHONPATH=str(REPO), PATH=f"{Path(sys.executable).parent}:{env['PATH']}")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    cluster = LocalRayCluster(os.path.join(workdir, "ray"), env)
    try:
        t0 = time.time()
        cluster.start_head({"head": 1})
        cluster.start_workers(WORKERS)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes(ray)
        print(f"three-node cluster up in {time.time() - t0:.1f} s (head with dashboard, two workers)")
        for timeout in args.lease_timeouts:
            cluster.wait_for_nodes(ray)
            one_round(cluster, workdir, timeout)
    finally:
        ray.shutdown()
        cluster.stop()


if __name__ == "__main__":
    main()
