"""Preempting a gang: what killing one host of a 2-host training costs, with the step folder on a bucket.

    PYTHONPATH=. .venv/bin/python benchmarks/gang_preemption.py [--kill-after 8] [--workdir DIR]

Starts the GCS emulator and a 2-node Ray cluster on 127.0.0.1 (as tests/test_gang.py does), then trains
the gang step of tests/gang_steps.py (2 hosts x 2 forced CPU devices, 40 steps, a checkpoint every 4)
twice into gs:// prefixes: once uninterrupted, once with host 1's process killed -9 as soon as the
checkpoint of step `--kill-after` is complete. Prints, for the killed run:

- work lost: the last step in metrics.jsonl at the kill minus the checkpoint it resumed from (steps
  trained again), and the wall time since that checkpoint was written;
- time to resume: from the kill to the runner noticing the death, to the new gang's hosts being ready,
  and to the first step of the new gang in metrics.jsonl (restore, compile, one step);
- whether every reproducible file (checkpoints, HF export) is byte-identical to the uninterrupted run's,
  and both runs' wall times.

metrics.jsonl is flushed to the bucket at every step here (MARIN_METRICS_FLUSH_S=0) so that the step
reached at the kill can be read; the hosts share a jax compilation cache (as the test does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from marin.execution import Executor  # noqa: E402
from marin.storage import read_bytes  # noqa: E402
from marin.training.checkpoints import list_checkpoints  # noqa: E402
from tests.emulators import clear_storage_caches, start_gcs  # noqa: E402
from tests.gang_steps import gang_step, metric_steps, reproducible_files  # noqa: E402
from tests.ray_nodes import LocalRayCluster  # noqa: E402
from tests.training_fixtures import corpus  # noqa: E402

LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def log_time(log: str, marker: str) -> float | None:
    for line in log.splitlines():
        match = LOG_TIME.match(line)
        if match and marker in line:
            return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def run(cluster, data: str, prefix: str, cache: str, kill_after: int | None) -> dict:
    step = gang_step(data, compile_cache=cache)
    executor = Executor(prefix, backend="ray", ray_address=cluster.address, experiment_name="gang_bench")
    (out,) = executor.plan([step]).values()
    seen: dict = {}

    def watch():
        from ray.util.state import list_actors

        while "done" not in seen:
            clear_storage_caches()
            if "killed" not in seen and kill_after is not None:
                done = [s for s, _ in list_checkpoints(out)]
                if done and done[-1] >= kill_after:
                    (host1,) = [
                        a
                        for a in list_actors(address=cluster.address, filters=[("state", "=", "ALIVE")])
                        if (a.name or "").endswith("-host1")
                    ]
                    os.kill(host1.pid, signal.SIGKILL)
                    seen["killed"] = time.time()
                    clear_storage_caches()
                    seen["steps_at_kill"] = metric_steps(out)
                    seen["complete_at_kill"] = [s for s, _ in list_checkpoints(out)]
                    seen["checkpoint_written"] = _metadata_time(list_checkpoints(out)[-1][1])
            elif "killed" in seen and "resumed" not in seen:
                if metric_steps(out) != seen["steps_at_kill"]:
                    seen["resumed"] = time.time()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    t0 = time.time()
    watcher.start()
    executor.run([step])
    seen["wall_s"] = time.time() - t0
    seen["done"] = True
    watcher.join()
    seen["out"] = out
    return seen


def _metadata_time(checkpoint: str) -> float:
    meta = json.loads(read_bytes(f"{checkpoint}/metadata.json"))
    return datetime.fromisoformat(meta["timestamp"]).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kill-after", type=int, default=8, help="kill host 1 once this checkpoint is complete")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="marin-gang-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.update(RAY_AUTH_MODE="disabled", MARIN_METRICS_FLUSH_S="0")
    gcs = start_gcs(workdir)
    os.environ.update(gcs.env(), TENSORSTORE_GCS_HTTP_URL=gcs.url, GCE_METADATA_ROOT="127.0.0.1:1")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("MARIN_")}
    env.update(PYTHONPATH=str(REPO), PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    cluster = LocalRayCluster(str(workdir / "ray"), env)
    import ray

    try:
        cluster.start_head({"head": 1})
        cluster.start_workers({"worker": {"worker": 1}})
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes(ray)
        data = str(corpus(workdir / "corpus")["plays_a"])
        cache = str(workdir / "jax-cache")
        bucket = f"gs://{gcs.bucket}/bench-{uuid.uuid4().hex[:8]}"
        plain = run(cluster, data, f"{bucket}/uninterrupted", cache, None)
        print(f"uninterrupted gang run: {plain['wall_s']:.1f} s")
        killed = run(cluster, data, f"{bucket}/preempted", cache, args.kill_after)
        out = killed["out"]
        log = (read_bytes(f"{out}/.executor_logs/001.log") or b"").decode()
        host0 = (read_bytes(f"{out}/.executor_logs/001.launch2-host0.log") or b"").decode()
        resumed_from = int(re.search(r"resuming from \S+/checkpoints/step-(\d+)", host0).group(1))
        reached = max(killed["steps_at_kill"], default=-1)
        t_kill = killed["killed"]
        same = reproducible_files(out) == reproducible_files(plain["out"])
        print(f"preempted gang run: {killed['wall_s']:.1f} s (host 1 killed after checkpoint {args.kill_after})")
        print(f"  complete checkpoints at the kill: {killed['complete_at_kill']}; resumed from step {resumed_from}")
        print(
            f"  work lost: metrics.jsonl had reached step {reached}: {reached - resumed_from} step(s) trained again; "
            f"{t_kill - killed['checkpoint_written']:.1f} s since that checkpoint was written"
        )
        died, ready = log_time(log, "died"), log_time(log, "gang launch 2: 2 hosts ready")
        print(
            f"  time to resume: death noticed {died - t_kill:.1f} s after the kill, new gang ready "
            f"{ready - t_kill:.1f} s, first new step in metrics.jsonl {killed['resumed'] - t_kill:.1f} s"
        )
        print(f"  checkpoints and HF export byte-identical to the uninterrupted run's: {same}")
    finally:
        ray.shutdown()
        cluster.stop()
        gcs.stop()


if __name__ == "__main__":
    main()
