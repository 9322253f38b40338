"""experiments/tutorial/quality_filter.py: the research data steps run end to end under the executor."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.tutorial.quality_filter import build
from marin.execution import Executor
from tests.data_docs import read_shard


def test_the_quality_filter_experiment_plans_and_runs_on_a_tiny_corpus(tmp_path):
    steps = build(train_plays=("macbeth",), target_plays=("the-tempest",))
    lab = str(tmp_path / "lab")
    planned = Executor(lab, backend="local").plan([steps["clean"]])
    assert {Path(p).parent.name for p in planned.values()} >= {"classifiers", "quality", "decontaminated", "evals"}

    out = Executor(lab, backend="local").run([steps["clean"]])
    paths = {role: Path(out[step]) for role, step in steps.items()}
    for path in paths.values():
        assert (path / ".executor_status").read_text().strip() == "SUCCESS"

    info = json.loads((paths["classifier"] / "classifier_info.json").read_text())
    assert info["validation"]["accuracy"] >= 0.9

    kept_stats = json.loads((paths["kept"] / "stats.json").read_text())
    kept = [d for p in sorted(paths["kept"].glob("part-*.jsonl.gz")) for d in read_shard(p)]
    assert kept and kept_stats["kept"] == len(kept)
    assert sum(d["metadata"]["garbled"] for d in kept) <= 0.1 * len(kept)
    mixed = [d for p in sorted(paths["mixed"].glob("part-*.jsonl.gz")) for d in read_shard(p)]
    real = [d for d in mixed if not d["metadata"]["garbled"]]
    assert len([d for d in kept if not d["metadata"]["garbled"]]) >= 0.8 * len(real)

    clean_stats = json.loads((paths["clean"] / "stats.json").read_text())
    report = [json.loads(x) for x in (paths["clean"] / "contamination.jsonl").read_text().splitlines()]
    quoted = {d["id"]: d["metadata"]["quoted_from"] for d in read_shard(paths["eval_set"] / "part-00000.jsonl.gz")}
    kept_ids = {d["id"] for d in kept}
    assert report and clean_stats["contaminated"] == len({r["id"] for r in report})
    for r in report:  # every overlap: a kept scene and the passage quoted from it (or from a planted copy of it)
        assert r["id"] in kept_ids and r["ngrams"] >= 20
        assert r["id"].split("/dup-")[0] == quoted[r["eval_id"]].split("/dup-")[0]
    quoted_and_kept = {src for src in quoted.values() if src in kept_ids}
    assert quoted_and_kept <= {r["id"] for r in report}
    clean_ids = {d["id"] for p in paths["clean"].glob("part-*.jsonl.gz") for d in read_shard(p)}
    assert clean_ids == kept_ids - {r["id"] for r in report}
