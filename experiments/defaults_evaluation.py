"""Experiment helpers for downstream evaluation and isoFLOP ladders (steps over `marin.evaluation`).

    scores = default_harness("tiny", trained, tasks=["marin_shakespeare"])     # lm-eval-harness tasks
    ladder = isoflop_ladder("iso", tokenized, budgets=[3e9, 1e10], widths=[16, 24, 32], vocab_size=512)
    # run the ladder; ladder.forecast's forecast.json names the configuration for the target budget; then
    target = forecast_target("iso", ladder, tokenized, read_forecast(path))  # train it, evaluate, check

A ladder's target run is declared from the forecast's output, so it exists only in a later run of the
experiment (the forecast has to be read first); its check step records forecast against measured loss.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from experiments.defaults_training import (
    LearningRateByWidth,
    StepOrPath,
    TargetRun,
    check_step,
    default_eval,
    default_train,
    ladder_model,
    ladder_rung,
    named_datasets,
    rung_epochs,
    rung_optimizer,
)
from marin.evaluation.harness import HarnessConfig, harness
from marin.evaluation.isoflop_forecast import IsoflopForecastConfig, isoflop_forecast
from marin.execution import ExecutorStep, ResourceConfig, output_path_of
from marin.stepkit.config import checked
from marin.stepkit.errors import names_step
from marin.storage import join, read_text
from marin.training.config import LlamaModelConfig, OptimizerConfig


@names_step("evaluation/harness")
def default_harness(
    name: str,
    trained: ExecutorStep,
    tasks: list[str],
    *,
    limit: int | None = None,
    num_fewshot: int | None = None,
    task_paths: list[str] | None = None,
    include_default_tasks: bool = False,
    resources: ResourceConfig | None = None,
) -> ExecutorStep:
    """A harness step `evaluation/harness/<name>`: lm-eval tasks on `trained`'s final checkpoint."""
    return ExecutorStep(
        name=f"evaluation/harness/{name}",
        fn=harness,
        config=HarnessConfig(
            checkpoint=output_path_of(trained),
            tasks=list(tasks),
            task_paths=list(task_paths or []),
            include_default_tasks=include_default_tasks,
            limit=limit,
            num_fewshot=num_fewshot,
        ),
        description=f"lm-eval-harness {name}: {', '.join(tasks)}",
        resources=resources or ResourceConfig(cpu=1),
    )


def rung_steps_for_budget(model: LlamaModelConfig, vocab_size: int, flops: float, tokens_per_step: int) -> int:
    """Steps that spend about `flops` = 6·N·D on `model` (at least two: Levanter never checkpoints step 0)."""
    return max(2, round(flops / (6 * model.parameter_count(vocab_size) * tokens_per_step)))


@dataclasses.dataclass(frozen=True)
class IsoflopLadder:
    """One train and evaluate step per (budget, size), and the isoFLOP forecast over them."""

    trains: list[ExecutorStep]
    evaluations: list[ExecutorStep]
    budgets: list[float]
    forecast: ExecutorStep
    settings: dict
    """What the target run shares with the rungs: vocab_size, seq_len, train_batch_size, optimizer, options."""

    @property
    def steps(self) -> list[ExecutorStep]:
        return [*self.trains, *self.evaluations, self.forecast]


