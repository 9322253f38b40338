"""Deduplication: exact (normalized text hash), then fuzzy with datatrove's MinHash pipeline.

Exact: a document's key is the hash of its text lowercased, NFKC-normalized and with whitespace
collapsed; the first document with a key (in shard order, then file order) is kept, the others are
removed as duplicates of it. Fuzzy: the documents that survive run through datatrove's four MinHash
stages, called directly on our shards (rank = shard index, so results do not depend on the worker
count): signatures per shard, bucket matching per bucket, union-find clustering, and the filter that
keeps one document per cluster (datatrove's choice of root). Intermediate files live in
`output_path/.work/` and are deleted when the step succeeds; a rerun after a crash reuses a finished
planning phase and rewrites only the missing output shards.

Output: `part-0000i.jsonl.gz` (kept documents of input shard i, input order), `stats.json` (documents,
kept, removed, exact removed, fuzzy clusters and removed, bad lines skipped) and `removed_ids.jsonl`
(one line per removed document: `id`, `reason` exact|fuzzy, `duplicate_of` the kept document's id).
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import unicodedata
from collections import Counter
from dataclasses import dataclass

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    encode_documents,
    list_shards,
    read_documents,
    shard_name,
    write_json,
)
from marin.sharding import LEDGERS, local_pool, run_shards
from marin.step_config import StepConfig, input_field, output_field, unversioned
from marin.storage import delete, join, read_bytes, write_bytes, write_volatile_list

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class MinHashConfig:
    """datatrove MinhashConfig: with b buckets of r hashes, pairs above ~(1/b)^(1/r) Jaccard match."""

    n_grams: int = 5
    """Word n-gram size of the shingles."""
    num_buckets: int = 14
    """Number of LSH bands (b)."""
    hashes_per_bucket: int = 8
    """Hashes per band (r)."""
    seed: int = 1
    """Seed of the hash permutations."""


@dataclass(frozen=True, kw_only=True)
class DedupConfig(StepConfig):
    """Deduplicate every shard under `input_path` into `output_path`."""

    input_path: str = input_field("documents")
    """Folder of Dolma jsonl(.gz) shards (any fsspec path)."""
    output_path: str = output_field()
    """Folder to write kept shards, stats.json and removed_ids.jsonl into."""
    exact: bool = True
    """Remove exact duplicates (normalized text) first."""
    fuzzy: MinHashConfig | None = MinHashConfig()
    """MinHash near-duplicate removal; None: off."""
    skip_bad_documents: bool = False
    """Skip and count lines that are not valid documents instead of failing on the first."""
    workers: int = unversioned(1)
    """Processes to run the per-shard and per-bucket stages with; the output does not depend on it."""

    def validate(self) -> None:
        if self.workers < 1:
            raise ValueError(f"DedupConfig.workers must be >= 1, got {self.workers}")
        if not self.exact and self.fuzzy is None:
            raise ValueError("DedupConfig: exact=False and fuzzy=None would remove nothing; enable one")


def normalized_text_hash(text: str) -> str:
    norm = " ".join(unicodedata.normalize("NFKC", text).lower().split())
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=16).hexdigest()


def _datatrove_config(m: MinHashConfig):
    from datatrove.pipeline.dedup.minhash import MinhashConfig

    return MinhashConfig(
        n_grams=m.n_grams, num_buckets=m.num_buckets, hashes_per_bucket=m.hashes_per_bucket, seed=m.seed
    )


def _hash_shard(config: DedupConfig, path: str) -> dict:
    report = ReadReport()
    ids, keys = [], []
    for doc in read_documents(path, skip_bad=config.skip_bad_documents, report=report):
        ids.append(doc["id"])
        keys.append(normalized_text_hash(doc["text"]) if config.exact else None)
    return {"ids": ids, "keys": keys, "skipped": dict(report.skipped)}


def _surviving_docs(config: DedupConfig, path: str, exact_removed: set[int]):
    from datatrove.data import Document

    for idx, doc in enumerate(read_documents(path, skip_bad=config.skip_bad_documents)):
        if idx not in exact_removed:
            yield Document(text=doc["text"], id=doc["id"], metadata={"_raw": doc, "_idx": idx})


def _signature_shard(config: DedupConfig, task: tuple[str, int, int, list[int]]) -> None:
    path, rank, world, exact_removed = task
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    stage = MinhashDedupSignature(
        output_folder=join(config.output_path, ".work", "signatures"), config=_datatrove_config(config.fuzzy)
    )
    stage.run(_surviving_docs(config, path, set(exact_removed)), rank=rank, world_size=world)


def _bucket(config: DedupConfig, bucket: int) -> None:
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets

    work = join(config.output_path, ".work")
    stage = MinhashDedupBuckets(
        input_folder=join(work, "signatures"),
        output_folder=join(work, "buckets"),
        config=_datatrove_config(config.fuzzy),
    )
    stage.run(None, rank=bucket, world_size=config.fuzzy.num_buckets)


def _plan(config: DedupConfig, shards: list[str], pool) -> dict:
    """Exact keys and the MinHash clusters; cached in .work/plan.json so a resumed run skips it."""
    plan_path = join(config.output_path, ".work", "plan.json")
    finished = read_bytes(plan_path)
    if finished is not None:
        logger.info("dedup: reusing the finished plan in %s", plan_path)
        return json.loads(finished)
    delete(join(config.output_path, ".work"), recursive=True)
    hashed = run_shards(_hash_shard, config, shards, workers=config.workers, desc="dedup: exact hashes", pool=pool)
    if sum(len(h["ids"]) for h in hashed) == 0:
        raise EmptyInputError(f"dedup: no documents in input path {config.input_path}")
    first: dict[str, str] = {}
    exact = []
    for h in hashed:
        removed = {}
        for idx, (doc_id, key) in enumerate(zip(h["ids"], h["keys"], strict=True)):
            if key is None:
                continue
            if key in first:
                removed[str(idx)] = first[key]
            else:
                first[key] = doc_id
        exact.append(removed)
    if config.fuzzy is not None:
        from datatrove.pipeline.dedup.minhash import MinhashDedupCluster

        work = join(config.output_path, ".work")
        tasks = [(p, i, len(shards), sorted(int(k) for k in exact[i])) for i, p in enumerate(shards)]
        run_shards(_signature_shard, config, tasks, workers=config.workers, desc="dedup: minhash signatures", pool=pool)
        run_shards(
            _bucket,
            config,
            range(config.fuzzy.num_buckets),
            workers=config.workers,
            desc="dedup: minhash buckets",
            pool=pool,
        )
        MinhashDedupCluster(
            input_folder=join(work, "buckets"),
            output_folder=join(work, "clusters"),
            config=_datatrove_config(config.fuzzy),
            save_cluster_id=True,
        ).run(None, 0, 1)
    plan = {"exact": exact, "skipped": [h["skipped"] for h in hashed]}
    write_json(plan_path, plan)
    return plan


def _read_u32_pairs(path: str) -> dict[int, int]:
    data = read_bytes(path)
    if data is None:
        return {}
    return {a: b for a, b in struct.iter_unpack("<II", data)}


def _write_shard(config: DedupConfig, task: tuple[str, int, dict[str, str], dict]) -> dict:
    path, index, exact_removed, skipped = task
    docs = list(_surviving_docs(config, path, {int(k) for k in exact_removed}))
    removed = [
        {"id": None, "idx": int(k), "reason": "exact", "duplicate_of": v}
        for k, v in sorted(exact_removed.items(), key=lambda kv: int(kv[0]))
    ]
    clustered = []
    kept = docs
    if config.fuzzy is not None:
        from datatrove.pipeline.dedup.minhash import MinhashDedupFilter

        clusters_dir = join(config.output_path, ".work", "clusters")
        cluster_of = _read_u32_pairs(join(clusters_dir, f"{index:06d}.clusters"))
        kept = list(MinhashDedupFilter(input_folder=clusters_dir).run(iter(docs), rank=index, world_size=1))
        kept_idx = {d.metadata["_idx"] for d in kept}
        for pos, d in enumerate(docs):
            if pos in cluster_of:
                clustered.append({"id": d.id, "cluster": cluster_of[pos], "kept": d.metadata["_idx"] in kept_idx})
    all_ids = [d["id"] for d in read_documents(path, skip_bad=config.skip_bad_documents)]
    for r in removed:
        r["id"] = all_ids[r.pop("idx")]
    stats = {
        "documents": len(all_ids),
        "kept": len(kept),
        "exact_removed": removed,
        "clustered": clustered,
        "skipped_bad_documents": skipped,
    }
    write_bytes(join(config.output_path, shard_name(index)), encode_documents(d.metadata["_raw"] for d in kept))
    logger.info("wrote shard %s (%d of %d kept)", shard_name(index), len(kept), len(all_ids))
    return stats


def dedup_documents(config: DedupConfig) -> dict:
    """Run the dedup step; returns the totals also written to stats.json."""
    shards = list_shards(config.input_path)
    logger.info("deduplicating %d shards from %s into %s", len(shards), config.input_path, config.output_path)
    with local_pool(config.workers) as pool:
        plan = _plan(config, shards, pool)
        per_shard = run_shards(
            _write_shard,
            config,
            [(p, i, plan["exact"][i], plan["skipped"][i]) for i, p in enumerate(shards)],
            workers=config.workers,
            desc="dedup: write",
            ledger_dir=join(config.output_path, LEDGERS, "dedup"),
            pool=pool,
        )
    write_volatile_list(config.output_path, [LEDGERS + "/"])
    stats = _write_totals(config, per_shard)
    delete(join(config.output_path, ".work"), recursive=True)
    return stats


def _write_totals(config: DedupConfig, per_shard: list[dict]) -> dict:
    representative: dict[int, str] = {}
    members: Counter = Counter()
    for s in per_shard:
        for c in s["clustered"]:
            members[c["cluster"]] += 1
            if c["kept"]:
                representative[c["cluster"]] = c["id"]
    removed_lines = []
    for s in per_shard:
        removed_lines += [
            {"id": r["id"], "reason": "exact", "duplicate_of": r["duplicate_of"]} for r in s["exact_removed"]
        ]
        removed_lines += [
            {"id": c["id"], "reason": "fuzzy", "duplicate_of": representative.get(c["cluster"])}
            for c in s["clustered"]
            if not c["kept"]
        ]
    skipped: Counter = Counter()
    for s in per_shard:
        skipped.update(s["skipped_bad_documents"])
    documents = sum(s["documents"] for s in per_shard)
    kept = sum(s["kept"] for s in per_shard)
    exact_removed = sum(len(s["exact_removed"]) for s in per_shard)
    stats = {
        "shards": len(per_shard),
        "documents": documents,
        "kept": kept,
        "removed": documents - kept,
        "exact": {"enabled": config.exact, "removed": exact_removed},
        "fuzzy": {
            "enabled": config.fuzzy is not None,
            "clusters": len(members),
            "documents_in_clusters": sum(members.values()),
            "removed": documents - kept - exact_removed,
        },
        "skipped_bad_documents": dict(sorted(skipped.items())),
    }
    body = "".join(json.dumps(line, sort_keys=True) + "\n" for line in removed_lines)
    write_bytes(join(config.output_path, "removed_ids.jsonl"), body.encode("utf-8"))
    write_json(join(config.output_path, "stats.json"), stats)
    logger.info("dedup: kept %d of %d documents -> %s", kept, documents, config.output_path)
    return stats
