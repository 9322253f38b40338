"""Steps and shard functions for the multi-node tests; importable by every Ray worker (PYTHONPATH)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, ResourceConfig, versioned
from marin.stepkit.sharding import LEDGERS, run_shards


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:
        return None


def append_line(path: str, record: dict) -> None:
    """One O_APPEND write per line, so concurrent writers on this machine never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def read_lines(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class ProbeConfig:
    tag: str
    """Part of the hash, so each test gets its own step."""
    invocations: str
    """An append-only file: one line per call of the step function (not part of the hash)."""
    sleep_s: float = 0.0
    """How long the step sleeps after announcing itself (not part of the hash)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def probe(config: ProbeConfig) -> None:
    """Records where it runs (node id, pid), sleeps, then writes `where.json`."""
    where = {"tag": config.tag, "node": _node_id(), "pid": os.getpid(), "t": time.time()}
    append_line(config.invocations, where)
    time.sleep(config.sleep_s)
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "where.json"), "w") as f:
        json.dump(where, f, sort_keys=True)


def probe_step(tag: str, invocations: str, sleep_s: float = 0.0, resources: ResourceConfig | None = None):
    config = ProbeConfig(tag=versioned(tag), invocations=invocations, sleep_s=sleep_s)
    return ExecutorStep(name=f"probe/{tag}", fn=probe, config=config, resources=resources)


@dataclass(frozen=True)
class ChainConfig:
    tag: str
    """Part of the hash."""
    invocations: str
    """An append-only file: one line per call (not part of the hash)."""
    input_path: str | None = None
    """The previous step's output (a dependency), or None."""
    sleep_s: float = 0.0
    """How long the step sleeps (not part of the hash)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def chain_link(config: ChainConfig) -> None:
    """Appends an invocation line, sleeps, and writes `value.txt` (its input's value plus its tag)."""
    append_line(config.invocations, {"tag": config.tag, "node": _node_id(), "pid": os.getpid(), "t": time.time()})
    time.sleep(config.sleep_s)
    before = ""
    if config.input_path:
        with open(os.path.join(config.input_path, "value.txt")) as f:
            before = f.read()
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "value.txt"), "w") as f:
        f.write(before + config.tag + "\n")


def chain_steps(invocations: str, slow_s: float) -> list[ExecutorStep]:
    """first -> second (sleeps `slow_s`): the driver-kill experiment."""
    from marin.execution import output_path_of

    first = ExecutorStep(
        name="chain/first", fn=chain_link, config=ChainConfig(tag=versioned("first"), invocations=invocations)
    )
    second = ExecutorStep(
        name="chain/second",
        fn=chain_link,
        config=ChainConfig(
            tag=versioned("second"), invocations=invocations, input_path=output_path_of(first), sleep_s=slow_s
        ),
    )
    return [first, second]


def drive_chain(prefix: str, address: str, invocations: str, slow_s: float) -> None:
    """The driver process of the driver-kill test (killed with SIGKILL while `second` runs)."""
    Executor(prefix, backend="ray", ray_address=address, experiment_name="chain").run(chain_steps(invocations, slow_s))


@dataclass(frozen=True)
class ShardedConfig:
    shards: int
    """How many shards to write."""
    docs_per_shard: int
    """Documents per shard."""
    sleep_s: float = 0.3
    """How long each shard sleeps after writing (not part of the output)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def write_shard(config: ShardedConfig, index: int) -> dict:
    """Writes `shards/shard-<i>.jsonl` (deterministic content), logs where it ran; returns the file's sha256."""
    out_dir = os.path.join(config.output_path, "shards")
    os.makedirs(out_dir, exist_ok=True)
    append_line(os.path.join(config.output_path, "shard_starts.jsonl"), {"shard": index, "node": _node_id()})
    lines = [
        json.dumps({"id": f"{index}-{j}", "text": " ".join(f"w{(index * 31 + j * k) % 97}" for k in range(j % 7 + 1))})
        for j in range(config.docs_per_shard)
    ]
    data = ("\n".join(lines) + "\n").encode()
    time.sleep(config.sleep_s)
    tmp = os.path.join(out_dir, f".shard-{index:05d}.jsonl.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(out_dir, f"shard-{index:05d}.jsonl"))
    append_line(os.path.join(config.output_path, "shard_nodes.jsonl"), {"shard": index, "node": _node_id()})
    return {"shard": index, "sha256": hashlib.sha256(data).hexdigest()}


def sharded_step_fn(config: ShardedConfig) -> None:
    """A data step that fans its shards out with `run_shards`, then writes an index in shard order."""
    ledgers = os.path.join(config.output_path, LEDGERS, "sharded")
    results = run_shards(write_shard, config, range(config.shards), desc="sharded", ledger_dir=ledgers)
    with open(os.path.join(config.output_path, "index.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def data_steps(docs: str, tokenizer: str) -> list[ExecutorStep]:
    """filter -> tokenize of the documents in `docs`, as an experiment writes them."""
    from experiments.defaults import default_filter, default_tokenize

    filtered = default_filter("cluster-data", docs)
    return [filtered, default_tokenize("cluster-data", filtered, tokenizer, validation_fraction=0.2)]


if __name__ == "__main__":
    # The no-Ray baseline of the sharding test: `python -m tests.cluster_steps OUT SHARDS DOCS`.
    out, shards, docs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sharded_step_fn(ShardedConfig(shards=shards, docs_per_shard=docs, output_path=out))