@checked
def isoflop_ladder(
    name: str,
    tokenized: StepOrPath | dict[str, StepOrPath],
    *,
    budgets: list[float],
    widths: list[int | LlamaModelConfig] | dict[float, list[int | LlamaModelConfig]],
    vocab_size: int,
    target_flops: float | None = None,
    seq_len: int = 128,
    train_batch_size: int = 16,
    optimizer: OptimizerConfig = OptimizerConfig(),
    eval_datasets: dict[str, StepOrPath] | None = None,
    max_eval_documents: int | None = None,
    seed: int = 0,
    samples: int = 200,
    confidence: float = 0.95,
    target_widths: list[int | LlamaModelConfig] | None = None,
    resources: ResourceConfig | None = None,
    train_tokens: int | None = None,
    max_epochs: int = 8,
    learning_rate: LearningRateByWidth | None = None,
    **train_options: Any,
) -> IsoflopLadder:
    """Every size of `widths` trained at every budget (D = C / 6N), each evaluated, and the isoFLOP forecast
    at `target_flops` (default: 10x the largest rung's compute as trained, 6·N·D with its rounded steps), choosing among `target_widths` (default: the
    ladder's own model shapes and wider ones, up to 4x the largest width) for the target's configuration,
    with a `confidence` bootstrap interval (4+ widths per budget: with 3 the parabolas fit exactly and
    there is none). With `train_tokens` (the
    training split's size) every rung is checked against the data when it is defined: one that needs more
    than one pass sets `epochs`, one that needs more than `max_epochs` is an error naming it (`rung_epochs`);
    the target run is checked the same way when `forecast_target` declares it. `learning_rate`
    sets every run's peak learning rate by its width, the target's included (`LearningRateByWidth`).

    `widths` is one list for every budget, or a mapping from each budget to its own sizes: a window that
    slides with the budget keeps every budget's optimum inside the sizes tried without training the
    smallest models at the largest budgets (their longest runs)."""
    per_budget = widths if isinstance(widths, dict) else {budget: widths for budget in budgets}
    if set(map(float, per_budget)) != set(map(float, budgets)):
        raise ValueError(
            f"isoflop_ladder {name!r}: widths names budgets [{', '.join(f'{b:.3g}' for b in sorted(per_budget))}] "
            f"but budgets are [{', '.join(f'{b:.3g}' for b in sorted(budgets))}]"
        )
    if len(set(budgets)) < 2 or any(len(set(ws)) < 3 for ws in per_budget.values()):
        raise ValueError(f"isoflop_ladder {name!r}: needs 2+ budgets and 3+ sizes at each, got {budgets} and {widths}")
    models_at = {
        float(budget): [w if isinstance(w, LlamaModelConfig) else ladder_model(w, seq_len) for w in ws]
        for budget, ws in per_budget.items()
    }
    models = list({m.hidden_dim: m for ms in models_at.values() for m in ms}.values())
    tokens_per_step = train_batch_size * seq_len
    held_out = eval_datasets if eval_datasets is not None else named_datasets(tokenized)
    trains, evaluations, rung_budgets, trained_flops = [], [], [], []
    for budget in sorted(budgets):
        for model in models_at[float(budget)]:
            rung = f"{name}/C{budget:.2g}/d{model.hidden_dim}-l{model.num_layers}".replace("+", "")
            steps = rung_steps_for_budget(model, vocab_size, budget, tokens_per_step)
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
            )
            trains.append(trained)
            evaluations.append(evaluation)
            rung_budgets.append(float(budget))
            trained_flops.append(6 * model.parameter_count(vocab_size) * steps * tokens_per_step)
    target = float(target_flops if target_flops is not None else 10 * max(trained_flops))
    largest = max(m.hidden_dim for m in models)
    if target_widths is None:
        candidates = [
            *sorted(models, key=lambda m: m.hidden_dim),
            *(ladder_model(w, seq_len) for w in (2 * largest, 3 * largest, 4 * largest)),
        ]
    else:
        candidates = [w if isinstance(w, LlamaModelConfig) else ladder_model(w, seq_len) for w in target_widths]
    forecast = ExecutorStep(
        name=f"forecast/{name}",
        fn=isoflop_forecast,
        config=IsoflopForecastConfig(
            evaluations=[output_path_of(e) for e in evaluations],
            budgets=rung_budgets,
            target_flops=target,
            candidates=candidates,
            vocab_size=vocab_size,
            tokens_per_step=tokens_per_step,
            samples=samples,
            seed=seed,
            confidence=confidence,
        ),
        description=f"isoFLOP forecast {name}: {len(budgets)} budgets, {len(evaluations)} rungs, target {target:.3g}",
    )
    settings = {
        "seq_len": seq_len,
        "train_batch_size": train_batch_size,
        "optimizer": optimizer,
        "seed": seed,
        "held_out": held_out,
        "max_eval_documents": max_eval_documents,
        "resources": resources,
        "options": train_options,
        "train_tokens": train_tokens,
        "max_epochs": max_epochs,
        "learning_rate": learning_rate,
    }
    return IsoflopLadder(trains, evaluations, rung_budgets, forecast, settings)


def read_forecast(forecast_output: str) -> dict | None:
    """The forecast step's `forecast.json`, or None before it has run."""
    text = read_text(join(forecast_output, "forecast.json"))
    return json.loads(text) if text is not None else None


def forecast_target(
    name: str,
    ladder: IsoflopLadder,
    tokenized: StepOrPath | dict[str, StepOrPath],
    forecast: dict,
    **train_options: Any,
) -> TargetRun:
    """The run the forecast configured (its chosen model and steps), its evaluation, and the check step.

    `train_options` add to (or override) the ladder's further TrainConfig fields, e.g. `harness_tasks`."""
    prediction = forecast.get("prediction")
    if not prediction or "config" not in prediction:
        raise ValueError(f"forecast_target {name!r}: the forecast chose no configuration ({forecast.get('notes')})")
    chosen = prediction["config"]
    s = ladder.settings
    epochs = rung_epochs(
        f"{name}/target", chosen["steps"], s["train_batch_size"], s["seq_len"], s["train_tokens"], s["max_epochs"]
    )
    model = LlamaModelConfig(**chosen["model"])
    trained = default_train(
        f"{name}/target",
        tokenized,
        model=model,
        optimizer=rung_optimizer(s["optimizer"], model, s["learning_rate"]),
        train_batch_size=s["train_batch_size"],
        num_train_steps=chosen["steps"],
        seed=s["seed"],
        resources=s["resources"],
        **{**({"epochs": epochs} if epochs else {}), **s["options"], **train_options},
    )
    evaluation = default_eval(f"{name}/target", trained, s["held_out"], max_documents=s["max_eval_documents"])
    return TargetRun(trained, evaluation, check_step(name, ladder.forecast, trained, evaluation))


__all__ = ["TargetRun", "default_harness", "forecast_target", "isoflop_ladder", "read_forecast"]
