"""Experiment helpers for the second half of an experiment: train, evaluate, and the scaling ladder.

They build `ExecutorStep`s over the step library (`marin.training.train`, `marin.evaluation.evaluate`,
`marin.evaluation.forecast`). The configs declare which of their fields enter the hash (every field that
changes what a step computes, inputs included, whether steps or plain paths), so changing the model, the
data, the schedule or the seed gives a new output folder, while W&B settings do not.

    tokenized = default_tokenize(...)                      # from the data helpers
    base = default_train("tiny", tokenized, model=LlamaModelConfig(hidden_dim=64), num_train_steps=200)
    cooldown = default_train("tiny-cooldown", {"a": tok_a, "b": tok_b}, weights={"a": 0.7, "b": 0.3},
                             initialize_from=base, num_train_steps=50)        # phase 2
    evaluation = default_eval("tiny", base, {"shakespeare": tokenized})
    ladder = scaling_ladder("tiny", tokenized, sizes=[32, 48, 64], vocab_size=1024)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from marin.evaluation.evaluate import EvalConfig, evaluate
from marin.evaluation.forecast import ForecastConfig, forecast
from marin.evaluation.forecast_check import ForecastCheckConfig, forecast_check
from marin.evaluation.harness_hook import train_with_harness
from marin.execution import ExecutorStep, InputName, ResourceConfig, output_path_of
from marin.stepkit.config import checked
from marin.stepkit.errors import names_step
from marin.training.config import LlamaModelConfig, OptimizerConfig, TrainConfig
from marin.training.train import train

StepOrPath = ExecutorStep | InputName | str


def _path(value: StepOrPath) -> InputName | str:
    return output_path_of(value) if isinstance(value, ExecutorStep) else value


def named_datasets(tokenized: StepOrPath | dict[str, StepOrPath]) -> dict[str, InputName | str]:
    """Tokenized data as the {name: path} a train or evaluation step reads: a mapping as given, one tokenize
    step under its own name (the last part of the step's name), a bare path as "data"."""
    if isinstance(tokenized, dict):
        return {name: _path(value) for name, value in tokenized.items()}
    name = tokenized.name.rsplit("/", 1)[-1] if isinstance(tokenized, ExecutorStep) else "data"
    return {name: _path(tokenized)}


@names_step("checkpoints")
def default_train(
    name: str,
    tokenized: StepOrPath | dict[str, StepOrPath],
    *,
    model: LlamaModelConfig = LlamaModelConfig(),
    optimizer: OptimizerConfig = OptimizerConfig(),
    train_batch_size: int = 16,
    num_train_steps: int = 100,
    seed: int = 0,
    weights: dict[str, float] | None = None,
    tokenizer: StepOrPath | None = None,
    initialize_from: StepOrPath | None = None,
    resources: ResourceConfig | None = None,
    description: str | None = None,
    **options: Any,
) -> ExecutorStep:
    """A train step `checkpoints/<name>` on one tokenized dataset or a weighted mixture of several.

    `initialize_from=<previous train step>` makes this a phase that starts from that run's final
    parameters. `options` are further `TrainConfig` fields (checkpoint_every_steps, precision, wandb_mode,
    ...); TrainConfig declares which of them change the computation and so enter the hash. With
    `harness_tasks` the step's function is `train_with_harness`, which scores them during training.
    """
    config = TrainConfig(
        data=named_datasets(tokenized),
        weights=weights,
        tokenizer=_path(tokenizer) if tokenizer is not None else None,
        model=model,
        optimizer=optimizer,
        train_batch_size=train_batch_size,
        num_train_steps=num_train_steps,
        seed=seed,
        initialize_from=_path(initialize_from) if initialize_from is not None else None,
        **options,
    )
    return ExecutorStep(
        name=f"checkpoints/{name}",
        fn=train_with_harness if config.harness_tasks else train,
        config=config,
        description=description or f"train {name}: {num_train_steps} steps of {train_batch_size}x{model.seq_len}",
        resources=resources or ResourceConfig(cpu=1),
    )


@names_step("evaluation")
def default_eval(
    name: str,
    trained: ExecutorStep,
    datasets: dict[str, StepOrPath],
    *,
    nonblocking: bool = False,
    max_documents: int | None = None,
    split: str = "validation",
    resources: ResourceConfig | None = None,
) -> ExecutorStep:
    """An evaluate step `evaluation/<name>`: loss and bits-per-byte of `trained`'s latest checkpoint.

    `nonblocking=True` evaluates while training runs (whatever checkpoint is complete, waiting up to ten
    minutes for a first one) instead of waiting for the train step to succeed.
    """
    checkpoint = output_path_of(trained)
    if nonblocking:
        checkpoint = checkpoint.nonblocking()
    return ExecutorStep(
        name=f"evaluation/{name}",
        fn=evaluate,
        config=EvalConfig(
            checkpoint=checkpoint,
            datasets={k: _path(v) for k, v in datasets.items()},
            split=split,
            max_documents=max_documents,
            wait_for_checkpoint_s=600.0 if nonblocking else 0.0,
        ),
        description=f"evaluate {name} on {', '.join(sorted(datasets))}",
        resources=resources or ResourceConfig(cpu=1),
    )


TUTORIAL_LADDER = {"sizes": [32, 48, 64, 96], "tokens_per_param": 20, "seq_len": 128, "train_batch_size": 16}
"""The tutorial's ladder (proposed): widths and budgets small enough for a CPU. Its largest rung is what
`benchmarks/gpu_train_check.py` trains on a GPU."""


@checked
def ladder_model(width: int, seq_len: int = 128) -> LlamaModelConfig:
    """The ladder's model of a given width: heads of 32, a 4x MLP, depth growing with width."""
    return LlamaModelConfig(
        seq_len=seq_len,
        hidden_dim=width,
        intermediate_dim=4 * width,
        num_layers=max(2, width // 32),
        num_heads=max(1, width // 32),
        num_kv_heads=max(1, width // 32),
    )


def train_tokens_of(tokenized_output: str) -> int | None:
    """Tokens in a tokenize step's training split (its `stats.json`), or None before it has run."""
    import json

    from marin.storage import join, read_text

    text = read_text(join(tokenized_output, "stats.json"))
    return int(json.loads(text)["train"]["tokens"]) if text is not None else None


def rung_epochs(
    rung: str, num_train_steps: int, train_batch_size: int, seq_len: int, train_tokens: int | None, max_epochs: int
) -> int:
    """The `TrainConfig.epochs` a rung needs: 0 (one pass, the default) when the training split holds its
    `num_train_steps · train_batch_size` sequences, else the passes it needs; more than `max_epochs` passes is
    an error naming the rung, raised when the experiment is defined, before anything trains. Without a known
    `train_tokens` it is 0, and the train step's own check (before it trains) is what guards the rung."""
    if train_tokens is None:
        return 0
    sequences = train_tokens // seq_len
    needed = num_train_steps * train_batch_size
    if sequences <= 0:
        raise ValueError(f"{rung}: the training split holds {train_tokens} tokens, not one sequence of {seq_len}")
    passes = -(-needed // sequences)
    if passes > max_epochs:
        raise ValueError(
            f"{rung}: {num_train_steps} steps of {train_batch_size} sequences need {needed} sequences of {seq_len} "
            f"tokens, {passes} passes over the {sequences} of the training split ({train_tokens} tokens), more "
            f"than max_epochs={max_epochs}: use more data, a smaller budget, or raise max_epochs"
        )
    return 0 if passes <= 1 else passes


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearningRateByWidth:
    """A peak learning rate that falls with the model's width: `rate · (width / at_width)^(−exponent)`.

    Adam's best rate falls about as 1/width (exponent 1) at a fixed training length; a ladder at fixed
    tokens per parameter also trains its wider rungs for more steps (steps grow as N, about width²), and
    a longer training's best rate is lower again, so a ladder's rule falls faster than 1/width. One rate
    for every width trains the wide rungs above their best and the narrow ones below it, and bends the
    ladder's curve."""

    rate: float
    """The peak learning rate at `at_width`."""
    at_width: int
    """The width (hidden size) at which the peak rate is `rate`."""
    exponent: float = 1.0
    """How fast the rate falls with width."""

    def __call__(self, width: int) -> float:
        return self.rate * (width / self.at_width) ** (-self.exponent)


def rung_optimizer(
    optimizer: OptimizerConfig, model: LlamaModelConfig, learning_rate: LearningRateByWidth | None
) -> OptimizerConfig:
    """`optimizer` with the peak learning rate `learning_rate(model.hidden_dim)`; unchanged when that is None."""
    if learning_rate is None:
        return optimizer
    return dataclasses.replace(optimizer, learning_rate=learning_rate(model.hidden_dim))


def rung_steps(model: LlamaModelConfig, vocab_size: int, tokens_per_param: float, tokens_per_step: int) -> int:
    """Steps that give `tokens_per_param` tokens per parameter (compute-matched: D = k·N)."""
    return max(2, math.ceil(tokens_per_param * model.parameter_count(vocab_size) / tokens_per_step))


@dataclasses.dataclass(frozen=True)
class TargetRun:
    """The run a forecast is about: its train and evaluate steps, and the check of forecast against measurement."""

    train: ExecutorStep
    evaluation: ExecutorStep
    check: ExecutorStep


def check_step(name: str, forecast_step: ExecutorStep, trained: ExecutorStep, evaluation: ExecutorStep) -> ExecutorStep:
    """The step `forecast/<name>/check`: `check.json`, refusing a forecast written after `trained` started."""
    return ExecutorStep(
        name=f"forecast/{name}/check",
        fn=forecast_check,
        config=ForecastCheckConfig(
            forecast=output_path_of(forecast_step),
            evaluation=output_path_of(evaluation),
            train=output_path_of(trained),
        ),
        description=f"forecast {name}: forecast against the measured loss of the target run",
    )


@dataclasses.dataclass(frozen=True)
class Ladder:
    """The steps of a scaling ladder: one train and one evaluate step per rung, the forecast, and (when the
    ladder names its target) the target run with its check."""

    trains: list[ExecutorStep]
    evaluations: list[ExecutorStep]
    forecast: ExecutorStep
    target: TargetRun | None = None
    """The forecast run, declared with the ladder but run only after the forecast (its check refuses a
    forecast written after the target started): run `forecast` first, then `target.check`."""

    @property
    def steps(self) -> list[ExecutorStep]:
        return [*self.trains, *self.evaluations, self.forecast]


def ladder_rung(
    name: str,
    tokenized: StepOrPath | dict[str, StepOrPath],
    held_out: dict,
    *,
    max_eval_documents: int | None,
    **train_fields: Any,
) -> tuple[ExecutorStep, ExecutorStep]:
    """One rung of a ladder: its train step and the evaluation of its final checkpoint on `held_out`."""
    trained = default_train(name, tokenized, **train_fields)
    return trained, default_eval(name, trained, held_out, max_documents=max_eval_documents)


@checked
def scaling_ladder(
    name: str,
    tokenized: StepOrPath | dict[str, StepOrPath],
    *,
    sizes: list[int | LlamaModelConfig],
    vocab_size: int,
    tokens_per_param: float = 20,
    seq_len: int = 128,
    train_batch_size: int = 16,
    optimizer: OptimizerConfig = OptimizerConfig(),
    eval_datasets: dict[str, StepOrPath] | None = None,
    target_flops: float | None = None,
    target: int | LlamaModelConfig | None = None,
    seed: int = 0,
    max_eval_documents: int | None = None,
    resources: ResourceConfig | None = None,
    train_tokens: int | None = None,
    max_epochs: int = 8,
    learning_rate: LearningRateByWidth | None = None,
    watch_target: bool = False,
    stop_off_forecast: bool = False,
    **train_options: Any,
) -> Ladder:
    """Train one model per size at D = tokens_per_param·N tokens, evaluate each, forecast the loss at
    `target_flops` (default: 10x the largest rung) from loss(C) = a·C^(−b) + c with C = 6·N·D.

    `target` (a width or a model config) names the run to forecast: it is trained like the rungs, at
    `tokens_per_param`, its compute is the forecast's `target_flops` (so `target_flops` must not be given
    too), and `ladder.target` holds its train and evaluate steps and the check (`check.json`), to run once
    the forecast exists.

    `sizes` are widths (see `ladder_model`) or full model configs; `vocab_size` is the tokenizer's (it sets
    N, hence each rung's steps, when the experiment is defined, before any tokenizer exists).
    `train_tokens` (the training split's size, `train_tokens_of(tokenized output)`) lets each rung be checked
    against the data here: a rung that needs more passes sets `epochs` (versioned, so in its record and hash),
    and one needing more than `max_epochs` is an error naming it (see `rung_epochs`).
    `learning_rate` sets each rung's peak learning rate by its width (`LearningRateByWidth`), the target's too.
    `watch_target` watches the target's training loss against the forecast's curve while it trains
    (`TrainConfig.watch_forecast`, docs/training.md), and `stop_off_forecast` (which implies it) stops the
    target once it has left the forecast's band.
    """
    if len(sizes) < 3:
        raise ValueError(f"scaling_ladder {name!r}: sizes needs at least 3 rungs to fit a, b, c; got {sizes}")
    if target is not None and target_flops is not None:
        raise ValueError(f"scaling_ladder {name!r}: give target (the run, whose compute is forecast) or target_flops")
    models = [s if isinstance(s, LlamaModelConfig) else ladder_model(s, seq_len) for s in sizes]
    tokens_per_step = train_batch_size * seq_len
    held_out = eval_datasets if eval_datasets is not None else named_datasets(tokenized)

    def run(rung: str, model: LlamaModelConfig, **extra: Any) -> tuple[ExecutorStep, ExecutorStep, float]:
        steps = rung_steps(model, vocab_size, tokens_per_param, tokens_per_step)
        epochs = rung_epochs(rung, steps, train_batch_size, seq_len, train_tokens, max_epochs)
        trained, evaluation = ladder_rung(
            rung,
            tokenized,
            held_out,
            model=model,
            optimizer=rung_optimizer(optimizer, model, learning_rate),
            train_batch_size=train_batch_size,
            num_train_steps=steps,
            seed=seed,
            resources=resources,
            max_eval_documents=max_eval_documents,
            **({"epochs": epochs} if epochs else {}),
            **train_options,
            **extra,
        )
        return trained, evaluation, float(6 * model.parameter_count(vocab_size) * steps * tokens_per_step)

    trains, evaluations, flops = [], [], []
    for model in models:
        trained, evaluation, rung_flops = run(f"{name}/d{model.hidden_dim}-l{model.num_layers}", model)
        trains.append(trained)
        evaluations.append(evaluation)
        flops.append(rung_flops)
    target_model = None
    if target is not None:
        target_model = target if isinstance(target, LlamaModelConfig) else ladder_model(target, seq_len)
        target_steps = rung_steps(target_model, vocab_size, tokens_per_param, tokens_per_step)
        target_flops = float(6 * target_model.parameter_count(vocab_size) * target_steps * tokens_per_step)
    target = target_flops if target_flops is not None else 10 * max(flops)
    forecast_step = ExecutorStep(
        name=f"forecast/{name}",
        fn=forecast,
        config=ForecastConfig(
            evaluations=[output_path_of(e) for e in evaluations],
            target_flops=float(target),
        ),
        description=f"forecast {name}: fit loss(C) over {len(models)} rungs, predict at {target:.3g} FLOPs",
    )
    target_run = None
    if target_model is not None:
        watch = (
            {"watch_forecast": output_path_of(forecast_step), "stop_off_forecast": stop_off_forecast}
            if watch_target or stop_off_forecast
            else {}
        )
        trained, evaluation, _ = run(f"{name}/target", target_model, **watch)
        target_run = TargetRun(trained, evaluation, check_step(name, forecast_step, trained, evaluation))
    return Ladder(trains, evaluations, forecast_step, target_run)
