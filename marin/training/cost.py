"""What a training or an evaluation costs, counted from the model config before anything runs.

A forecast is worth having because the big run is expensive; the plan should say how expensive. The count
here is the model's own: per token, a forward pass spends 2 FLOPs per weight of every matrix it multiplies
by (the attention projections, the SwiGLU MLP's three matrices, the output logits; the embedding lookup
is free), plus the attention itself, 2·seq_len·head_dim per head for the scores and as much again for the
weighted sum of values (full context, as Kaplan et al. and Chinchilla count it). Training is three times
the forward pass (the backward pass costs two). `6·N·D`, the usual shorthand with N every parameter, is
reported beside it: the two part where the embeddings (counted by 6·N·D, not multiplied by) or the
attention (multiplied, not counted by 6·N·D) weigh much, which for the tutorial's tiny models they do.

Two counts carry two labels, the same in `marin plan` and on the browser's pages: **FLOPs (model)** (the
count above; `flops` in `cost.json`) and **FLOPs (6·N·D)** (`flops_6nd`; an evaluation's `results.json`
`flops`, the leaderboard's x axis and the ladders' forecasts use it). Device time is estimated from FLOPs
(model).

Device time is FLOPs / (peak FLOP/s · MFU): `DEVICES` holds named devices' dense bf16 peaks (vendor
figures), `DEFAULT_MFU` the model-FLOP utilisation assumed; both are shown beside every estimate and can be
changed per call (`CostSettings`) or with `MARIN_MFU` and `MARIN_DEVICE_PEAKS` (JSON name -> FLOP/s).
Once a step of the same kind has run on the same kind of device, its measurement replaces the assumption
(`MeasuredThroughput`, from the `cost.json` files it wrote): a CPU core of this machine, say, ran the tutorial
2.5 times slower than the assumed peak x MFU, and the next plan says so instead of repeating the guess.

After a run, a train or evaluate step writes `cost.json` (`write_cost_record`): the estimate for the work it
did, computed as `marin plan` computes it (same count, same device table, same MFU), beside what it measured:
wall-clock seconds of the step times the devices it asked for (the device-seconds that were paid, compile,
data loading and export included), the FLOP/s per device and the MFU that this realises, and the ratio of
measured to estimated device-seconds. A training also records its steps' own seconds (the sum of
`metrics.jsonl`'s `duration_s`), the throughput of the loop alone. A resumed training counts only what this
attempt computed (`steps_run` of `num_train_steps`). The file's timings vary between identical runs, so the
steps declare it volatile.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import Literal

from marin.training.config import LlamaModelConfig

DEVICES: dict[str, float] = {
    "cpu-core": 5.0e10,
    "nvidia-a100": 312e12,
    "nvidia-h100": 989e12,
    "nvidia-h200": 989e12,
    "nvidia-b200": 2250e12,
    "tpu-v4": 275e12,
    "tpu-v5e": 197e12,
    "tpu-v5p": 459e12,
    "tpu-v6e": 918e12,
}
"""Peak dense bf16 FLOP/s per device (vendor figures; a CPU core: an AVX2 core's fp32 order of magnitude)."""

DEFAULT_MFU = 0.4
"""Model-FLOP utilisation assumed for accelerators (a well-tuned LLM training reaches 0.35-0.55)."""

_ACCELERATOR_NAMES = {
    "a100": "nvidia-a100",
    "h100": "nvidia-h100",
    "h200": "nvidia-h200",
    "b200": "nvidia-b200",
    "tpu-v4": "tpu-v4",
    "v4": "tpu-v4",
    "tpu-v5e": "tpu-v5e",
    "v5e": "tpu-v5e",
    "v5litepod": "tpu-v5e",
    "tpu-v5p": "tpu-v5p",
    "v5p": "tpu-v5p",
    "tpu-v6e": "tpu-v6e",
    "v6e": "tpu-v6e",
}


@dataclass(frozen=True, kw_only=True)
class CostSettings:
    """The assumptions behind a device-time estimate."""

    devices: dict[str, float] = field(default_factory=lambda: dict(DEVICES))
    """Device name -> peak FLOP/s."""
    mfu: float = DEFAULT_MFU
    """Fraction of the peak a training reaches (0 < mfu <= 1)."""
    gpu_device: str = "nvidia-h100"
    """The device a step asking for GPUs without an `accelerator_type` is assumed to get."""
    tpu_device: str = "tpu-v4"
    """The device a step asking for TPUs without an `accelerator_type` is assumed to get."""

    def __post_init__(self):
        if not 0 < self.mfu <= 1:
            raise ValueError(f"CostSettings.mfu must be in (0, 1], got {self.mfu}")
        for name in (self.gpu_device, self.tpu_device):
            if name not in self.devices:
                raise ValueError(f"CostSettings: device {name!r} is not in the table {sorted(self.devices)}")

    @classmethod
    def from_env(cls) -> CostSettings:
        """The defaults, with `MARIN_MFU` and `MARIN_DEVICE_PEAKS` (JSON) applied."""
        devices = dict(DEVICES)
        peaks = os.environ.get("MARIN_DEVICE_PEAKS")
        if peaks:
            try:
                devices.update({str(k): float(v) for k, v in json.loads(peaks).items()})
            except (ValueError, AttributeError) as e:
                raise ValueError(f"MARIN_DEVICE_PEAKS must be a JSON object of name -> FLOP/s: {e}") from e
        mfu = os.environ.get("MARIN_MFU")
        try:
            return cls(devices=devices, mfu=float(mfu) if mfu else DEFAULT_MFU)
        except ValueError as e:
            raise ValueError(f"MARIN_MFU={mfu!r}: {e}") from e


def forward_flops_per_token(model: LlamaModelConfig, vocab_size: int) -> dict[str, float]:
    """A forward pass's FLOPs per token, by part (`matmul`, `attention`, `logits`) and in `total`."""
    h, m, hd, layers = model.hidden_dim, model.intermediate_dim, model.head_dim, model.num_layers
    projections = 2 * (h * model.num_heads * hd * 2 + h * model.num_kv_heads * hd * 2)
    mlp = 2 * 3 * h * m
    attention = 2 * 2 * model.seq_len * model.num_heads * hd
    parts = {
        "matmul": float(layers * (projections + mlp)),
        "attention": float(layers * attention),
        "logits": float(2 * h * vocab_size),
    }
    return {**parts, "total": sum(parts.values())}


def training_flops(model: LlamaModelConfig, vocab_size: int, tokens: float) -> dict[str, float]:
    """FLOPs of training on `tokens` tokens (3x the forward pass), and 6·N·D beside them."""
    per_token = 3 * forward_flops_per_token(model, vocab_size)["total"]
    params = model.parameter_count(vocab_size)
    return {
        "parameters": float(params),
        "tokens": float(tokens),
        "flops_per_token": per_token,
        "flops": per_token * tokens,
        "flops_6nd": 6.0 * params * tokens,
    }


def evaluation_flops(model: LlamaModelConfig, vocab_size: int, tokens: float | None) -> dict[str, float | None]:
    """FLOPs of one forward pass over `tokens` tokens (None when the count is not known yet)."""
    per_token = forward_flops_per_token(model, vocab_size)["total"]
    params = model.parameter_count(vocab_size)
    return {
        "parameters": float(params),
        "tokens": None if tokens is None else float(tokens),
        "flops_per_token": per_token,
        "flops": None if tokens is None else per_token * tokens,
        "flops_6nd": None if tokens is None else 2.0 * params * tokens,
    }


def device_of(resources: dict, settings: CostSettings) -> tuple[str, float]:
    """(device name, how many) a step's resources (a `ResourceConfig` as a dict) ask for, per host x hosts."""
    hosts = int(resources.get("hosts") or 1)
    label = str(resources.get("accelerator_type") or "").lower()
    named = next((v for k, v in _ACCELERATOR_NAMES.items() if k in label), None) if label else None
    if resources.get("tpu"):
        return named or settings.tpu_device, float(resources["tpu"]) * hosts
    if resources.get("gpu"):
        return named or settings.gpu_device, float(resources["gpu"]) * hosts
    return "cpu-core", float(resources.get("cpu") or 1) * hosts


@dataclass(frozen=True, kw_only=True)
class MeasuredThroughput:
    """What finished steps of one kind measured on one kind of device: an estimate's calibration."""

    kind: Literal["train", "evaluate"]
    """The kind of step measured."""
    device: str
    """The device name (a key of `DEVICES`) the measured steps ran on."""
    flops_per_s: float
    """Model FLOP/s per device over the work itself (a training's steps; an evaluation's whole run), the
    median over the runs."""
    overhead_s: float
    """Wall-clock seconds a run spent around that work (start-up, compilation, export), the median."""
    runs: tuple[str, ...]
    """The output folders measured."""

    @classmethod
    def from_records(cls, records: list[tuple[str, dict]]) -> dict[tuple[str, str], MeasuredThroughput]:
        """By (kind, device): the throughput that `(output folder, cost.json content)` pairs measured. A record
        without a positive rate (nothing computed, an unknown token count) is left out."""
        found: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
        for where, record in records:
            kind, est, got = record.get("kind"), record.get("estimate"), record.get("measured")
            if kind not in ("train", "evaluate") or not isinstance(est, dict) or not isinstance(got, dict):
                continue
            step_s, wall_s = _positive(got.get("step_seconds")), _positive(got.get("wall_seconds"))
            rate = _positive(got.get("step_flops_per_s")) if step_s else _positive(got.get("realised_flops_per_s"))
            if rate is None or wall_s is None or not isinstance(est.get("device"), str):
                continue
            overhead = max(0.0, wall_s - step_s) if step_s else 0.0
            found.setdefault((kind, est["device"]), []).append((where, rate, overhead))
        return {
            (kind, device): cls(
                kind=kind,
                device=device,
                flops_per_s=_median([rate for _, rate, _ in runs]),
                overhead_s=_median([overhead for _, _, overhead in runs]),
                runs=tuple(sorted(where for where, _, _ in runs)),
            )
            for (kind, device), runs in found.items()
        }


def _positive(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def estimate(
    flops: float | None, resources: dict, settings: CostSettings, measured: MeasuredThroughput | None = None
) -> dict:
    """Device-seconds and wall-clock hours of `flops` on the devices `resources` ask for: at the assumed peak x
    MFU (`basis` "peak x MFU"), or, given a `measured` throughput of that device, at the measured rate plus the
    measured overhead of a run (`basis` "measured")."""
    device, count = device_of(resources, settings)
    peak = settings.devices[device]
    if flops is None:
        seconds = None
    elif measured is not None and measured.device == device:
        seconds = (measured.overhead_s + flops / (measured.flops_per_s * max(count, 1e-9))) * count
    else:
        seconds = flops / (peak * settings.mfu)
    calibrated = measured is not None and measured.device == device
    return {
        "device": device,
        "devices": count,
        "peak_flops_per_s": peak,
        "mfu": settings.mfu,
        "basis": "measured" if calibrated else "peak x MFU",
        "device_seconds": seconds,
        "device_hours": None if seconds is None else seconds / 3600,
        "wall_hours": None if seconds is None else seconds / 3600 / max(count, 1e-9),
    }


def duration_words(seconds: float | None) -> str:
    """Seconds as a person reads them: `850 ms`, `4.4 s`, `2 min 5 s`, `3 h 10 min`, `4 d 2 h`; `?` for None."""
    if seconds is None:
        return "?"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    return f"{int(seconds // 86400)} d {int(seconds % 86400 // 3600)} h"


def realised(estimated: dict, flops: float | None, device_seconds: float) -> dict:
    """A finished run beside its estimate: measured device-seconds, realised FLOP/s per device and MFU."""
    per_device = flops / device_seconds if flops and device_seconds > 0 else None
    return {
        "measured_device_seconds": device_seconds,
        "realised_flops_per_s": per_device,
        "realised_mfu": None if per_device is None else per_device / estimated["peak_flops_per_s"],
        "estimate_ratio": (
            None
            if not estimated.get("device_seconds") or device_seconds <= 0
            else device_seconds / estimated["device_seconds"]
        ),
    }


COST_FILE = "cost.json"
"""The file in a train or evaluate step's output that holds its estimate and its measured cost."""

COST_FORMAT = "marin-cost/1"


def measured_cost(estimated: dict, flops: float | None, wall_seconds: float) -> dict:
    """What a finished step measured, beside `estimated` (an `estimate` of the same `flops`)."""
    device_seconds = wall_seconds * estimated["devices"]
    return {
        "wall_seconds": wall_seconds,
        "devices": estimated["devices"],
        "device_seconds": device_seconds,
        "device_hours": device_seconds / 3600,
        **{k: v for k, v in realised(estimated, flops, device_seconds).items() if k != "measured_device_seconds"},
    }


def cost_record(
    *,
    kind: Literal["train", "evaluate"],
    work: dict,
    resources: dict | None,
    wall_seconds: float,
    settings: CostSettings | None = None,
    step_seconds: float | None = None,
    extra: dict | None = None,
) -> dict:
    """The content of `cost.json`: `work` (a `training_flops`/`evaluation_flops` count of what the step did),
    its estimate on the devices `resources` ask for, and the measured side."""
    settings = settings or CostSettings.from_env()
    resources = resources or {"cpu": 1}
    estimated = {**work, **estimate(work.get("flops"), resources, settings)}
    measured = measured_cost(estimated, work.get("flops"), wall_seconds)
    if step_seconds is not None and step_seconds > 0:
        measured["step_seconds"] = step_seconds
        flops, tokens = work.get("flops"), work.get("tokens")
        per_device = flops / (step_seconds * estimated["devices"]) if flops else None
        measured["step_flops_per_s"] = per_device
        measured["step_mfu"] = None if per_device is None else per_device / estimated["peak_flops_per_s"]
        measured["step_tokens_per_s"] = tokens / step_seconds if tokens else None
    return {
        "format": COST_FORMAT,
        "kind": kind,
        "resources": resources,
        "estimate": estimated,
        "measured": measured,
        **(extra or {}),
    }


def write_cost_record(output_path: str, record: dict) -> None:
    """Writes `record` to `<output_path>/cost.json` (published atomically)."""
    from marin.storage import write_text

    write_text(posixpath.join(output_path, COST_FILE), json.dumps(record, indent=2, sort_keys=True) + "\n")


_DEVICE_KINDS = (
    ("tpu v6 lite", "tpu-v6e"),
    ("tpu v6e", "tpu-v6e"),
    ("tpu v5 lite", "tpu-v5e"),
    ("tpu v5e", "tpu-v5e"),
    ("tpu v5p", "tpu-v5p"),
    ("tpu v5", "tpu-v5p"),
    ("tpu v4", "tpu-v4"),
    ("a100", "nvidia-a100"),
    ("h100", "nvidia-h100"),
    ("h200", "nvidia-h200"),
    ("b200", "nvidia-b200"),
)
"""jax's `device_kind` strings (lower-cased substrings, most specific first) -> names in `DEVICES`."""


def peak_flops_of_device_kind(
    device_kind: str, settings: CostSettings | None = None
) -> tuple[str | None, float | None]:
    """(name in the table, peak bf16 FLOP/s) of a jax device kind ("NVIDIA H100 80GB HBM3", "TPU v5 lite");
    (None, None) for a kind the table does not name, a CPU among them (the table's `cpu-core` is an order of
    magnitude for estimates, not a peak to measure a run against)."""
    devices = (settings or CostSettings.from_env()).devices
    low = device_kind.lower()
    if low in devices:
        return low, devices[low]
    name = next((name for key, name in _DEVICE_KINDS if key in low), None)
    return (name, devices[name]) if name in devices else (None, None)
