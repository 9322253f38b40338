"""`marin status PREFIX`: the experiments recorded under a prefix and the state of each of their steps."""

from __future__ import annotations

import json
import sys

from marin.execution.status import read_statuses
from marin.storage import join, list_dir, read_bytes, relative_to
from marin.storage.layout import EXPERIMENTS_DIR, ExperimentRecord, RecordFormatError, is_record_name


def load_record(path: str) -> dict:
    """An experiment record; a ValueError names the file when it is missing or not a record."""
    data = read_bytes(path)
    if data is None:
        raise ValueError(f"no experiment record at {path}")
    try:
        record = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    try:
        ExperimentRecord.from_json(record, path).step_records(path)
    except RecordFormatError as exc:
        raise ValueError(f"{path} is not an experiment record: {exc}") from None
    return record


def record_paths(prefix: str) -> list[str]:
    folder = join(prefix, EXPERIMENTS_DIR)
    return [join(folder, n) for n in list_dir(folder) if is_record_name(n)]


def print_status(prefix: str, file=None) -> int:
    file = file or sys.stdout
    if "://" not in prefix:
        import os

        prefix = os.path.abspath(prefix)
    paths = record_paths(prefix)
    if not paths:
        print(f"no experiment records under {join(prefix, EXPERIMENTS_DIR)}", file=file)
        return 1
    for path in paths:
        try:
            record = load_record(path)
        except ValueError as exc:
            print(f"! {exc}", file=file)
            continue
        steps = record["steps"]
        outputs = [join(prefix, s["relative_output_path"]) for s in steps]
        states = read_statuses(outputs)
        shown = [(s, "") if s else _unfinished(step, o) for step, o, s in zip(steps, outputs, states, strict=True)]
        counts: dict[str, int] = {}
        for label, _ in shown:
            counts[label] = counts.get(label, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        print(f"{relative_to(path, prefix)}  ({record.get('created', '?')}, {summary})", file=file)
        for step, (label, note) in zip(steps, shown, strict=True):
            print(f"  {label:<10} {step['relative_output_path']}{note}", file=file)
    return 0


def _unfinished(step: dict, output: str) -> tuple[str, str]:
    """How a step without a state reads: `not run`, or `interrupted` when an attempt left its folder, with a
    training's progress (`at step 60 of 300; a rerun resumes from the checkpoint of step 50`)."""
    from marin.storage.staging import attempts

    if not attempts(output):
        return "not run", ""
    config = step.get("config") if isinstance(step.get("config"), dict) else {}
    total = config.get("num_train_steps")
    if not isinstance(total, int):
        return "interrupted", "  (an attempt was stopped before it finished; a rerun resumes it)"
    from marin.training.checkpoints import unfinished_training

    logged, resume = unfinished_training(output) or (None, None)
    at = f"at step {logged} of {total}" if logged is not None else f"before its first step of {total}"
    then = (
        f"a rerun resumes from the checkpoint of step {resume}"
        if resume is not None
        else ("no checkpoint yet: a rerun starts again from step 0")
    )
    return "interrupted", f"  ({at}; {then})"
