"""experiments/defaults.py: the data steps as executor steps, run end to end on two plays."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.defaults import (
    default_dedup,
    default_download,
    default_filter,
    default_tokenize,
    default_tokenizer,
    shakespeare_source,
)
from marin.execution import Executor


def _pipeline(vocab_size=400):
    source = shakespeare_source(plays=("macbeth", "the-tempest"), num_shards=3)
    raw = default_download("shakespeare-mini", source)
    filtered = default_filter("shakespeare-mini", raw)
    deduped = default_dedup("shakespeare-mini", filtered)
    tok = default_tokenizer("shakespeare-mini", deduped, vocab_size=vocab_size)
    tokenized = default_tokenize("shakespeare-mini", deduped, tok, validation_fraction=0.1)
    return source, raw, filtered, deduped, tok, tokenized


def test_data_steps_run_end_to_end_under_the_executor_and_hash_only_what_they_depend_on(tmp_path):
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig

    steps = _pipeline()
    paths = Executor(str(tmp_path / "lab"), backend="local").run([steps[-1]])
    source, raw, filtered, deduped, tok, tokenized = (Path(paths[s]) for s in steps)
    for p in (source, raw, filtered, deduped, tok, tokenized):
        assert (p / ".executor_status").read_text().strip() == "SUCCESS"

    provenance = json.loads((raw / "provenance.json").read_text())
    assert [f["path"] for f in provenance["files"]] == [f"part-{i:05d}.jsonl.gz" for i in range(3)]
    filter_stats = json.loads((filtered / "stats.json").read_text())
    dedup_stats = json.loads((deduped / "stats.json").read_text())
    assert dedup_stats["documents"] == filter_stats["kept"]
    removed = [json.loads(line) for line in (deduped / "removed_ids.jsonl").read_text().splitlines()]
    assert removed and all("/dup-" in r["id"] for r in removed)
    info = json.loads((tokenized / "tokenize_info.json").read_text())
    assert (tokenized / info["tokenizer"]).resolve() == tok.resolve()
    assert json.loads((raw / "provenance.json").read_text())["source"].startswith("../")

    cfg = UrlSingleDatasetLMConfig(
        cache_dir=str(tokenized), tokenizer=str(tok), format=TextLmDatasetFormat(), train_urls=[], validation_urls=[]
    )
    stats = json.loads((tokenized / "stats.json").read_text())
    log = (tokenized / ".executor_logs" / "001.log").read_text()
    assert log.count("tokenized shard") == 3, log  # logged on tokenize's shard threads, kept in the step's log
    assert len(cfg.build_or_load_cache("train", monitors=False)) == stats["train"]["documents"]
    assert stats["train"]["documents"] + stats["validation"]["documents"] == dedup_stats["kept"]

    again = Executor(str(tmp_path / "lab"), backend="local")
    assert again.run([steps[-1]]) == paths
    planned = Executor(str(tmp_path / "lab"), backend="local").plan([_pipeline(vocab_size=512)[-1]])
    new_paths = sorted(planned.values())
    assert str(deduped) in new_paths and str(tok) not in new_paths and str(tokenized) not in new_paths
