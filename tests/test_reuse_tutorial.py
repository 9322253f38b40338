"""The tutorial in a second lab: its six data steps are verified and reused from the first, none executed.

On a local folder lab A runs the tutorial's data steps (small settings); lab B, with a training setting
changed (`num_train_steps`), runs the whole tutorial with `cache_from` lab A: the data steps are REUSED
byte-identical, training and evaluation run. On the GCS and S3 emulators only the data steps run in lab A (`run_only` the
tokenize step), and lab B reuses all six inside the same bucket (server-side copies).
"""

from __future__ import annotations

import json

import pytest

from marin.browser.lineage import made_from
from marin.execution import Executor
from marin.execution.reuse import CacheFrom
from marin.storage import join, read_bytes
from tests.test_tutorial import SMALL

DATA = ("source", "raw", "filtered", "deduped", "tokenizer", "tokenized")


def identical(a: str, b: str) -> bool:
    ma = json.loads(read_bytes(join(a, ".executor_manifest.json")))
    mb = json.loads(read_bytes(join(b, ".executor_manifest.json")))
    return ma["files"] == mb["files"] and all(
        read_bytes(join(a, f["path"])) == read_bytes(join(b, f["path"])) for f in ma["files"]
    )


def test_second_lab_reuses_the_six_data_steps_then_trains_and_evaluates(tmp_path):
    from experiments.tutorial.tiny_lm import build

    lab_a, lab_b = str(tmp_path / "lab-a"), str(tmp_path / "lab-b")
    a = build(**SMALL)
    # lab A's data steps are all lab B needs from it (one training in this test, lab B's)
    only = ["^" + a["tokenized"].name + "$"]
    paths_a = Executor(lab_a, backend="local", experiment_name="tiny_lm").run([a["eval"]], run_only=only)
    b = build(**{**SMALL, "num_train_steps": SMALL["num_train_steps"] + 2})
    result = Executor(lab_b, backend="local", experiment_name="tiny_lm", cache_from=CacheFrom(sources=(lab_a,))).run(
        [b["eval"]]
    )
    outcomes = {role: result.outcomes[b[role]].status for role in b}
    assert outcomes == {**dict.fromkeys(DATA, "REUSED"), "train": "SUCCESS", "eval": "SUCCESS"}
    for role in DATA:
        assert identical(paths_a[a[role]], result[b[role]]), role
    evaluation = json.loads(read_bytes(join(result[b["eval"]], "results.json")))
    assert evaluation["step"] == SMALL["num_train_steps"] + 1
    nodes = list(walk(made_from(result[b["eval"]])))
    downloads = [n for n in nodes if not n.inputs]
    assert downloads and all(n.manifest_sha256 for n in downloads) and downloads[0].source["plays"]
    assert any(n.fn.endswith(":download") and "source" in n.source and "revision" not in n.source for n in nodes)
    assert {n.identity for n in nodes if n.reused_from} == {
        b[role].name + "-" + result[b[role]].rsplit("-", 1)[1] for role in DATA
    }


def walk(node):
    yield node
    for child in node.inputs:
        yield from walk(child)


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_the_data_steps_are_reused_inside_one_bucket(store, bucket_prefix_factory):
    from experiments.tutorial.tiny_lm import build

    lab_a, lab_b = bucket_prefix_factory(store), bucket_prefix_factory(store)
    steps = build(**SMALL)
    only = ["^" + steps["tokenized"].name + "$"]
    paths_a = Executor(lab_a, backend="local", experiment_name="tiny_lm").run([steps["eval"]], run_only=only)
    executor = Executor(lab_b, backend="local", experiment_name="tiny_lm", cache_from=CacheFrom(sources=(lab_a,)))
    result = executor.run([steps["eval"]], run_only=only)
    assert {role: result.outcomes[steps[role]].status for role in DATA} == dict.fromkeys(DATA, "REUSED")
    for role in DATA:
        assert identical(paths_a[steps[role]], result[steps[role]]), role
