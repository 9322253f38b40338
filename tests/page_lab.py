"""A prefix for the page-layout tests, made by the real executor with tiny step functions (no training).

`page_lab(root)` runs one experiment name, "mix", twice with `Executor(root, backend="local")`:

1. version 1: `data/shards` writes `SHARDS` files (so its manifest has that many rows), `train/mix` writes
   `metrics.jsonl` as marin's train step does (`loss`, `lr`, `tokens`, `tokens_per_second`, and on
   evaluation steps `eval_loss`/`eval_bpb` plus `eval_<set>_loss`/`eval_<set>_bpb` for two validation
   sets), `train_info.json` (parameters, device kind and count) and its config holds a data mixture
   (`data` and `weights`, as marin's TrainConfig); `eval/mix` writes `results.json` with the two sets.
2. version 2: the same DAG at another learning rate and other mixture weights (a second record of the
   name, so the experiment list must tell the two apart by what differs).

The step functions write the files the real steps write, with the same names and fields.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, output_path_of, versioned
from marin.stepkit.config import unversioned

SHARDS = 100
SETS = ("web", "code")


@dataclass(frozen=True)
class ShardsConfig:
    shards: int
    """Files to write."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class MixTrainConfig:
    data: dict[str, str]
    """The datasets the run reads, by name (only recorded)."""
    weights: dict[str, float]
    """Sampling weight of each dataset, as marin's TrainConfig names it."""
    lr: float
    """Learning rate (shapes the loss curve)."""
    steps: int = unversioned(60)
    """Rows of metrics.jsonl."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class MixEvalConfig:
    train: str
    """The train step's folder."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def write_shards(config: ShardsConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    for i in range(config.shards):
        with open(f"{config.output_path}/shard-{i:05d}.jsonl", "w") as f:
            f.write(json.dumps({"id": i, "text": f"document {i}"}) + "\n")


def final_loss(lr: float, offset: float) -> float:
    return 3.2 + offset + abs(lr - 3e-3) * 40


def train_mix(config: MixTrainConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    final = final_loss(config.lr, 0.0)
    with open(f"{config.output_path}/metrics.jsonl", "w") as f:
        for step in range(config.steps):
            loss = final + 4.0 / (1 + step)
            row = {"step": step, "loss": round(loss, 6), "lr": config.lr, "tokens": 4096 * (step + 1)}
            row["tokens_per_second"] = 9000.0 + (step % 7) * 40
            if step % 10 == 9:
                row["eval_loss"], row["eval_bpb"] = round(loss + 0.05, 6), round((loss + 0.05) / 1.4, 6)
                for k, name in enumerate(SETS):
                    # the two sets end within a hair of each other: their final points overlap
                    row[f"eval_{name}_loss"] = round(loss + 0.08 + 0.002 * k, 6)
                    row[f"eval_{name}_bpb"] = round((loss + 0.08 + 0.002 * k) / 1.4, 6)
            f.write(json.dumps(row) + "\n")
    info = {"parameter_count": 3_000_000, "tokens": 4096 * config.steps, "device_kind": "cpu", "device_count": 1}
    with open(f"{config.output_path}/train_info.json", "w") as f:
        json.dump(info, f)


def evaluate_mix(config: MixEvalConfig) -> None:
    with open(f"{config.train}/metrics.jsonl") as f:
        last = [json.loads(line) for line in f][-1]
    datasets = {
        name: {"loss": last["loss"] + 0.1 * k, "bpb": (last["loss"] + 0.1 * k) / 1.4} for k, name in enumerate(SETS)
    }
    results = {
        "checkpoint": "../checkpoints/step-59",
        "step": 59,
        "datasets": datasets,
        "macro_loss": sum(d["loss"] for d in datasets.values()) / len(datasets),
        "macro_bpb": sum(d["bpb"] for d in datasets.values()) / len(datasets),
    }
    os.makedirs(config.output_path, exist_ok=True)
    with open(f"{config.output_path}/results.json", "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)


def mix_steps(lr: float, weights: dict[str, float]) -> tuple[ExecutorStep, ExecutorStep, ExecutorStep]:
    shards = ExecutorStep("data/shards", write_shards, ShardsConfig(shards=versioned(SHARDS)))
    data = {name: output_path_of(shards) for name in SETS}
    train = ExecutorStep(
        "train/mix", train_mix, MixTrainConfig(data=data, weights=versioned(weights), lr=versioned(lr))
    )
    evaluation = ExecutorStep("eval/mix", evaluate_mix, MixEvalConfig(train=output_path_of(train)))
    return shards, train, evaluation


VERSIONS = ((3e-3, {"web": 0.7, "code": 0.3}), (1e-2, {"web": 0.5, "code": 0.5}))


@contextlib.contextmanager
def page_lab(root: Path):
    """Build the prefix; yields the records' and steps' paths relative to `root`."""
    names: dict[str, list[str]] = {"records": [], "shards": [], "train": [], "eval": []}
    with contextlib.redirect_stdout(io.StringIO()):
        for lr, weights in VERSIONS:
            shards, train, evaluation = mix_steps(lr, weights)
            ex = Executor(str(root), backend="local", experiment_name="mix", script="tests/page_lab.py")
            result = ex.run([evaluation])
            names["records"].append(os.path.relpath(result.record_path, root))
            for key, step in (("shards", shards), ("train", train), ("eval", evaluation)):
                names[key].append(os.path.relpath(result[step], root))
    yield names
