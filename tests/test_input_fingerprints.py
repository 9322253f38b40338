"""A local input changed at the same path: the step keeps its hash and stays succeeded, and `marin plan` says
the input changed (its fingerprint, size and modification time, is recorded in `.executor_info`)."""

from __future__ import annotations

import json
import os

from marin.execution import Executor, ExecutorStep, this_output_path
from marin.processing.filter import FilterConfig, filter_documents
from marin.storage import join, read_bytes
from tests.data_docs import doc, write_shard


def _filter(corpus: str) -> ExecutorStep:
    config = FilterConfig(
        input_path=corpus, output_path=this_output_path(), gopher_quality=None, gopher_repetition=None
    )
    return ExecutorStep("filtered/local", filter_documents, config)


def _plan(executor: Executor, step: ExecutorStep, capsys) -> list[str]:
    executor.run([step], dry_run=True)
    return capsys.readouterr().out.splitlines()


def test_plan_says_a_local_input_folder_changed_since_the_step_ran_and_keeps_the_step(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    write_shard(corpus / "part-00000.jsonl.gz", [doc(f"a-{i}", f"Document {i}.") for i in range(30)])
    step = _filter(str(corpus))
    executor = Executor(str(tmp_path / "lab"), backend="local")
    (out,) = executor.run([step]).values()
    recorded = json.loads(read_bytes(join(out, ".executor_info")))["input_fingerprints"]
    assert list(recorded) == [str(corpus)] and recorded[str(corpus)]["files"] == 1
    capsys.readouterr()

    assert not [line for line in _plan(executor, step, capsys) if "input changed" in line]

    write_shard(corpus / "part-00001.jsonl.gz", [doc(f"b-{i}", f"Document {i}.") for i in range(30)])
    lines = _plan(executor, step, capsys)
    (warning,) = [line for line in lines if "input changed" in line]
    assert warning.startswith(f"WARNING: input changed since filtered/local-{out[-8:]} ran: {corpus} (files 1 -> 2")
    assert "delete its output folder to run it again" in warning
    assert any(line.split()[:2] == ["skip", f"filtered/local-{out[-8:]}"] for line in lines), lines
    assert executor.plan([step])[step] == out  # the hash names the path, not the bytes


def test_a_file_rewritten_with_the_same_size_is_seen_by_its_modification_time(tmp_path, capsys):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(doc("a", "Same length text.")) + "\n")
    os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    step = _filter(str(path))
    executor = Executor(str(tmp_path / "lab"), backend="local")
    executor.run([step])
    capsys.readouterr()
    path.write_text(json.dumps(doc("a", "Other text, same.")) + "\n")
    (warning,) = [line for line in _plan(executor, step, capsys) if "input changed" in line]
    assert f"{path} (modified " in warning
