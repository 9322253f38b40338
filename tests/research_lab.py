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
    tokens: int = 0
    """Tokens to train on (an isoFLOP rung: loss from the Chinchilla law); 0: 20 per parameter."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class RungEvalConfig:
    train: str
    """The train step's folder."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def chinchilla_loss(parameters: float, tokens: float) -> float:
    """Hoffmann et al.'s fitted law: the isoFLOP rungs' losses."""
    return 1.69 + 406.4 / parameters**0.34 + 410.7 / tokens**0.28


def train_rung(config: RungConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    tokens = config.tokens or config.parameters * TOKENS_PER_PARAM
    steps = 40
    if config.tokens:
        final = chinchilla_loss(config.parameters, tokens)
    else:
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


@dataclass(frozen=True)
class HarnessConfig:
    train: str
    """The train step's folder."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's folder."""


def harness_rung(config: HarnessConfig) -> None:
    """What marin's harness step writes (`metrics.json`), with a fixed score."""
    os.makedirs(config.output_path, exist_ok=True)
    tasks = {"next_line": {"metrics": {"acc": 0.625, "acc_stderr": 0.07}, "version": 1, "documents": 40}}
    with open(f"{config.output_path}/metrics.json", "w") as f:
        json.dump({"tasks": tasks, "groups": {}, "step": 39}, f)


def rung(
    name: str, parameters: int, lr: float = 3e-3, penalty: float = 0.0, tokens: int = 0
) -> tuple[ExecutorStep, ExecutorStep]:
    train = ExecutorStep(
        f"train/{name}",
        train_rung,
        RungConfig(
            parameters=versioned(parameters), lr=versioned(lr), penalty=versioned(penalty), tokens=versioned(tokens)
        ),
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
        harness = ExecutorStep("eval/harness", harness_rung, HarnessConfig(train=output_path_of(ladder[-1][0])))
        ex2 = Executor(str(root), backend="local", experiment_name="ladder", script="tests/research_lab.py")
        result2 = ex2.run([fc, harness])
        names["harness"] = os.path.relpath(result2[harness], root)
        names["ladder_record"] = os.path.relpath(result2.record_path, root)
        names["forecast"] = os.path.relpath(result2[fc], root)
        names["ladder_eval"] = [os.path.relpath(result2[e], root) for _, e in ladder]
        names.update(isoflop_experiment(root))
    yield names


ISOFLOP_BUDGETS = (1e17, 1e18, 1e19)
ISOFLOP_TARGET = 1e20


def isoflop_experiment(root: Path) -> dict:
    """Rungs of 4 sizes at 3 budgets (Chinchilla-law losses), the real isoFLOP forecast, then the target run the
    forecast sized and the real forecast check against it."""
    from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check
    from marin.evaluation.isoflop_forecast import IsoflopForecastConfig, isoflop_forecast

    rungs, budgets = [], []
    for budget in ISOFLOP_BUDGETS:
        centre = 0.09 * budget**0.5
        for factor in (0.25, 0.5, 1.0, 2.0, 4.0):
            n = int(centre * factor)
            rungs.append(rung("isoflop", n, tokens=int(budget / (6 * n))))
            budgets.append(budget)
    fc = ExecutorStep(
        "isoflop/forecast",
        isoflop_forecast,
        IsoflopForecastConfig(
            evaluations=[output_path_of(e) for _, e in rungs],
            budgets=budgets,
            output_path=this_output_path(),
            target_flops=ISOFLOP_TARGET,
            samples=50,
        ),
    )
    ex = Executor(str(root), backend="local", experiment_name="isoflop", script="tests/research_lab.py")
    forecast_rel = os.path.relpath(ex.run([fc])[fc], root)
    prediction = json.loads((root / forecast_rel / "forecast.json").read_text())["prediction"]
    n = int(prediction["params"])
    target_train, target_eval = rung("isoflop-target", n, tokens=int(ISOFLOP_TARGET / (6 * n)))
    check = ExecutorStep(
        "isoflop/check",
        forecast_check,
        ForecastCheckConfig(
            forecast=output_path_of(fc),
            evaluation=output_path_of(target_eval),
            output_path=this_output_path(),
            train=output_path_of(target_train),
        ),
    )
    result = ex.run([fc, check])
    return {
        "isoflop_forecast": forecast_rel,
        "isoflop_check": os.path.relpath(result[check], root),
        "isoflop_record": os.path.relpath(result.record_path, root),
    }
