"""The dedup step: planted exact and near duplicates removed, uniques kept, determinism, resume, bad input."""

from __future__ import annotations

import json
import logging
import random

import pytest

import marin.processing.dedup_stages as dedup_stages
from marin.processing.dedup import DedupConfig, MinHashConfig, dedup_documents
from marin.processing.documents import BadDocumentError
from tests.data_docs import doc, english_doc, read_shard, tree_bytes, write_shard


def _near(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    for i in rng.sample(range(len(words)), k=max(1, len(words) // 50)):
        words[i] = "changed"
    return " ".join(words)


def _corpus(root, n_shards=3, unique_per_shard=8):
    """Unique docs in every shard; later shards hold exact copies (also re-cased/re-spaced) and near copies."""
    rng = random.Random(7)
    uniques = [[doc(f"u{s}-{i}", english_doc(rng, 200)) for i in range(unique_per_shard)] for s in range(n_shards)]
    flat = [d for shard in uniques for d in shard]
    planted = {}
    for k, original in enumerate(flat[:: max(1, len(flat) // 6)][:6]):
        target = (k % (n_shards - 1)) + 1
        if k % 3 == 0:
            copy = doc(f"exact-{k}", original["text"])
        elif k % 3 == 1:
            copy = doc(f"exact-recased-{k}", "  " + original["text"].upper().replace(" ", "  \n"))
        else:
            copy = doc(f"near-{k}", _near(rng, original["text"]))
        if int(original["id"][1]) >= target:
            target = n_shards - 1
        uniques[target].append(copy)
        planted[copy["id"]] = original["id"]
    for s in range(n_shards):
        write_shard(root / f"part-{s:05d}.jsonl.gz", uniques[s])
    return planted, [d["id"] for d in flat]


def _kept_ids(out, n):
    return [d["id"] for i in range(n) for d in read_shard(out / f"part-{i:05d}.jsonl.gz")]


def test_planted_exact_and_near_duplicates_are_removed_and_unique_docs_kept(tmp_path):
    planted, uniques = _corpus(tmp_path / "in")
    stats = dedup_documents(DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))

    removed = {
        json.loads(line)["id"]: json.loads(line)
        for line in (tmp_path / "out" / "removed_ids.jsonl").read_text().splitlines()
    }
    kept = _kept_ids(tmp_path / "out", 3)
    recall = len(set(removed) & set(planted)) / len(planted)
    precision = len(set(removed) & set(planted)) / len(removed)
    assert recall == 1.0 and precision == 1.0
    assert kept == uniques
    assert all(removed[i]["duplicate_of"] == planted[i] for i in removed)
    assert {removed[i]["reason"] for i in removed if i.startswith("exact")} == {"exact"}
    assert {removed[i]["reason"] for i in removed if i.startswith("near")} == {"fuzzy"}
    n_exact = sum(i.startswith("exact") for i in planted)
    assert stats["exact"]["removed"] == n_exact
    assert stats["fuzzy"]["removed"] == len(planted) - n_exact
    assert stats["fuzzy"]["clusters"] == len(planted) - n_exact
    assert stats["documents"] == len(uniques) + len(planted) and stats["kept"] == len(uniques)
    assert not (tmp_path / "out" / ".work").exists()


def test_fuzzy_only_still_clusters_exact_copies(tmp_path):
    planted, uniques = _corpus(tmp_path / "in")
    stats = dedup_documents(
        DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"), exact=False)
    )
    assert _kept_ids(tmp_path / "out", 3) == uniques
    assert stats["exact"]["removed"] == 0 and stats["fuzzy"]["removed"] == len(planted)


def test_exact_only_leaves_near_duplicates(tmp_path):
    planted, _ = _corpus(tmp_path / "in")
    dedup_documents(DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"), fuzzy=None))
    kept = set(_kept_ids(tmp_path / "out", 3))
    assert {p for p in planted if p.startswith("near")} <= kept
    assert not {p for p in planted if p.startswith("exact")} & kept


def test_dedup_output_bytes_identical_across_one_and_two_workers_and_reruns(tmp_path):
    _corpus(tmp_path / "in")
    outs = []
    for name, workers in [("a", 1), ("b", 2), ("c", 1)]:
        cfg = DedupConfig(
            input_path=str(tmp_path / "in"),
            output_path=str(tmp_path / name),
            workers=workers,
            fuzzy=MinHashConfig(num_buckets=4),
        )
        dedup_documents(cfg)
        outs.append(tree_bytes(tmp_path / name))
    assert outs[0] == outs[1] == outs[2]


def test_a_crash_while_writing_resumes_redoing_only_the_missing_shards(tmp_path, monkeypatch, caplog):
    _corpus(tmp_path / "in", n_shards=4)
    cfg = DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"))
    real_stream = dedup_stages.DocumentStream
    opened = []

    class CrashOnThirdShard(real_stream):
        def __init__(self, raw):
            opened.append(1)
            if len(opened) == 3:
                raise RuntimeError("simulated crash while writing shard 3 of 4")
            super().__init__(raw)

    monkeypatch.setattr(dedup_stages, "DocumentStream", CrashOnThirdShard)
    with pytest.raises(RuntimeError, match="simulated crash"):
        dedup_documents(cfg)
    out = tmp_path / "out"
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}
    assert sorted(before) == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    assert not list(out.glob(".tmp-*"))

    monkeypatch.setattr(dedup_stages, "DocumentStream", real_stream)
    caplog.set_level(logging.INFO)
    dedup_documents(cfg)
    written = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("wrote shard")]
    assert written == ["part-00002.jsonl.gz", "part-00003.jsonl.gz"]
    skipped = [r.getMessage() for r in caplog.records if "already done" in r.getMessage()]
    assert [m.split(":")[1].strip() for m in skipped] == ["scan", "exact", "buckets", "resolve", "filter"]
    assert {p: (out / p).stat().st_mtime_ns for p in before} == before

    dedup_documents(DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "fresh")))
    assert tree_bytes(out) == tree_bytes(tmp_path / "fresh")


def test_a_non_utf8_line_fails_naming_the_file_or_is_counted_when_skipping(tmp_path):
    rng = random.Random(3)
    write_shard(
        tmp_path / "in" / "part-00000.jsonl.gz",
        [doc("a", english_doc(rng, 80))],
        raw_lines=[b'{"id": "b", "text": "caf\xe9"}\n'],
    )
    with pytest.raises(BadDocumentError, match=r"part-00000\.jsonl\.gz:2: not_utf8"):
        dedup_documents(DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))
    stats = dedup_documents(
        DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out2"), skip_bad_documents=True)
    )
    assert stats["documents"] == 1 and stats["skipped_bad_documents"] == {"not_utf8": 1}
