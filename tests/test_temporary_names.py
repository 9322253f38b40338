"""Names starting with `.tmp-` are writes in progress: a step output named so fails the step, naming it, on every
storage, instead of being left out of the published output or its manifest; an attempt that adopts an earlier
one's files leaves that attempt's unfinished writes behind, and says so."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pytest

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorRunError, ExecutorStep, versioned
from marin.storage import join, read_bytes, read_text, write_bytes
from marin.storage.staging import adopt


@dataclass(frozen=True)
class NamesConfig:
    names: tuple[str, ...] = ()
    """Files to write besides `ok.txt`."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def write_names(config: NamesConfig) -> None:
    write_bytes(join(config.output_path, "ok.txt"), b"ok")
    for name in config.names:
        write_bytes(join(config.output_path, name), b"written by the step")


def test_an_output_named_tmp_fails_the_step_naming_it_and_publishes_nothing(prefix):
    names = (".tmp-notes.txt", ".tmp-cache/a.txt", "sub/.tmp-part")
    step = ExecutorStep("tmp/names", write_names, NamesConfig(names=versioned(names)))
    executor = Executor(prefix, backend="local")
    with pytest.raises(ExecutorRunError) as err:
        executor.run([step])
    (outcome,) = err.value.result.outcomes.values()
    assert outcome.status == "FAILED"
    assert "TemporaryNamesError" in outcome.error
    assert "3 file(s) or folder(s) named .tmp-*" in outcome.error
    for name in (".tmp-cache", ".tmp-notes.txt", "sub/.tmp-part"):
        assert name in outcome.error
    (out,) = executor.plan([step]).values()
    assert read_text(join(out, ".executor_status")) == "FAILED"
    assert read_bytes(join(out, "ok.txt")) is None

    plain = ExecutorStep("tmp/plain", write_names, NamesConfig(names=versioned(("sub/part",))))
    (out,) = executor.run([plain]).values()
    assert read_text(join(out, ".executor_status")) == "SUCCESS"


def test_adopting_an_earlier_attempt_leaves_its_unfinished_writes_behind_and_names_them(tmp_path, caplog):
    previous, target = tmp_path / "out" / ".executor_attempt.001-aaaaaaaa", tmp_path / "out" / "next"
    (previous / "sub").mkdir(parents=True)
    (previous / "data.txt").write_text("done")
    (previous / ".tmp-abcd1234.part-00001.jsonl.gz").write_bytes(b"half a shard")
    (previous / "sub" / ".tmp-x").write_bytes(b"half")
    (previous / "sub" / "kept.txt").write_text("done")
    caplog.set_level(logging.WARNING, logger="marin.storage.staging")

    adopt(str(previous), str(target))

    copied = sorted(os.path.relpath(os.path.join(d, f), target) for d, _, fs in os.walk(target) for f in fs)
    assert copied == ["data.txt", "sub/kept.txt"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert ".tmp-abcd1234.part-00001.jsonl.gz, sub/.tmp-x" in warning and "not resumed" in warning
    assert not previous.exists()
