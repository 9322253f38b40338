"""`marin verify` proves bytes: files are hashed again against their own manifests, and the deterministic
part of volatile training metrics (the losses, not the timings) must match."""

from __future__ import annotations

import json

from marin.storage import read_bytes, write_bytes
from tests.cli_support import REPO, marin
from tests.code_lab import record_of

HELLO = f"{REPO}/experiments/tutorial/hello_world.py"


def test_verify_names_a_file_overwritten_behind_its_manifest(prefix):
    record_a = record_of(marin("run", HELLO, "--prefix", prefix + "/A", "--backend", "local"))
    record_b = record_of(marin("run", HELLO, "--prefix", prefix + "/B", "--backend", "local"))
    stats = next(s for s in json.loads(read_bytes(record_b))["steps"] if s["name"] == "hello/stats")
    path = f"{prefix}/B/{stats['relative_output_path']}/stats.json"
    original = read_bytes(path)
    write_bytes(path, original.replace(b'"documents": 1000', b'"documents": 1001'))

    verify = marin("verify", record_a, record_b)
    assert verify.returncode == 1, verify.stdout
    assert "differs    hello/stats  B: stats.json: bytes no longer match its own manifest" in verify.stdout
    assert "first difference in topological order: hello/stats" in verify.stdout

    trusting = marin("verify", record_a, record_b, "--manifests_only")
    assert trusting.returncode == 0 and "all steps identical" in trusting.stdout
    assert "--manifests_only" in marin("verify", "--help").stdout


METRICS = '''
import json, os, time
from dataclasses import dataclass
from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, versioned
from marin.storage import write_volatile_list


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 4
    """Training steps."""
    output_path: str = THIS_OUTPUT_PATH
    """Where metrics.jsonl goes."""


def train(config):
    bump = float(os.environ.get("LOSS_BUMP", "0"))
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "metrics.jsonl"), "w") as f:
        for step in range(config.steps):
            loss = 4.0 - step * 0.5 + (bump if step >= 2 else 0.0)
            line = {"step": step, "loss": loss, "lr": 0.1, "duration_s": time.perf_counter(), "tokens_per_second": step * time.time()}
            f.write(json.dumps(line, sort_keys=True) + "\\n")
    write_volatile_list(config.output_path, ["metrics.jsonl"])


step = ExecutorStep("m/train", train, TrainConfig(steps=versioned(4)))
if __name__ == "__main__":
    executor_main(steps=[step])
'''


def test_verify_compares_the_losses_in_volatile_metrics_but_not_the_timings(tmp_path):
    script = tmp_path / "metrics_exp.py"
    script.write_text(METRICS)
    record_a = record_of(marin("run", str(script), "--prefix", str(tmp_path / "A"), "--backend", "local"))
    record_b = record_of(marin("run", str(script), "--prefix", str(tmp_path / "B"), "--backend", "local"))
    same = marin("verify", record_a, record_b)
    assert same.returncode == 0, same.stdout
    assert "1 compared without timings" in same.stdout

    env = {"LOSS_BUMP": "0.25"}
    record_c = record_of(marin("run", str(script), "--prefix", str(tmp_path / "C"), "--backend", "local", env=env))
    other = marin("verify", record_a, record_c)
    assert other.returncode == 1, other.stdout
    assert "metrics.jsonl (volatile): first differs at training step 2: loss 3.0 vs 3.25" in other.stdout


VOLATILE = '''
import json, os, time
from dataclasses import dataclass
from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, versioned
from marin.storage import write_volatile_list


@dataclass(frozen=True)
class WorkConfig:
    n: int = 3
    """How many documents."""
    output_path: str = THIS_OUTPUT_PATH
    """Where the output goes."""


def work(config):
    os.makedirs(os.path.join(config.output_path, "ledgers"), exist_ok=True)
    with open(os.path.join(config.output_path, "docs.txt"), "w") as f:
        f.write("doc\\n" * config.n)
    with open(os.path.join(config.output_path, "timing.json"), "w") as f:
        json.dump({"started": time.time_ns()}, f)
    with open(os.path.join(config.output_path, "ledgers", "shard-0.json"), "w") as f:
        json.dump({"shard": 0, "done": True}, f)
    write_volatile_list(config.output_path, ["timing.json", "ledgers/"])


step = ExecutorStep("v/work", work, WorkConfig(n=versioned(3)))
if __name__ == "__main__":
    executor_main(steps=[step])
'''


def test_verify_names_the_volatile_files_it_did_not_compare_on_request(tmp_path):
    script = tmp_path / "volatile_exp.py"
    script.write_text(VOLATILE)
    record_a = record_of(marin("run", str(script), "--prefix", str(tmp_path / "A"), "--backend", "local"))
    record_b = record_of(marin("run", str(script), "--prefix", str(tmp_path / "B"), "--backend", "local"))
    quiet = marin("verify", record_a, record_b)
    assert quiet.returncode == 0, quiet.stdout
    assert "2 volatile file(s) not compared; --show_volatile names them" in quiet.stdout
    assert "timing.json" not in quiet.stdout
    for flag in ("--show_volatile", "--show-volatile", "-v"):
        shown = marin("verify", record_a, record_b, flag)
        assert shown.returncode == 0, shown.stdout
        lines = [line.strip() for line in shown.stdout.splitlines() if "not compared (volatile)" in line]
        assert lines[0].startswith("not compared (volatile): ledgers/shard-0.json  same bytes"), shown.stdout
        assert lines[1].startswith("not compared (volatile): timing.json  bytes differ ("), shown.stdout
        assert len(lines) == 2 and "--show_volatile names them" not in shown.stdout
