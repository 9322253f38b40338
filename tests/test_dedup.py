"""The dedup step: planted exact and near duplicates removed, uniques kept, determinism, resume, bad input."""

from __future__ import annotations

import json
import logging
import random
import unicodedata

import pytest

import marin.processing.dedup_stages as dedup_stages
from marin.processing.dedup import DedupConfig, MinHashConfig, dedup_documents
from marin.processing.documents import BadDocumentError
from tests.data_docs import VOLATILE, doc, english_doc, read_shard, tree_bytes, write_shard
from tests.planted_corpus import KINDS, PlantedCorpus, score, write_corpus


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


def test_dedup_output_bytes_identical_across_workers_partitions_and_reruns(tmp_path):
    _corpus(tmp_path / "in")
    outs = []
    for name, workers, partitions in [("a", 1, None), ("b", 2, 3), ("c", 1, 2)]:
        cfg = DedupConfig(
            input_path=str(tmp_path / "in"),
            output_path=str(tmp_path / name),
            workers=workers,
            partitions=partitions,
            fuzzy=MinHashConfig(num_buckets=4),
        )
        dedup_documents(cfg)
        # ledgers (where each task ran) are volatile, and their number follows the partitions
        outs.append({k: v for k, v in tree_bytes(tmp_path / name).items() if v != VOLATILE})
    assert outs[0] == outs[1] == outs[2]
    assert "removed_ids.jsonl" in outs[0] and "part-00002.jsonl.gz" in outs[0]


def test_partitioned_exact_stage_removes_what_one_global_dict_did(tmp_path):
    """The exact stage split over key partitions removes the same documents, as duplicates of the same
    first documents, as the earlier single pass with one dict of every key in the corpus."""
    _corpus(tmp_path / "in")
    first: dict[str, str] = {}
    expected = []
    for path in sorted((tmp_path / "in").glob("part-*")):
        for d in read_shard(path):
            key = " ".join(unicodedata.normalize("NFKC", d["text"]).lower().split())
            if key in first:
                expected.append({"duplicate_of": first[key], "id": d["id"], "reason": "exact"})
            else:
                first[key] = d["id"]
    assert len(expected) == 4
    for partitions in (1, 3):
        out = tmp_path / f"p{partitions}"
        dedup_documents(
            DedupConfig(input_path=str(tmp_path / "in"), output_path=str(out), fuzzy=None, partitions=partitions)
        )
        removed = [json.loads(line) for line in (out / "removed_ids.jsonl").read_text().splitlines()]
        assert removed == expected


def test_planted_copies_by_jaccard_similarity_recall_and_precision(tmp_path):
    """Copies at Jaccard >= 0.8 (and exact, re-cased ones) are removed; copies at <= 0.55 are kept."""
    spec = PlantedCorpus(shards=2, docs_per_shard=70, words=120, copy_every=5)
    truth = write_corpus(spec, str(tmp_path / "in"))
    assert {t["kind"] for t in truth} == set(KINDS)
    assert all(t["jaccard"] >= 0.8 for t in truth if t["kind"].startswith("near"))
    assert all(t["jaccard"] <= 0.55 for t in truth if t["kind"].startswith("far"))
    dedup_documents(DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))
    removed = {json.loads(line)["id"] for line in (tmp_path / "out" / "removed_ids.jsonl").read_text().splitlines()}
    result = score(truth, removed)
    assert result["positives"] > 10
    assert result["recall"] == 1.0 and result["precision"] == 1.0


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
    caplog.clear()  # only the rerun's records (an earlier test may have left the logger at INFO)
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


def test_dedup_as_a_ray_task_runs_every_stage_as_ray_tasks_with_the_same_bytes(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _corpus(tmp_path / "in")

    def config(name: str) -> DedupConfig:
        return DedupConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / name), partitions=2)

    dedup_documents(config("local"))
    ray_cluster.get(ray_cluster.remote(dedup_documents).remote(config("ray")))
    for stage, tasks in (("scan", 3), ("exact", 2), ("buckets", 28), ("resolve", 1), ("filter", 3)):
        ledgers = sorted((tmp_path / "ray" / ".shards" / f"dedup-{stage}").glob("part-?????.json"))
        assert len(ledgers) == tasks
        assert all(json.loads(p.read_text())["ran"]["node"] is not None for p in ledgers)
    assert tree_bytes(tmp_path / "local") == tree_bytes(tmp_path / "ray")
