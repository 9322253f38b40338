"""The results a researcher ranks runs by, found in the step folders a prefix's records name.

An evaluation step leaves `results.json` (marin/evaluation/evaluate.py: `macro_bpb`, `macro_loss`, per-set
figures, and the run's `flops`, `tokens`, `parameter_count`); a harness evaluation adds per-task scores
under `tasks`; a train step leaves `metrics.jsonl`. Reading every step folder of a 1,000-experiment prefix
would cost a request per step on a bucket, so only the steps that can hold a result are read: finished
steps whose function lives in `marin.evaluation` or whose name starts with `eval` (results), and train
steps (`marin.training`, or a name starting with `train`) for the last line of `metrics.jsonl`. The reads
are batched per root (concurrent on object stores). A step shared by several records (a later version of
an experiment skipping it) is attributed to the newest record that names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from marin.browser.records import Experiment, StepRef, list_experiments, loads
from marin.browser.storage import read_many
from marin.storage.layout import State

RESULTS_FILE = "results.json"
HARNESS_FILE = "metrics.json"
"""The harness step's per-task metrics (marin/evaluation/harness.py)."""
METRICS_FILE = "metrics.jsonl"
METRICS_TAIL_BYTES = 16 << 10
"""How much of the end of a metrics.jsonl is read for its last line."""

X_AXES = {"flops": "training FLOPs (6·N·D)", "tokens": "training tokens", "parameters": "parameters"}
METRICS = {"macro_bpb": "bits per byte (macro)", "macro_loss": "loss, nats per token (macro)"}


def _fn(step: StepRef) -> str:
    fn = step.record.get("fn")
    return fn if isinstance(fn, str) else ""


def is_evaluation(step: StepRef) -> bool:
    return not is_training(step) and ("marin.evaluation" in _fn(step) or step.name.split("/")[0].startswith("eval"))


def is_training(step: StepRef) -> bool:
    """A train step: its function is marin.training's, or its config a TrainConfig (a training that scores
    lm-eval tasks runs `marin.evaluation.harness_hook:train_with_harness`)."""
    config_type = step.record.get("config_type")
    return (
        "marin.training" in _fn(step)
        or (isinstance(config_type, str) and config_type.endswith(":TrainConfig"))
        or step.name.split("/")[0].startswith("train")
    )


@dataclass
class Result:
    """One evaluation of one checkpoint, with the run's size."""

    experiment: Experiment
    step: StepRef
    results: dict
    metrics: dict[str, float] = field(default_factory=dict)
    flops: float | None = None
    tokens: float | None = None
    parameters: float | None = None
    tasks: dict[str, float] = field(default_factory=dict)
    trained_by: str | None = None
    """The step folder the evaluation read (its first dependency): evaluations of one checkpoint share it."""

    def x(self, axis: str) -> float | None:
        return {"flops": self.flops, "tokens": self.tokens, "parameters": self.parameters}[axis]


@dataclass
class Headline:
    """What an experiment's list row shows: its evaluation figures, else its training's last loss."""

    bpb: float | None = None
    loss: float | None = None
    train_loss: float | None = None
    tasks: dict[str, float] = field(default_factory=dict)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def task_scores(results: dict) -> dict[str, float]:
    """Per-task headline scores of a harness evaluation, first of acc / acc_norm / exact_match each.

    Reads `tasks: {name: {"metrics": {metric: value}}}` (marin's harness step) and `tasks: {name: {metric: value}}`.
    """
    tasks = results.get("tasks")
    out: dict[str, float] = {}
    if isinstance(tasks, dict):
        for name, metrics in tasks.items():
            if isinstance(metrics, dict) and isinstance(metrics.get("metrics"), dict):
                metrics = metrics["metrics"]
            if isinstance(metrics, dict):
                for key in ("acc", "acc_norm", "exact_match", "accuracy"):
                    if _num(metrics.get(key)) is not None:
                        out[str(name)] = float(metrics[key])
                        break
            elif _num(metrics) is not None:
                out[str(name)] = float(metrics)
    return out


def _created(exp: Experiment) -> str:
    created = (exp.record or {}).get("created")
    return created if isinstance(created, str) else ""


def _finished(experiments: list[Experiment], want) -> list[tuple[Experiment, StepRef]]:
    """(experiment, step) for every finished step that `want`, oldest record first."""
    return [
        (exp, step)
        for exp in sorted(experiments, key=_created)
        for step in exp.steps
        if step.state == State.SUCCESS and want(step)
    ]


def _read_results(roots, pairs) -> tuple[dict[tuple[int, str], dict], list[str]]:
    """(root, step folder) -> its parsed results.json, for the steps of `pairs` that have one."""
    found: dict[tuple[int, str], dict] = {}
    errors: list[str] = []
    for index, root in enumerate(roots):
        rels = sorted({step.rel for exp, step in pairs if exp.root_index == index})
        paths = {(rel, name): f"{root.join(rel)}/{name}" for rel in rels for name in (RESULTS_FILE, HARNESS_FILE)}
        blobs = read_many(root.fs, list(paths.values()))
        for rel in rels:
            name = RESULTS_FILE
            data = blobs.get(paths[(rel, RESULTS_FILE)])
            if not isinstance(data, bytes | bytearray):
                name, data = HARNESS_FILE, blobs.get(paths[(rel, HARNESS_FILE)])
            if not isinstance(data, bytes | bytearray):
                continue
            try:
                results = loads(data, f"{rel}/{name}")
            except Exception as e:  # noqa: BLE001 - a bad file is listed as an error, not fatal
                errors.append(str(e))
                continue
            if isinstance(results, dict):
                found[(index, rel)] = results
            else:
                errors.append(f"{rel}/{name}: expected a JSON object")
    return found, errors


