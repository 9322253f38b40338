"""`--rerun_code_changed` reruns a data step from an empty output: the new code's bytes are published.

A data step resumes from the shards it finds in its output folder (DESIGN.md §8). A rerun with new
code must not find the old code's shards there, or it keeps the old bytes under a record that says new
code made them.
"""

from __future__ import annotations

import importlib
import json
import random
import sys

from marin.execution import Executor, ExecutorStep, this_output_path
from marin.processing.filter import FilterConfig
from marin.storage import compute_manifest, join, read_bytes, read_text
from tests.data_docs import doc, english_doc, read_shard, write_shard

STEP_MODULE = """
from dataclasses import replace

from marin.processing.filter import GopherQualityConfig, filter_documents

MIN_WORDS = {min_words}


def length_filter(config):
    return filter_documents(replace(config, gopher_quality=GopherQualityConfig(min_doc_words=MIN_WORDS)))
"""


def corpus(root):
    rng = random.Random(0)
    for s in range(2):
        docs = [doc(f"long-{s}-{i}", english_doc(rng, 200)) for i in range(3)]
        docs += [doc(f"medium-{s}-{i}", english_doc(rng, 60)) for i in range(3)]
        write_shard(root / f"part-{s:05d}.jsonl.gz", docs)


def load_step(tmp_path, min_words: int, corpus_dir):
    (tmp_path / "fresh_steps.py").write_text(STEP_MODULE.format(min_words=min_words))
    if str(tmp_path) not in sys.path:
        sys.path.insert(0, str(tmp_path))
    sys.modules.pop("fresh_steps", None)
    importlib.invalidate_caches()
    module = importlib.import_module("fresh_steps")
    config = FilterConfig(input_path=str(corpus_dir), output_path=this_output_path(), gopher_repetition=None)
    return ExecutorStep("filtered/by_length", module.length_filter, config)


def kept_ids(out: str) -> set[str]:
    from pathlib import Path

    return {d["id"] for p in sorted(Path(out).glob("part-*.jsonl.gz")) for d in read_shard(p)}


def test_a_code_changed_rerun_of_a_filter_publishes_the_new_codes_shards(tmp_path):
    corpus(tmp_path / "corpus")
    prefix = str(tmp_path / "lab")
    try:
        first = load_step(tmp_path, 50, tmp_path / "corpus")
        (out,) = Executor(prefix, backend="local").run([first]).values()
        assert len(kept_ids(out)) == 12
        stricter = load_step(tmp_path, 150, tmp_path / "corpus")
        result = Executor(prefix, backend="local").run([stricter], rerun_code_changed=True)
    finally:
        sys.modules.pop("fresh_steps", None)
        sys.path.remove(str(tmp_path))
    assert result.outcomes[stricter].status == "SUCCESS"
    assert kept_ids(out) == {f"long-{s}-{i}" for s in range(2) for i in range(3)}
    assert read_text(join(out, ".executor_status")) == "SUCCESS"
    manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
    assert manifest["files"] == compute_manifest(out)["files"]
