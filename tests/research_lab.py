"""A prefix for the research pages (leaderboard, runs table, ladder), made by the real executor.

`research_prefix(root)` runs two experiments with `Executor(root, backend="local")`:

1. "sweep": three versions of `train/rung` (lr 1e-3, 3e-3, 1e-2 at one size) and their `eval/rung`
   evaluations, so the runs table has one differing field (lr) and three evaluations.
2. "ladder": four rungs of growing size (`train/ladder` and `eval/ladder` at 1, 2, 4 and 8 M
   parameters; bpb follows a known law `bpb = 3·C^(-0.05) + 0.6` except rung 3, which is worse than rung 2
   so that the Pareto frontier leaves it out), and the real `marin.evaluation.forecast` step fitting them.

The train and eval functions are tiny and write the files the real steps write (`metrics.jsonl`,
`results.json` with `macro_bpb`, `macro_loss`, `flops`, `tokens`, `parameter_count`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from marin.evaluation.forecast import ForecastConfig, forecast
from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, output_path_of, this_output_path, versioned

TOKENS_PER_PARAM = 20


def law_bpb(flops: float) -> float:
    return 3.0 * flops ** (-0.05) + 0.6


@dataclass(frozen=True)
class RungConfig:
    parameters: int
    """Parameter count of the (pretend) model."""
    lr: float = 3e-3
    """Learning rate."""
    penalty: float = 0.0
    """Added to the law's bpb (a rung that trained badly)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class RungEvalConfig:
    train: str
    """The train step's folder."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def train_rung(config: RungConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    tokens = config.parameters * TOKENS_PER_PARAM
    steps = 40
    final = law_bpb(6 * config.parameters * tokens) * 1.2 + config.penalty + abs(config.lr - 3e-3) * 10
    with open(f"{config.output_path}/metrics.jsonl", "w") as f:
        for step in range(steps):
            loss = final + 4.0 / (1 + step)
            row = {"step": step, "loss": round(loss, 6), "lr": config.lr, "tokens": tokens * (step + 1) // steps}
            if step % 10 == 9:
                row["eval_loss"] = round(loss + 0.05, 6)
                row["eval_bpb"] = round((loss + 0.05) / 1.2, 6)
            f.write(json.dumps(row) + "\n")
    with open(f"{config.output_path}/train_info.json", "w") as f:
        json.dump({"parameter_count": config.parameters, "tokens": tokens, "final_loss": final}, f)


def evaluate_rung(config: RungEvalConfig) -> None:
    with open(f"{config.train}/train_info.json") as f:
        info = json.load(f)
    flops = 6 * info["parameter_count"] * info["tokens"]
    bpb = info["final_loss"] / 1.2
    results = {
        "checkpoint": "../checkpoints/step-39",
        "step": 39,
        "parameter_count": info["parameter_count"],
        "tokens": info["tokens"],
        "flops": flops,
        "datasets": {"heldout": {"loss": bpb * 1.2, "bpb": bpb}},
        "macro_loss": bpb * 1.2,
        "macro_bpb": bpb,
    }
    os.makedirs(config.output_path, exist_ok=True)
    with open(f"{config.output_path}/results.json", "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)


def rung(name: str, parameters: int, lr: float = 3e-3, penalty: float = 0.0) -> tuple[ExecutorStep, ExecutorStep]:
    train = ExecutorStep(
        f"train/{name}",
        train_rung,
        RungConfig(parameters=versioned(parameters), lr=versioned(lr), penalty=versioned(penalty)),
    )
    evaluation = ExecutorStep(f"eval/{name}", evaluate_rung, RungEvalConfig(train=output_path_of(train)))
    return train, evaluation


LADDER_SIZES = (1_000_000, 2_000_000, 4_000_000, 8_000_000)
SWEEP_LRS = (1e-3, 3e-3, 1e-2)


@contextlib.contextmanager
def research_prefix(root: Path):
    """Build the prefix; yields the records' and steps' relative paths."""
    quiet = io.StringIO()
    names: dict[str, object] = {}
    with contextlib.redirect_stdout(quiet):
        sweep = [rung("rung", 2_000_000, lr=lr) for lr in SWEEP_LRS]
        ex = Executor(str(root), backend="local", experiment_name="sweep", script="tests/research_lab.py")
        result = ex.run([e for _, e in sweep])
        names["sweep_record"] = os.path.relpath(result.record_path, root)
        names["sweep_train"] = [os.path.relpath(result[t], root) for t, _ in sweep]
        ladder = [rung("ladder", n) for n in LADDER_SIZES]
        fc = ExecutorStep(
            "ladder/forecast",
            forecast,
            ForecastConfig(
                evaluations=[output_path_of(e) for _, e in ladder],
                output_path=this_output_path(),
                target_flops=1e16,
                metric="bpb",
            ),
        )
        ex2 = Executor(str(root), backend="local", experiment_name="ladder", script="tests/research_lab.py")
        result2 = ex2.run([fc])
        names["ladder_record"] = os.path.relpath(result2.record_path, root)
        names["forecast"] = os.path.relpath(result2[fc], root)
        names["ladder_eval"] = [os.path.relpath(result2[e], root) for _, e in ladder]
    yield names
