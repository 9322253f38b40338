"""A real multi-node Ray cluster on 127.0.0.1 for tests: one `ray start --block` process per node.

Each node is its own `ray start` (head with the dashboard, for job submission; workers joining it)
with its own short temp dir under /tmp and its own ports, in its own session. Stopping kills
only processes this cluster started (its `ray start` trees, and anything naming its root), never
another Ray instance on the machine: no `ray stop`. On two busy cores a raylet can miss `ray start`'s
fixed 30 s registration window; a node that exits during start-up is started again.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

from marin.execution.backends import kill_processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAY = os.path.join(os.path.dirname(sys.executable), "ray")
OBJECT_STORE_BYTES = 100_000_000
STARTED = "Ray runtime started"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str
    resources: dict[str, float]
    proc: subprocess.Popen
    log: str
    temp: str
    node_id: str | None = None


class LocalRayCluster:
    """A head and workers started with `ray start`; `address` for drivers, `dashboard` for jobs."""

    def __init__(self, root: str, env: dict[str, str], start_attempts: int = 5):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.env = env
        self.start_attempts = start_attempts
        self.nodes: dict[str, Node] = {}
        # Ray's AF_UNIX socket paths live under each temp dir and may not exceed 107 bytes: keep it short,
        # and give every start its own (a second start in one dir gets longer socket names).
        self.temp_root = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
        self._temp_ids = itertools.count()
        self._new_ports()

    def _new_ports(self) -> None:
        self.port = free_port()
        self.dashboard_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"

    def _spawn(self, name: str, resources: dict[str, float], args: list[str]) -> tuple[Node, int]:
        temp = os.path.join(self.temp_root, f"n{next(self._temp_ids):02d}")
        os.makedirs(temp)
        log = os.path.join(self.root, f"{name}.log")
        cmd = [
            RAY,
            "start",
            "--block",
            "--disable-usage-stats",
            "--include-log-monitor=false",
            "--num-cpus=1",
            f"--resources={json.dumps(resources)}",
            f"--temp-dir={temp}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--dashboard-agent-listen-port={free_port()}",
            *args,
        ]
        with open(log, "a") as out:
            out.write(f"\n=== {' '.join(cmd)}\n")
            out.flush()
            start = out.tell()
            proc = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        node = Node(name, resources, proc, log, temp)
        self.nodes[name] = node
        return node, start

    def _await(self, node: Node, start: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open(node.log) as f:
                f.seek(start)
                if STARTED in f.read():
                    return
            if node.proc.poll() is not None:
                self._kill([node])
                raise NodeExited(f"ray node {node.name} exited during start-up; see {node.log}")
            time.sleep(0.5)
        raise TimeoutError(f"ray node {node.name} did not start within 120 s; see {node.log}")

    def _start(self, specs: dict[str, tuple[dict[str, float], object]]) -> None:
        """Starts nodes together ({name: (resources, args())}); one that fails is started again alone."""
        spawned = {name: self._spawn(name, res, args()) for name, (res, args) in specs.items()}
        for name, (node, start) in spawned.items():
            for attempt in range(1, self.start_attempts + 1):
                try:
                    self._await(node, start)
                    break
                except NodeExited:
                    if attempt == self.start_attempts:
                        raise
                    res, args = specs[name]
                    node, start = self._spawn(name, res, args())

    def start_head(self, resources: dict[str, float]) -> None:
        def args():
            self._new_ports()
            return [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
                f"--ray-client-server-port={free_port()}",
            ]

        self._start({"head": (resources, args)})
        self._wait(lambda: _http_ok(f"{self.dashboard}/api/version"), 90, "the head's dashboard")

    def start_workers(self, workers: dict[str, dict[str, float]]) -> None:
        """Starts workers ({name: resources}) that join the head, all at once."""
        self._start({name: (res, lambda: [f"--address={self.address}"]) for name, res in workers.items()})

    def wait_for_nodes(self, ray) -> None:
        """Waits until every started node is alive in the cluster and records its node id."""

        def ready():
            alive = [n for n in ray.nodes() if n["Alive"]]
            for node in self.nodes.values():
                key = next(iter(node.resources))
                match = [n for n in alive if n["Resources"].get(key)]
                if not match:
                    return False
                node.node_id = match[0]["NodeID"]
            return True

        self._wait(ready, 90, "all nodes to join")

    def _wait(self, check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [n.name for n in self.nodes.values() if n.proc.poll() is not None]
            if dead:
                raise NodeExited(f"ray node(s) {dead} exited while waiting for {what}; see {self.root}/*.log")
            if check():
                return
            time.sleep(0.5)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; see {self.root}/*.log")

    def name_of(self, node_id: str) -> str:
        return next(n.name for n in self.nodes.values() if n.node_id == node_id)

    def raylet_pid(self, name: str) -> int:
        import psutil

        children = psutil.Process(self.nodes[name].proc.pid).children()
        return next(c.pid for c in children if c.name() == "raylet")

    def _kill(self, nodes: list[Node]) -> None:
        import psutil

        procs = []
        for node in nodes:
            try:
                root = psutil.Process(node.proc.pid)
                procs += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        temps = [n.temp for n in nodes]
        for p in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(p.info["cmdline"] or [])
            if any(t in cmdline for t in temps) and p not in procs:
                procs.append(p)
        kill_processes(procs)
        for node in nodes:
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """Kills every process of this cluster, and only those, and removes its temp dirs."""
        self._kill(list(self.nodes.values()))
        shutil.rmtree(self.temp_root, ignore_errors=True)


class NodeExited(RuntimeError):
    """A `ray start` process ended while it should have been running."""


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False
