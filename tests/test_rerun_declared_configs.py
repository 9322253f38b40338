"""`marin rerun` rebuilds the step library's configs with their declarations, and checks their inputs again.

A record holds each step's instantiated config and its class; a rerun rebuilds the class, so what the class
declares (versioned, unversioned, inputs) comes back with it and the rebuilt steps hash as recorded. A
plain input the record names is checked at the start of the rerun like at the start of any run.
"""

from __future__ import annotations

import json

from experiments.defaults import default_dedup, default_download
from marin.execution import Executor, ExecutorStep
from marin.processing.dedup import DedupConfig
from marin.stepkit.config import StepConfig
from marin.tools.rebuild import rebuild_steps
from tests.cli_support import marin
from tests.data_docs import write_shard


def note(config) -> None:
    """A step without a config (Marin's `config=None`)."""
    assert config is None


def _experiment(source: str) -> list[ExecutorStep]:
    raw = default_download("corpus", source, glob="*.jsonl.gz", workers=2)
    deduped = default_dedup("corpus", raw, fuzzy=None, workers=2)
    return [deduped, ExecutorStep("notes/none", note, None)]


def test_a_rerun_rebuilds_declared_configs_and_none_and_checks_plain_inputs(tmp_path):
    source = tmp_path / "source"
    docs = [{"id": str(i), "text": f"document {i % 3}", "source": "t", "metadata": {}} for i in range(6)]
    write_shard(source / "part-00000.jsonl.gz", docs)
    executor = Executor(str(tmp_path / "A"), backend="local", experiment_name="declared")
    record_path = executor.run(_experiment(str(source))).record_path
    record = json.loads(open(record_path).read())
    by_name = {entry["name"]: entry for entry in record["steps"]}
    assert by_name["raw/corpus"]["version"]["config"]["source"] == str(source)
    assert "workers" not in by_name["deduped/corpus"]["version"]["config"]
    assert by_name["notes/none"]["config"] is None and by_name["notes/none"]["config_type"] is None

    rebuilt = {s.name: s for s in rebuild_steps(record, str(tmp_path / "B"))}
    assert isinstance(rebuilt["deduped/corpus"].config, DedupConfig)
    assert isinstance(rebuilt["deduped/corpus"].config, StepConfig)
    assert rebuilt["notes/none"].config is None

    result = marin("rerun", record_path, "--prefix", str(tmp_path / "B"), "--backend", "local")
    assert result.returncode == 0, result.stdout + result.stderr
    b_record = next((tmp_path / "B" / "experiments").glob("declared-*.json"))
    verify = marin("verify", record_path, str(b_record))
    assert verify.returncode == 0, verify.stdout

    (source / "part-00000.jsonl.gz").unlink()
    source.rmdir()
    result = marin("rerun", record_path, "--prefix", str(tmp_path / "C"), "--backend", "local")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: step 'raw/corpus': input source (download source) {source} does not exist"
    )
    assert not (tmp_path / "C").exists()
