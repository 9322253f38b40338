"""The cost table of `marin plan`: parameters, tokens, FLOPs and device-hours of every train and evaluate step.

It sits above the executor and the step library (it reads `TrainConfig`s and `EvalConfig`s out of the
plan, which the executor does not know) and is registered as a plan report (`marin.execution.plan_reports`)
by the CLI and by the experiment helpers. FLOPs are the model's own count (`marin.training.cost`: 3x the
forward pass per token for training, attention included), with 6·N·D beside them; device-hours are at the
peak FLOP/s of the device each step asks for times the assumed MFU, both printed. The vocabulary size, which
sets the logits' share, is read from the tokenizer step the training depends on (its `vocab_size`).

    cost: FLOPs = 3 x forward per token x tokens (attention included); device time = FLOPs / (peak x MFU 0.40)
      step                                   params   tokens    FLOPs  6·N·D    device         device-h
      checkpoints/tiny-...-C2e11/d16-l2-1a2b  25.7k   813k     1.9e11  1.3e11   1 cpu-core       0.0013
      total, what would run (9 train, 9 evaluate):     FLOPs 2.9e13, 0.20 device-hours
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Sequence
from typing import Any

from marin.evaluation.evaluate import EvalConfig
from marin.execution.authoring import ExecutorStep, InputName, VersionedValue
from marin.training.config import LlamaModelConfig, TrainConfig
from marin.training.cost import CostSettings, estimate, evaluation_flops, training_flops


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, VersionedValue) else value


def _step_of(value: Any) -> ExecutorStep | None:
    value = _plain(value)
    if isinstance(value, InputName):
        return value.step
    return value if isinstance(value, ExecutorStep) else None


def vocab_size_of(config: TrainConfig) -> int | None:
    """The tokenizer's vocabulary size, from the tokenizer step the training reads (directly or through its data)."""
    candidates = [_step_of(config.tokenizer)]
    for data in (_plain(config.data) or {}).values():
        tokenized = _step_of(data)
        if tokenized is not None and tokenized.config is not None:
            candidates.append(_step_of(getattr(tokenized.config, "tokenizer", None)))
    for step in candidates:
        vocab = getattr(step.config, "vocab_size", None) if step is not None and step.config is not None else None
        if isinstance(_plain(vocab), int):
            return _plain(vocab)
    return None


def _validation_tokens(config: EvalConfig, planned) -> float | None:
    """Tokens of the validation splits the evaluation reads, when their tokenize steps have run."""
    from marin.storage import read_text

    if _plain(config.max_documents) is not None:
        return None
    by_name = {d.step: d for d in planned.dependencies}
    total = 0.0
    for data in (_plain(config.datasets) or {}).values():
        step = _step_of(data)
        dep = by_name.get(step) if step is not None else None
        text = read_text(posixpath.join(dep.output_path, "stats.json")) if dep is not None else None
        if text is None:
            return None
        total += float(json.loads(text).get(_plain(config.split), {}).get("tokens") or 0)
    return total


def step_cost(planned, settings: CostSettings) -> dict | None:
    """The cost of one planned train or evaluate step, or None for any other step."""
    config = planned.step.config
    resources = dataclasses.asdict(planned.step.resources) if planned.step.resources is not None else {}
    if isinstance(config, TrainConfig):
        model, vocab = _plain(config.model), vocab_size_of(config)
        if not isinstance(model, LlamaModelConfig) or vocab is None:
            return None
        tokens = _plain(config.num_train_steps) * _plain(config.train_batch_size) * model.seq_len
        cost = {"kind": "train", **training_flops(model, vocab, tokens)}
    elif isinstance(config, EvalConfig):
        trained = _step_of(config.checkpoint)
        train_config = trained.config if trained is not None else None
        if not isinstance(train_config, TrainConfig) or vocab_size_of(train_config) is None:
            return None
        model = _plain(train_config.model)
        cost = {
            "kind": "evaluate",
            **evaluation_flops(model, vocab_size_of(train_config), _validation_tokens(config, planned)),
        }
    else:
        return None
    return {**cost, **estimate(cost["flops"], resources, settings)}


def _fmt(v: float | None) -> str:
    if v is None:
        return "?"
    if v >= 1e6 or (0 < v < 1e-2):
        return f"{v:.3g}"
    for scale, unit in ((1e3, "k"),):
        if v >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def cost_report(decisions: Sequence[Any], settings: CostSettings | None = None) -> list[str]:
    """The plan's cost table: one row per train and evaluate step, the totals of what would run."""
    settings = settings or CostSettings.from_env()
    rows = [(d, step_cost(d.planned, settings)) for d in decisions]
    rows = [(d, c) for d, c in rows if c is not None]
    if not rows:
        return []
    width = max(len(d.planned.relative_output_path) for d, _ in rows)
    lines = [
        "cost: FLOPs = model FLOPs per token x tokens (training 3x the forward pass; attention included), 6·N·D "
        f"beside them; device time = FLOPs / (peak FLOP/s x MFU {settings.mfu:.2f})",
        f"  {'':5} {'step':<{width}} {'params':>8} {'tokens':>8} {'FLOPs':>9} {'6·N·D':>9}  {'device':<16} "
        f"{'est. device-h':>13}",
    ]
    total_flops, total_hours, counts, devices = 0.0, 0.0, {"train": 0, "evaluate": 0}, {}
    for d, c in rows:
        device = f"{c['devices']:g} {c['device']}"
        lines.append(
            f"  {d.action:<5} {d.planned.relative_output_path:<{width}} {_fmt(c['parameters']):>8} "
            f"{_fmt(c['tokens']):>8} {_fmt(c['flops']):>9} {_fmt(c['flops_6nd']):>9}  {device:<16} "
            f"{_fmt(c['device_hours']):>13}"
        )
        if d.action != "skip":
            counts[c["kind"]] += 1
            total_flops += c["flops"] or 0.0
            total_hours += c["device_hours"] or 0.0
            devices[c["device"]] = c["peak_flops_per_s"]
    lines.append(
        f"  total, what would run ({counts['train']} train, {counts['evaluate']} evaluate): FLOPs {total_flops:.3g}, "
        f"{total_hours:.3g} estimated device-hours"
    )
    if devices:
        peaks = ", ".join(f"{k} {v:.3g} FLOP/s" for k, v in sorted(devices.items()))
        lines.append(f"  assumed peaks: {peaks}; MFU {settings.mfu:.2f} (MARIN_MFU, MARIN_DEVICE_PEAKS change them)")
    if any(c["tokens"] is None for _, c in rows):
        lines.append(
            "  ?: an evaluation's tokens (and so its FLOPs) are counted once the tokenize steps it reads have run "
            "(their stats.json), and not when it reads only max_documents documents; the totals leave them out"
        )
    return lines


def register() -> None:
    """Makes `marin plan` (and any dry run in this process) print the cost table."""
    from marin.execution.plan_reports import register_plan_report

    register_plan_report(cost_report)