def _result(exp: Experiment, step: StepRef, results: dict) -> Result:
    return Result(
        experiment=exp,
        step=step,
        results=results,
        metrics={k: float(results[k]) for k in METRICS if _num(results.get(k)) is not None},
        flops=_num(results.get("flops")),
        tokens=_num(results.get("tokens")),
        parameters=_num(results.get("parameter_count")),
        tasks=task_scores(results),
        trained_by=step.deps[0] if step.deps else None,
    )


def attach_tasks(results: list[Result]) -> list[Result]:
    """Give each evaluation the harness scores of the same checkpoint (another step that read the same run)."""
    scores: dict[tuple[int, str], dict[str, float]] = {}
    for r in results:
        if r.trained_by and r.tasks:
            scores.setdefault((r.experiment.root_index, r.trained_by), {}).update(r.tasks)
    for r in results:
        if r.trained_by:
            r.tasks = {**scores.get((r.experiment.root_index, r.trained_by), {}), **r.tasks}
    return results


def collect_results(roots, experiments: list[Experiment] | None = None) -> tuple[list[Result], list[str]]:
    """Every finished evaluation under the roots, once each (under the newest record naming it); plus errors."""
    errors: list[str] = []
    if experiments is None:
        experiments, errors = list_experiments(roots)
    owners = {(exp.root_index, step.rel): (exp, step) for exp, step in _finished(experiments, is_evaluation)}
    found, read_errors = _read_results(roots, list(owners.values()))
    out = [_result(exp, step, found[key]) for key, (exp, step) in sorted(owners.items()) if key in found]
    return attach_tasks(out), errors + read_errors


def last_train_losses(roots, experiments: list[Experiment]) -> dict[tuple[int, str], float]:
    """(root, experiment record) -> the last `loss` logged by the train steps it names (its last such step)."""
    pairs = _finished(experiments, is_training)
    by_step: dict[tuple[int, str], float | None] = {}
    for index, root in enumerate(roots):
        for rel in sorted({step.rel for exp, step in pairs if exp.root_index == index}):
            by_step[(index, rel)] = _last_loss(root, f"{root.join(rel)}/{METRICS_FILE}")
    losses: dict[tuple[int, str], float] = {}
    for exp, step in pairs:
        loss = by_step.get((exp.root_index, step.rel))
        if loss is not None:
            losses[(exp.root_index, exp.rel)] = loss
    return losses


def _last_loss(root, path: str) -> float | None:
    try:
        size = root.fs.info(path)["size"]
        data = root.fs.cat_file(path, start=max(0, size - METRICS_TAIL_BYTES), end=size) if size else b""
    except OSError:
        return None
    for line in reversed(data.split(b"\n")):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and _num(row.get("loss")) is not None:
            return float(row["loss"])
    return None


def headlines(roots, experiments: list[Experiment]) -> dict[tuple[int, str], Headline]:
    """Per experiment record, its headline: the best evaluation's bpb/loss and task scores, its last train loss."""
    pairs = _finished(experiments, is_evaluation)
    found, _ = _read_results(roots, pairs)
    results = [
        _result(exp, step, found[(exp.root_index, step.rel)])
        for exp, step in pairs
        if (exp.root_index, step.rel) in found
    ]
    out: dict[tuple[int, str], Headline] = {}
    for r in results:
        key = (r.experiment.root_index, r.experiment.rel)
        h = out.setdefault(key, Headline())
        bpb, loss = r.metrics.get("macro_bpb"), r.metrics.get("macro_loss")
        if bpb is not None and (h.bpb is None or bpb < h.bpb):
            h.bpb, h.loss = bpb, loss
        elif h.bpb is None and loss is not None and (h.loss is None or loss < h.loss):
            h.loss = loss
        for task, score in r.tasks.items():
            h.tasks[task] = max(score, h.tasks.get(task, score))
    for key, loss in last_train_losses(roots, experiments).items():
        out.setdefault(key, Headline()).train_loss = loss
    return out


CHECK_FILE = "check.json"


def forecast_checks(roots, index: int, forecast_rel: str) -> list[dict]:
    """The `check.json` of every finished forecast-check step that read this forecast step (any record)."""
    experiments, _ = list_experiments(roots)
    rels = sorted(
        {
            step.rel
            for exp in experiments
            if exp.root_index == index
            for step in exp.steps
            if step.state == State.SUCCESS and "forecast_check" in _fn(step) and forecast_rel in step.deps
        }
    )
    root = roots.get(index)
    blobs = read_many(root.fs, [f"{root.join(rel)}/{CHECK_FILE}" for rel in rels])
    checks = []
    for data in blobs.values():
        if isinstance(data, bytes | bytearray):
            try:
                check = loads(data, CHECK_FILE)
            except Exception:  # noqa: BLE001 - an unreadable check is left out of the picture
                continue
            if isinstance(check, dict):
                checks.append(check)
    return checks
