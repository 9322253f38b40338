"""Deduplication: exact (normalized text hash), then fuzzy (MinHash with datatrove's semantics).

Exact: a document's key is the hash of its text lowercased, NFKC-normalized and with whitespace
collapsed; the first document with a key (in shard order, then file order) is kept, the others are
removed as duplicates of it. Fuzzy: among the documents exact dedup kept, MinHash LSH with
datatrove's shingles, normalisation and bands/rows (`marin.processing.minhash`, vectorized: the
signatures equal datatrove's) finds pairs that share a band; the pairs' connected components are
clusters, and each cluster keeps its first document. Every stage runs as shard tasks
(`marin.processing.dedup_stages`), with keys partitioned by hash so that no task holds the whole
corpus; the one task that sees everything, resolve, holds only the duplicates and their pairs.
Intermediate files live in `output_path/.work/` and are deleted when the step succeeds; a rerun
after a crash skips every task that had finished.

Before anything is published, a guard counts removals per source (the `source` field, else the input
shard) and refuses, with `SourceWipeoutError` and the largest clusters in `dedup_guard.json`, when a
source would lose more than `max_removed_fraction` of its documents: a whole source over-merged, or
templated documents that differ only in their slots, is then seen before training, not after.

Output: `part-0000i.jsonl.gz` (kept documents of input shard i, input order), `stats.json` (documents,
kept, removed, exact removed, fuzzy clusters and removed, removals per source, bad lines skipped) and `removed_ids.jsonl`
(one line per removed document, per shard the exact ones then the fuzzy ones: `id`, `reason` exact|fuzzy, `duplicate_of` the kept
document's id). The output does not depend on `workers` or `partitions`.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from marin.processing import dedup_stages as stages
from marin.processing.documents import EmptyInputError, check_keys, list_shards, read_documents, write_json
from marin.processing.minhash import MinHashConfig
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.stepkit.sharding import LEDGERS, local_pool, run_shards
from marin.storage import delete, join, write_volatile_list

logger = logging.getLogger(__name__)

__all__ = ["DedupConfig", "MinHashConfig", "SourceWipeoutError", "dedup_documents"]

GUARD_REPORT = "dedup_guard.json"
"""Written into the output folder when the guard refuses to publish: per source, removals and the largest clusters."""
EXAMPLE_CHARS = 500
"""Characters of each kept document's text shown in the guard's report."""


class SourceWipeoutError(ValueError):
    """Dedup would remove more than `max_removed_fraction` of a source's documents; the step does not publish."""


@dataclass(frozen=True, kw_only=True)
class DedupConfig(StepConfig):
    """Deduplicate every shard under `input_path` into `output_path`."""

    input_path: str = input_field("documents")
    """Folder of document shards, Parquet or JSON lines (.jsonl, .jsonl.gz, .jsonl.zst), on any fsspec path."""
    output_path: str = output_field()
    """Folder to write kept shards, stats.json and removed_ids.jsonl into."""
    exact: bool = True
    """Remove exact duplicates (normalized text) first."""
    fuzzy: MinHashConfig | None = MinHashConfig()
    """MinHash near-duplicate removal; None: off."""
    skip_bad_documents: bool = False
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""
    max_removed_fraction: float | None = unversioned(0.8)
    """The guard: the step fails, publishing nothing, when dedup would remove more than this fraction of one
    source's documents (the `source` field, else the input shard); None: no guard. It decides only whether the
    output is published, never its bytes, so it is not in the hash (after a refusal, rerun with
    `--force_run_failed`: the finished stages are not redone)."""
    workers: int = unversioned(1)
    """Processes to run the shard tasks with; the output does not depend on it."""
    partitions: int | None = unversioned(None)
    """Key partitions of the exact and bucket stages (None: one per 16 input shards); bounds each task's
    memory, never changes the output."""

    def validate(self) -> None:
        check_keys("DedupConfig", self.text_key, self.id_key)
        if self.max_removed_fraction is not None and not 0.0 < self.max_removed_fraction <= 1.0:
            raise ValueError(
                f"DedupConfig.max_removed_fraction must be in (0, 1] or None, got {self.max_removed_fraction}"
            )
        if self.workers < 1:
            raise ValueError(f"DedupConfig.workers must be >= 1, got {self.workers}")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"DedupConfig.partitions must be >= 1 or None, got {self.partitions}")
        if not self.exact and self.fuzzy is None:
            raise ValueError("DedupConfig: exact=False and fuzzy=None would remove nothing; enable one")


def _stage(fn, config: DedupConfig, tasks: list, name: str, pool) -> list[dict]:
    """Run one stage's tasks (a rerun skips those with a ledger); every task's stats, in task order."""
    return run_shards(
        fn,
        config,
        tasks,
        desc=f"dedup: {name}",
        ledger_dir=join(config.output_path, LEDGERS, f"dedup-{name}"),
        workers=config.workers,
        pool=pool,
    )


