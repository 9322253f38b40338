"""The typed storage contract (`marin.storage.layout`): what a run writes reads back through it exactly."""

from __future__ import annotations

import json
import os
import re

import pytest

from marin.execution import Executor, ExecutorStep, output_path_of, versioned
from marin.storage import list_dir, read_bytes
from marin.storage.layout import (
    HASH_PATTERN,
    ExperimentRecord,
    LeaseRecord,
    RecordFormatError,
    RunLine,
    State,
    StepRecord,
    info_path,
    runs_file,
    status_path,
)
from tests.executor_steps import CountConfig, count_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _chain():
    a = ExecutorStep("layout/a", count_step, CountConfig(value=versioned(1)))
    b = ExecutorStep("layout/b", count_step, CountConfig(value=versioned(2), inputs=[output_path_of(a)]))
    return a, b


def test_records_a_run_writes_round_trip_through_the_typed_views(tmp_path, prefix):
    a, b = _chain()
    Executor(prefix, backend="local").run([b])
    names = [n for n in list_dir(f"{prefix}/experiments") if n.endswith(".json")]
    assert len(names) == 1
    record_path = f"{prefix}/experiments/{names[0]}"
    raw = json.loads(read_bytes(record_path))

    record = ExperimentRecord.from_json(raw, record_path)
    assert record.to_json() == raw
    steps = record.step_records(record_path)
    assert [s.name for s in steps] == ["layout/a", "layout/b"]
    for step in steps:
        assert HASH_PATTERN.match(step.identity)
        assert State.parse(read_bytes(status_path(step.output_path))) is State.SUCCESS
        info = json.loads(read_bytes(info_path(step.output_path)))
        assert StepRecord.from_json(info).identity == step.identity

    lines = read_bytes(runs_file(record_path)).decode().splitlines()
    run = RunLine.from_json(json.loads(lines[-1]))
    assert set(run.steps) == {s.identity for s in steps}
    assert {v["outcome"] for v in run.steps.values()} == {"SUCCESS"}


def test_strict_reading_names_the_file_and_the_missing_or_mistyped_field():
    with pytest.raises(RecordFormatError, match=r"rec\.json: steps\[0\]: field 'fn' is missing"):
        ExperimentRecord.from_json(
            {"steps": [{"name": "x", "hash": "0" * 8, "output_path": "/p/x"}]}, "rec.json"
        ).step_records("rec.json")
    with pytest.raises(RecordFormatError, match=r"lease: field 'pid' should be int \| None, got str"):
        LeaseRecord.from_json({"owner": "o", "pid": "12"}, "lease")
    tolerant = LeaseRecord.from_json({"owner": "o", "pid": "12", "new_field": 1}, "lease", strict=False)
    assert tolerant.pid is None and tolerant.extra == {"new_field": 1}


def test_state_parse_accepts_only_the_four_tokens():
    assert State.parse(b"SUCCESS\n") is State.SUCCESS
    assert State.parse("DEP_FAILED") is State.DEP_FAILED
    assert State.parse(b"") is None
    assert State.parse(b"success") is None
    assert State.parse(None) is None


def test_no_module_outside_the_layout_spells_the_executor_file_names():
    """The `.executor_*` names, the hash pattern and the lease defaults live in marin/storage/layout.py only."""
    spelled = re.compile(r"""["'][^"'\s]*\.executor_(status|info|lease|manifest|logs|attempt|trash)|\[0-9a-f\]\{8\}""")
    offenders = []
    for folder, _, files in os.walk(os.path.join(REPO, "marin")):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path.endswith(os.path.join("storage", "layout.py")):
                continue
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    code = line.split("#", 1)[0]
                    if spelled.search(code):
                        offenders.append(f"{os.path.relpath(path, REPO)}:{number}: {line.strip()}")
    assert not offenders, "spell these through marin.storage.layout:\n" + "\n".join(offenders)
