"""Data mixtures that change within one run: stages of weights, each from a given step on.

Marin's long runs change their mixture as they go (more code or math near the end, a cooldown on
high-quality data) without starting a new phase: the optimizer state, the schedule and the data order
carry on. Levanter's mixture dataset does this natively: its weights may be a list of (start, weights)
stages, where the start is a *sequence* index and must be a multiple of the mixture's block size (each
block holds exactly the expected count of every dataset, so the order inside a block can be shuffled
deterministically). marin states the stages in optimizer steps (`MixtureStage(start_step, weights)`),
converts them to sequence indices (step × batch size), and, only when stages are given, uses as block
size the largest divisor of Levanter's default 2,048 that divides every stage's start, so a stage can
begin at any step. The dataset is a pure function of the sequence index, so a run resumed from a
checkpoint in the middle of a stage reads exactly what an uninterrupted run reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_BLOCK_SIZE = 2048
"""Levanter's `mixture_block_size` default, used as is when the mixture does not change."""


@dataclass(frozen=True, kw_only=True)
class MixtureStage:
    """From `start_step` on (until the next stage), sample the datasets with these weights."""

    start_step: int
    """The first optimizer step of this stage (the first stage starts at 0)."""
    weights: dict[str, float]
    """Weights by dataset name (normalised; a dataset left out has weight 0 in this stage)."""


def normalised(weights: dict[str, float], names) -> dict[str, float]:
    total = sum(weights.values())
    return {name: weights.get(name, 0.0) / total for name in names}


def check_stages(stages: list[MixtureStage], data: dict[str, str], num_train_steps: int, weights) -> None:
    """Raise ValueError naming `train.mixture_stages[i]` for anything a run could not follow."""
    if weights is not None:
        raise ValueError("train.weights and train.mixture_stages are both set: give the weights in the stages")
    if len(data) < 2:
        raise ValueError("train.mixture_stages needs two or more datasets in train.data")
    if not stages:
        raise ValueError("train.mixture_stages is empty: leave it None for a fixed mixture")
    for i, stage in enumerate(stages):
        where = f"train.mixture_stages[{i}]"
        if not isinstance(stage, MixtureStage):
            raise TypeError(f"{where} must be a MixtureStage, got {type(stage).__name__}")
        if i == 0 and stage.start_step != 0:
            raise ValueError(f"{where}.start_step must be 0 (the first stage starts the run), got {stage.start_step}")
        if i > 0 and stage.start_step <= stages[i - 1].start_step:
            raise ValueError(
                f"{where}.start_step must be after the previous stage's ({stages[i - 1].start_step}), "
                f"got {stage.start_step}"
            )
        if stage.start_step >= num_train_steps:
            raise ValueError(
                f"{where}.start_step {stage.start_step} is not before train.num_train_steps {num_train_steps}"
            )
        unknown = sorted(set(stage.weights) - set(data))
        if unknown:
            raise ValueError(f"{where}.weights names {unknown}, which are not in train.data {sorted(data)}")
        if any(w < 0 for w in stage.weights.values()) or sum(stage.weights.values()) <= 0:
            raise ValueError(f"{where}.weights must be >= 0 with a positive sum, got {stage.weights}")


def schedule(stages: list[MixtureStage], names) -> list[tuple[int, dict[str, float]]]:
    """(start step, normalised weights) per stage: what Levanter's `train_weights` takes in steps."""
    return [(stage.start_step, normalised(stage.weights, names)) for stage in stages]


def block_size(stages: list[MixtureStage], batch_size: int) -> int:
    """The largest divisor of 2,048 that divides every stage's first sequence index."""
    size = DEFAULT_BLOCK_SIZE
    for stage in stages:
        size = math.gcd(size, stage.start_step * batch_size)
    return size


def active_datasets(stages: list[MixtureStage], names) -> set[str]:
    """The datasets some stage samples (their caches must exist)."""
    return {name for stage in stages for name in names if stage.weights.get(name, 0.0) > 0}
