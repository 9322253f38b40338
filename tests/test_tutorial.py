"""The tutorial end to end (small settings), rerun from its record into another prefix, verified identical.

This is the open-lab promise in one test: a run's record is enough to rebuild every step elsewhere and
prove, file by file, that the same bytes came out.
"""

from __future__ import annotations

import json
import os

import pytest

from marin.execution import Executor
from marin.tools.verify import compare_records
from tests.cli_support import marin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = {"plays": ("hamlet", "macbeth", "othello"), "vocab_size": 512, "num_train_steps": 6, "train_batch_size": 4}


@pytest.fixture(scope="module")
def tutorial_run(tmp_path_factory):
    from experiments.tutorial.tiny_lm import build

    prefix = str(tmp_path_factory.mktemp("tutorial") / "A")
    steps = build(**SMALL)
    executor = Executor(prefix, backend="local", experiment_name="tiny_lm", script="experiments/tutorial/tiny_lm.py")
    paths = executor.run([steps["eval"]])
    return prefix, paths.record_path, steps, paths


def test_tutorial_runs_every_step_and_evaluates(tutorial_run):
    prefix, record_path, steps, paths = tutorial_run
    results = json.load(open(os.path.join(paths[steps["eval"]], "results.json")))
    assert results["datasets"]["shakespeare"]["bpb"] > 0 and results["step"] == SMALL["num_train_steps"] - 1
    dedup_stats = json.load(open(os.path.join(paths[steps["deduped"]], "stats.json")))
    assert json.dumps(dedup_stats).count("removed") >= 1
    record = json.load(open(record_path))
    assert [s["name"].split("/")[0] for s in record["steps"]] == [
        "sources",
        "raw",
        "filtered",
        "deduped",
        "tokenizers",
        "tokenized",
        "checkpoints",
        "evaluation",
    ]


def test_tutorial_reruns_from_its_record_bit_for_bit_and_the_rerun_reruns_too(tutorial_run, tmp_path):
    """A -> B -> C: the rerun's record names the same code, so it can be rerun in turn; the training's
    losses (in its volatile metrics.jsonl) match along with every other byte."""
    prefix, record_path, steps, paths = tutorial_run
    b, c = str(tmp_path / "B"), str(tmp_path / "C")
    rerun = marin("rerun", record_path, "--prefix", b, "--backend", "local")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    b_record = os.path.join(b, "experiments", os.path.basename(record_path))
    verify = marin("verify", record_path, b_record)
    assert verify.returncode == 0, verify.stdout
    assert "8 identical of 8 steps" in verify.stdout and "compared without timings" in verify.stdout
    again = marin("rerun", b_record, "--prefix", c, "--backend", "local")
    assert again.returncode == 0, again.stdout + again.stderr
    c_record = os.path.join(c, "experiments", os.path.basename(record_path))
    assert [s["fn"] for s in json.load(open(c_record))["steps"]] == [
        s["fn"] for s in json.load(open(record_path))["steps"]
    ]
    verify = marin("verify", record_path, c_record)
    assert verify.returncode == 0, verify.stdout
    assert "8 identical of 8 steps" in verify.stdout


def test_changed_tokenizer_vocab_names_that_step_and_its_descendants_only(tutorial_run, tmp_path):
    from experiments.tutorial.tiny_lm import build

    prefix, record_path, steps, paths = tutorial_run
    changed = build(**{**SMALL, "vocab_size": 384})
    b = str(tmp_path / "B")
    executor = Executor(b, backend="local", experiment_name="tiny_lm", script="experiments/tutorial/tiny_lm.py")
    changed_record = executor.run([changed["eval"]]).record_path
    verdicts = {c.name.split("/")[0]: c.verdict for c in compare_records(record_path, changed_record)}
    assert verdicts == {
        "sources": "identical",
        "raw": "identical",
        "filtered": "identical",
        "deduped": "identical",
        "tokenizers": "differs",
        "tokenized": "differs",
        "checkpoints": "differs",
        "evaluation": "differs",
    }
    verify = marin("verify", record_path, changed_record)
    assert verify.returncode == 1 and "first difference in topological order: tokenizers/" in verify.stdout