def dedup_documents(config: DedupConfig) -> dict:
    """Run the dedup step; returns the totals also written to stats.json."""
    paths = list_shards(config.input_path)
    parts = stages.partitions_for(config, len(paths))
    logger.info(
        "deduplicating %d shards (%d partitions) from %s into %s",
        len(paths),
        parts,
        config.input_path,
        config.output_path,
    )
    exact_tasks = parts if config.exact else 0
    bucket_tasks = config.fuzzy.num_buckets * parts if config.fuzzy is not None else 0
    write_volatile_list(config.output_path, [LEDGERS + "/"])
    with local_pool(config.workers) as pool:
        scans = _stage(
            stages.scan_shard, config, [stages.ScanTask(i, p, parts) for i, p in enumerate(paths)], "scan", pool
        )
        if sum(s["documents"] for s in scans) == 0:
            raise EmptyInputError(f"dedup: no documents in input path {config.input_path}")
        offsets = [stages.Offsets(s["key_offsets"], s.get("band_offsets")) for s in scans]
        _stage(
            stages.exact_partition,
            config,
            [stages.PartitionTask(p, offsets, 0) for p in range(exact_tasks)],
            "exact",
            pool,
        )
        _stage(
            stages.bucket_partition,
            config,
            [stages.PartitionTask(t, offsets, exact_tasks) for t in range(bucket_tasks)],
            "buckets",
            pool,
        )
        (resolved,) = _stage(
            stages.resolve,
            config,
            [stages.ResolveTask(len(paths), exact_tasks, bucket_tasks, [s["sources"] for s in scans])],
            "resolve",
            None,
        )
        sources = _sources(scans, resolved)
        _guard(config, paths, sources, resolved)
        written = _stage(
            stages.filter_shard, config, [stages.ScanTask(i, p, parts) for i, p in enumerate(paths)], "filter", pool
        )
    stats = _totals(config, scans, resolved, written)
    stats["sources"] = sources
    write_json(join(config.output_path, "stats.json"), stats)
    delete(join(config.output_path, ".work"), recursive=True)
    logger.info("dedup: kept %d of %d documents -> %s", stats["kept"], stats["documents"], config.output_path)
    return stats


def _totals(config: DedupConfig, scans: list[dict], resolved: dict, written: list[dict]) -> dict:
    skipped: Counter = Counter()
    for s in scans:
        skipped.update(s["skipped"])
    documents = sum(s["documents"] for s in written)
    kept = sum(s["kept"] for s in written)
    return {
        "shards": len(written),
        "documents": documents,
        "kept": kept,
        "removed": documents - kept,
        "exact": {"enabled": config.exact, "removed": resolved["exact_removed"]},
        "fuzzy": {
            "enabled": config.fuzzy is not None,
            "clusters": resolved["clusters"],
            "documents_in_clusters": resolved["documents_in_clusters"],
            "removed": resolved["fuzzy_removed"],
        },
        "skipped_bad_documents": dict(sorted(skipped.items())),
    }


def _sources(scans: list[dict], resolved: dict) -> dict[str, dict]:
    """Per source: documents, removed and the fraction removed."""
    documents: Counter = Counter()
    for s in scans:
        for name, n in zip(s["sources"], s["source_counts"], strict=True):
            documents[name] += n
    out = {}
    for name in sorted(documents):
        removed = resolved["by_source"].get(name, {}).get("removed", 0)
        out[name] = {
            "documents": documents[name],
            "removed": removed,
            "removed_fraction": round(removed / documents[name], 6) if documents[name] else 0.0,
        }
    return out


def _guard(config: DedupConfig, paths: list[str], sources: dict[str, dict], resolved: dict) -> None:
    """Refuse to publish when a source would lose more than `max_removed_fraction`, leaving the evidence."""
    limit = config.max_removed_fraction
    if limit is None:
        delete(join(config.output_path, GUARD_REPORT))
        return
    over = {name: s for name, s in sources.items() if s["removed"] > limit * s["documents"]}
    if not over:
        delete(join(config.output_path, GUARD_REPORT))  # a refused earlier attempt's report, now answered
        return
    report = {
        "max_removed_fraction": limit,
        "sources": sources,
        "over_the_limit": {
            name: {**s, "largest_clusters": _with_texts(config, paths, resolved["by_source"][name]["largest_clusters"])}
            for name, s in over.items()
        },
    }
    where = join(config.output_path, GUARD_REPORT)
    write_json(where, report)
    for name, entry in report["over_the_limit"].items():
        for c in entry["largest_clusters"]:
            logger.error(
                "dedup guard: source %r: %d removed as duplicates of %s: %r",
                name,
                c["removed"],
                c["kept_id"],
                c["kept_text"][:200],
            )
    name, s = max(over.items(), key=lambda item: (item[1]["removed_fraction"], item[0]))
    raise SourceWipeoutError(
        f"dedup: source {name!r} would lose {s['removed_fraction']:.1%} of its documents ({s['removed']} of "
        f"{s['documents']}), over DedupConfig.max_removed_fraction={limit}"
        + (f" (and {len(over) - 1} more source(s))" if len(over) > 1 else "")
        + f"; nothing is published. The largest duplicate clusters are in {where}. If this is intended, raise "
        "max_removed_fraction (or set it to None) and rerun with --force_run_failed."
    )


def _with_texts(config: DedupConfig, paths: list[str], clusters: list[dict]) -> list[dict]:
    """The clusters with their kept document's text (first EXAMPLE_CHARS), read back from the input."""
    wanted: dict[int, set[int]] = {}
    for c in clusters:
        wanted.setdefault(c["kept_node"] >> 32, set()).add(c["kept_node"] & 0xFFFFFFFF)
    texts: dict[int, str] = {}
    for shard, indices in wanted.items():
        docs = read_documents(
            paths[shard], skip_bad=config.skip_bad_documents, text_key=config.text_key, id_key=config.id_key
        )
        for index, doc in enumerate(docs):
            if index in indices:
                texts[(shard << 32) | index] = doc["text"][:EXAMPLE_CHARS]
            if index >= max(indices):
                break
    return [{**c, "kept_text": texts.get(c["kept_node"], "")} for c in clusters]
