"""Runs hello_world's two steps and a filter step over a small corpus under a given umask (a subprocess of
tests/test_umask.py: the umask is per process)."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from experiments.tutorial.hello_world import GenerateConfig, StatsConfig, compute_stats, generate
from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, output_path_of, versioned
from marin.processing.filter import FilterConfig, filter_documents
from tests.data_docs import doc, english_doc, write_shard


def main(prefix: str, corpus: str) -> None:
    rng = random.Random(0)
    for s in range(2):
        write_shard(Path(corpus) / f"part-{s:05d}.jsonl.gz", [doc(f"d{s}-{i}", english_doc(rng, 80)) for i in range(3)])
    docs = ExecutorStep("hello/docs", generate, GenerateConfig(n=versioned(20)))
    stats = ExecutorStep("hello/stats", compute_stats, StatsConfig(input_path=output_path_of(docs, "docs.jsonl")))
    filtered = ExecutorStep(
        "data/filtered", filter_documents, FilterConfig(input_path=corpus, output_path=THIS_OUTPUT_PATH)
    )
    Executor(prefix, backend="local", experiment_name="umask").run([stats, filtered])


if __name__ == "__main__":
    os.umask(int(sys.argv[1], 8))
    main(sys.argv[2], sys.argv[3])
