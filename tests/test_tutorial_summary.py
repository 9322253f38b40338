"""The tutorial's closing lines: its evaluation and a browse command that works, on a folder or a bucket.

The summary is read from the evaluation step's folder as the step writes it (`_write_results`, the step's
own writer), at the path the tutorial's plan gives; the full tutorial trains a model, so it is not run here
(tests/test_readme_commands.py runs a small one end to end).
"""

from __future__ import annotations

import os
import shlex
import sys
import urllib.request

import pytest

from experiments.tutorial.tiny_lm import build, run_summary
from marin.evaluation.evaluate import _write_results
from marin.execution import Executor
from tests.browse_process import browsing

RESULTS = {
    "checkpoint": "../../checkpoints/tiny-shakespeare-00000000/checkpoints/step-5",
    "datasets": {"shakespeare": {"bpb": 4.41, "bytes": 17116, "documents": 1, "loss": 5.92, "tokens": 8840}},
    "macro_bpb": 4.41,
    "macro_loss": 5.92,
    "step": 5,
}


def written_evaluation(prefix: str) -> str:
    evaluation = build()["eval"]
    path = Executor(prefix, backend="local").plan([evaluation])[evaluation]
    _write_results(path, RESULTS)
    return path


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_summary_on_a_bucket_prints_the_evaluation_and_a_browse_command_that_serves_it(bucket_prefix, store):
    prefix = bucket_prefix(store)
    path = written_evaluation(prefix)
    text = run_summary(path, "evaluation/tiny-shakespeare")
    assert f"evaluation ({path}/results.json):" in text and '"macro_bpb": 4.41' in text
    command = shlex.split(text.splitlines()[-1].removeprefix("browse it: "))
    assert command[1:] == ["browse", prefix]
    with browsing([sys.executable, "-m", "marin.cli", *command[1:], "--port", "0"], env=dict(os.environ)) as url:
        rel = path.removeprefix(prefix + "/")
        page = urllib.request.urlopen(f"{url}step/0/{rel}", timeout=60).read().decode()
    assert "tiny-shakespeare" in page and "4.41" in page


def test_summary_on_a_local_prefix_names_it_relative_to_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = written_evaluation(str(tmp_path / "local_store"))
    text = run_summary(path, "evaluation/tiny-shakespeare")
    assert '"macro_bpb": 4.41' in text
    assert text.splitlines()[-1].endswith(" browse local_store")


def test_summary_before_the_evaluation_ran_prints_only_the_browse_command(tmp_path):
    path = str(tmp_path / "lab" / "evaluation" / "tiny-shakespeare-00000000")
    text = run_summary(path, "evaluation/tiny-shakespeare")
    assert text.splitlines() == [text] and text.endswith(f" browse {tmp_path / 'lab'}")
