"""Two filter steps in threads of one process, as the local backend runs two corpora's filters side by side.

datatrove's filters share one spaCy word tokenizer per language in a process, and spaCy is not thread-safe:
before the filter step's calls took turns, both steps failed with `[E109] Component 'sentencizer' could not
be run` (docs/your-own-data.md's experiment, two corpora, `--backend local`).
"""

from __future__ import annotations

import random
import threading

from marin.processing.filter import FilterConfig, filter_documents
from tests.data_docs import doc, english_doc, read_shard, write_shard


def test_two_filter_steps_in_threads_of_one_process_both_succeed_as_one_alone_does(tmp_path):
    rng = random.Random(0)
    for corpus in ("web", "news"):
        docs = [doc(f"{corpus}/{i}", english_doc(rng, 200)) for i in range(20)] + [doc(f"{corpus}/short", "Exeunt.")]
        write_shard(tmp_path / corpus / "part-00000.jsonl.gz", docs)
    configs = {
        c: FilterConfig(input_path=str(tmp_path / c), output_path=str(tmp_path / "out" / c)) for c in ("web", "news")
    }
    errors: dict[str, BaseException] = {}
    start = threading.Barrier(2)

    def run(name: str) -> None:
        start.wait()
        try:
            filter_documents(configs[name])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in configs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    for name in configs:
        kept = read_shard(tmp_path / "out" / name / "part-00000.jsonl.gz")
        assert len(kept) == 20 and f"{name}/short" not in {d["id"] for d in kept}
