"""`metrics.jsonl`: one line per training step, written by a Levanter tracker into the step's folder.

Levanter reports a step's numbers in several calls; the line is appended when the step is done (Levanter's
`throughput/hook_time`, logged after every hook of the step has run), with whatever the step reported.
Figures that come after it (the final evaluation Levanter forces once the loop ends) update the last line
at once: a local file's last line is rewritten where it stands (one write, however long the file), other
files are rewritten whole. Timings that come late are added when the file is rewritten at the end;
`tokens` is computed (`tokens_per_step * (step + 1)`), not read from Levanter's throughput log. Each line
holds `step` (Levanter's, counted from 0), `loss`, `lr`, `tokens` (seen so far), `grad_norm` and
`param_norm` (the global L2 norms of the step's gradient, before clipping, and of the parameters: marin
asks Levanter's watch callback for both totals every step), `tokens_per_second` and `duration_s` (of the
step's computation), `elapsed_s` and `cpu_s` (wall clock and this process's CPU time since it began
training, when the step's first figure arrived), and `eval_loss`/`eval_bpb` (plus one pair per
validation set) on evaluation steps, and `harness/<task>/<metric>` on the steps an in-training lm-eval
hook scored (`TrainConfig.harness_tasks`). Only the timing fields vary between two runs with one seed.

A step's checkpoint is started by one of those hooks and committed in the background, so it can be on
disk before the step's line: a run killed then leaves a checkpoint ahead of its metrics. The train step
resumes only from a checkpoint whose step has its line, where the folder has a metrics.jsonl
(`last_logged_step`, and `marin.training.checkpoints.discard_checkpoints_after` for the others; a
checkpoint copied into a new folder to resume from has none and is kept). A resumed run repeats the steps
after its checkpoint: when a step arrives, every line from that step on is dropped first, so the file
always reads as one uninterrupted run. Local files are appended to line by line (a killed run loses at
most the step in flight); other storage is rewritten whole, at most every `remote_flush_s` seconds (env
`MARIN_METRICS_FLUSH_S`, default 30) and at the end, so a run killed there resumes from a checkpoint no
later than its last flushed line.

This module imports Levanter: import it only inside the train step.
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

from levanter.tracker import Tracker
from levanter.tracker.tracker import TrackerConfig

from marin.storage import is_local, makedirs, read_text, strip_protocol, write_text

logger = logging.getLogger(__name__)

_FIELDS = {
    "train/loss": "loss",
    "optim/learning_rate": "lr",
    "throughput/tokens_per_second": "tokens_per_second",
    "throughput/duration": "duration_s",
    "grad/norm/total": "grad_norm",
    "params/norm/total": "param_norm",
}
TIMING_FIELDS = ("tokens_per_second", "duration_s", "elapsed_s", "cpu_s")
STEP_DONE = "throughput/hook_time"
"""What Levanter's train step logs once all the step's hooks have run: its line is complete then."""


def _scalar(value: Any) -> float | int | None:
    try:
        value = value.item() if hasattr(value, "item") else value
    except (TypeError, ValueError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _pick(metrics: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = _FIELDS.get(key)
        if name is None and key.startswith("eval/") and key.endswith(("/loss", "/bpb")):
            parts = [part for part in key.split("/") if part]
            name = "eval_" + "_".join(parts[1:]) if len(parts) > 2 else None
        if name is None and key in ("eval/loss", "eval/bpb"):
            name = key.replace("/", "_")
        if name is None and key.startswith(("harness/", "forecast/")):
            name = key
        if name is not None:
            scalar = _scalar(value)
            if scalar is not None:
                out[name] = scalar
    return out


class MetricsJsonlTracker(Tracker):
    name: str = "marin_metrics"

    def __init__(self, path: str, remote_flush_s: float, tokens_per_step: int):
        self.path = path
        self.tokens_per_step = tokens_per_step
        self.dirty = False
        self.local = is_local(path)
        self.plain = strip_protocol(path)
        """The local file's path, for the appends and the in-place rewrite of its last line."""
        self.remote_flush_s = remote_flush_s
        makedirs(posixpath.dirname(path) or ".")
        text = read_text(path)
        self.lines: list[dict[str, Any]] = [json.loads(line) for line in (text or "").split("\n") if line.strip()]
        self.pending: dict[str, Any] | None = None
        self.last_line_at: int | None = None
        """Where the last line of a local file begins, when this tracker appended it (so it can be redone)."""
        self.truncated = False
        self.last_flush = self.started = time.monotonic()
        self.started_cpu = time.process_time()

    def _drop_from(self, step: int) -> None:
        kept = [line for line in self.lines if line["step"] < step]
        if len(kept) != len(self.lines):
            logger.info(
                "metrics.jsonl: dropping %d lines from step %d on (resumed run)", len(self.lines) - len(kept), step
            )
            self.lines = kept
            self._rewrite()

    def _rewrite(self) -> None:
        write_text(self.path, "".join(json.dumps(line, sort_keys=True) + "\n" for line in self.lines))
        self.last_flush = time.monotonic()
        self.last_line_at = None

    def _rewrite_last_line(self) -> None:
        """The last line again, with what arrived since: one write at its offset, not the whole file."""
        data = (json.dumps(self.lines[-1], sort_keys=True) + "\n").encode()
        fd = os.open(self.plain, os.O_WRONLY)
        try:
            os.pwrite(fd, data, self.last_line_at)
            os.ftruncate(fd, self.last_line_at + len(data))
        finally:
            os.close(fd)

    def _emit(self) -> None:
        if self.pending is None:
            return
        line, self.pending = self.pending, None
        self.lines.append(line)
        if self.local:
            with open(self.plain, "ab") as f:
                self.last_line_at = f.tell()
                f.write((json.dumps(line, sort_keys=True) + "\n").encode())
        elif time.monotonic() - self.last_flush >= self.remote_flush_s:
            self._rewrite()

    def log(self, metrics, *, step, commit=None):
        del commit
        if step is None:
            return
        metrics = dict(metrics)
        picked = _pick(metrics)
        done = STEP_DONE in metrics
        if not picked and not done:
            return
        step = int(step)
        if not self.truncated:
            self.truncated = True
            self._drop_from(step)
        if self.pending is None and self.lines and self.lines[-1]["step"] == step:
            if not picked:
                return
            # a figure after the step was done (the evaluation forced at the end): written at once,
            # timings kept for the rewrite at the end
            self.lines[-1].update(picked)
            if set(picked) <= set(TIMING_FIELDS):
                self.dirty = True
            elif self.local and self.last_line_at is not None:
                self._rewrite_last_line()
            else:
                self._rewrite()
            return
        if self.pending is not None and self.pending["step"] != step:
            self._emit()
        if self.pending is None:
            self.pending = {
                "step": step,
                "elapsed_s": round(time.monotonic() - self.started, 4),
                "cpu_s": round(time.process_time() - self.started_cpu, 4),
            }
        self.pending.update(picked)
        if "loss" in picked:
            self.pending["tokens"] = self.tokens_per_step * (step + 1)
        if done:
            self._emit()

    def log_hyperparameters(self, hparams):
        pass

    def log_summary(self, metrics):
        pass

    def log_artifact(self, artifact_path, *, name=None, type=None):
        pass

    def finish(self):
        self._emit()
        if self.dirty or not self.local:
            self._rewrite()


def last_logged_step(path: str) -> int | None:
    """The step of the last line of the metrics.jsonl at `path` (-1 when it has none; None when there is no
    such file, as in a folder a checkpoint was copied into to resume from)."""
    text = read_text(path)
    if text is None:
        return None
    return max((json.loads(line)["step"] for line in text.split("\n") if line.strip()), default=-1)


@TrackerConfig.register_subclass("marin_metrics")
@dataclass
class MetricsJsonlConfig(TrackerConfig):
    path: str = "metrics.jsonl"
    tokens_per_step: int = 0
    remote_flush_s: float = field(default_factory=lambda: float(os.environ.get("MARIN_METRICS_FLUSH_S", 30.0)))

    def init(self, run_id):
        import jax
        from levanter.tracker import NoopTracker

        if jax.process_index() != 0:  # one metrics.jsonl per run: host 0 writes it
            return NoopTracker()
        return MetricsJsonlTracker(self.path, self.remote_flush_s, self.tokens_per_step)
