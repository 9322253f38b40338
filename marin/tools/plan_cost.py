"""The cost table of `marin plan`: parameters, tokens, FLOPs and device time of every train and evaluate step.

It sits above the executor and the step library (it reads `TrainConfig`s and `EvalConfig`s out of the
plan, which the executor does not know) and is registered as a plan report (`marin.execution.plan_reports`)
by the CLI and by the experiment helpers. Two FLOP counts, named as everywhere else (`marin.training.cost`):
FLOPs (model), 3x the forward pass per token for training (attention and logits included), and FLOPs (6·N·D).
Device time is in seconds, minutes, hours or days, estimated from FLOPs (model): at the throughput measured by
finished steps of the same kind on the same device (their `cost.json`, found beside the planned step) when
there are any, else at the device's peak FLOP/s times the assumed MFU; each row says which (`basis`). The
vocabulary size, which sets the logits' share, is read from the tokenizer step the training depends on.

    cost: FLOPs (model) = 3 x the forward pass per token x tokens for training, ...; FLOPs (6·N·D) = 6 x ...
            step                                 params tokens FLOPs (model) FLOPs (6·N·D)  device  est. device time  basis
      run   checkpoints/tiny-shakespeare-1bf96781  213k   410k      4.43e+11      5.24e+11  1 cpu-core  50.3 s  measured
      total, what would run (1 train, 1 evaluate): FLOPs (model) 4.43e+11, FLOPs (6·N·D) 5.24e+11, est. device time 50.3 s
      measured (train on cpu-core): 2.05e+10 FLOP/s (model) per device over the training steps (MFU 0.41 of the
      assumed peak) + 28.7 s per run around them; median of 1 run(s) in /lab/checkpoints/
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Sequence
from typing import Any

from marin.evaluation.evaluate import EvalConfig
from marin.execution.authoring import ExecutorStep, InputName, VersionedValue
from marin.storage import join, list_dir, read_bytes_many
from marin.training.config import LlamaModelConfig, TrainConfig
from marin.training.cost import (
    COST_FILE,
    CostSettings,
    MeasuredThroughput,
    device_of,
    duration_words,
    estimate,
    evaluation_flops,
    training_flops,
)


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


def step_cost(
    planned, settings: CostSettings, measured: dict[tuple[str, str], MeasuredThroughput] | None = None
) -> dict | None:
    """The cost of one planned train or evaluate step, or None for any other step; `measured` (by kind and
    device) calibrates its time when a step of its kind was measured on its device."""
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
    device, _ = device_of(resources, settings)
    calibration = (measured or {}).get((cost["kind"], device))
    return {**cost, **estimate(cost["flops"], resources, settings, calibration)}


def measured_throughputs(planned_steps: Sequence[Any]) -> dict[tuple[str, str], MeasuredThroughput]:
    """What the finished train and evaluate steps beside the planned ones measured (their `cost.json`), by
    kind and device: one listing of each planned step's parent folder, then one small read per output there."""
    parents = sorted({p.output_path.rstrip("/").rsplit("/", 1)[0] for p in planned_steps})
    outputs = [join(parent, name) for parent in parents for name in list_dir(parent) if not name.startswith(".")]
    records = []
    for output, data in zip(outputs, read_bytes_many([join(o, COST_FILE) for o in outputs]), strict=True):
        try:
            record = json.loads(data) if data else None
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append((output, record))
    return MeasuredThroughput.from_records(records)


def _fmt(v: float | None) -> str:
    if v is None:
        return "?"
    if v >= 1e6 or (0 < v < 1e-2):
        return f"{v:.3g}"
    for scale, unit in ((1e3, "k"),):
        if v >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


MODEL_FLOPS = "FLOPs (model)"
"""The model's own count (3x the forward pass per token for training; attention and logits included)."""
SIX_ND_FLOPS = "FLOPs (6·N·D)"
"""6 x parameters x tokens: what evaluations' results, the leaderboard and the forecasts use."""


def cost_report(decisions: Sequence[Any], settings: CostSettings | None = None) -> list[str]:
    """The plan's cost table: one row per train and evaluate step, the totals of what would run."""
    settings = settings or CostSettings.from_env()
    costed = [d for d in decisions if isinstance(d.planned.step.config, TrainConfig | EvalConfig)]
    measured = measured_throughputs([d.planned for d in costed]) if costed else {}
    rows = [(d, step_cost(d.planned, settings, measured)) for d in costed]
    rows = [(d, c) for d, c in rows if c is not None]
    if not rows:
        return []
    width = max(len(d.planned.relative_output_path) for d, _ in rows)
    lines = [
        f"cost: {MODEL_FLOPS} = 3 x the forward pass per token x tokens for training, 1 x for evaluation (attention "
        f"and logits included); {SIX_ND_FLOPS} = 6 x parameters x tokens for training, 2 x for evaluation (the leaderboard's and the "
        "forecasts' axis)",
        f"  {'':5} {'step':<{width}} {'params':>8} {'tokens':>8} {MODEL_FLOPS:>13} {SIX_ND_FLOPS:>13}  "
        f"{'device':<16} {'est. device time':>16}  basis",
    ]
    total_flops, total_6nd, total_seconds = 0.0, 0.0, 0.0
    counts, devices = {"train": 0, "evaluate": 0}, {}
    for d, c in rows:
        device = f"{c['devices']:g} {c['device']}"
        lines.append(
            f"  {d.action:<5} {d.planned.relative_output_path:<{width}} {_fmt(c['parameters']):>8} "
            f"{_fmt(c['tokens']):>8} {_fmt(c['flops']):>13} {_fmt(c['flops_6nd']):>13}  {device:<16} "
            f"{duration_words(c['device_seconds']):>16}  {c['basis'] if c['device_seconds'] is not None else ''}"
        )
        if d.action != "skip":
            counts[c["kind"]] += 1
            total_flops += c["flops"] or 0.0
            total_6nd += c["flops_6nd"] or 0.0
            total_seconds += c["device_seconds"] or 0.0
            if c["basis"] != "measured" and c["device_seconds"] is not None:
                devices[c["device"]] = c["peak_flops_per_s"]
    lines.append(
        f"  total, what would run ({counts['train']} train, {counts['evaluate']} evaluate): {MODEL_FLOPS} "
        f"{total_flops:.3g}, {SIX_ND_FLOPS} {total_6nd:.3g}, est. device time {duration_words(total_seconds)}"
    )
    used = {(c["kind"], c["device"]) for _, c in rows if c["basis"] == "measured"}
    for key in sorted(used):
        m = measured[key]
        peak = settings.devices[m.device]
        where = m.runs[0].rsplit("/", 1)[0]
        lines.append(
            f"  measured ({m.kind} on {m.device}): {m.flops_per_s:.3g} FLOP/s (model) per device over the "
            f"{'training steps' if m.kind == 'train' else 'evaluation'} (MFU {m.flops_per_s / peak:.2g} of the "
            f"assumed peak) + {duration_words(m.overhead_s)} per run around them; median of {len(m.runs)} "
            f"run(s) in {where}/"
        )
    if devices:
        peaks = ", ".join(f"{k} {v:.3g} FLOP/s" for k, v in sorted(devices.items()))
        lines.append(
            f"  not measured yet, assumed: device time = {MODEL_FLOPS} / (peak x MFU); peaks: {peaks}; MFU "
            f"{settings.mfu:.2f} (MARIN_MFU, MARIN_DEVICE_PEAKS change them)"
        )
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
