"""The dedup step's stages, each a module-level `stage(config, task) -> stats` run as one shard task.

A document is a *node* `shard << 32 | index` (index among the shard's valid documents), so sorting
nodes sorts documents in corpus order and "the first" document always means the smallest node.

1. scan (one task per input shard): one streaming read of the shard writes its document ids
   (`scan/i.ids`), its exact keys (`scan/i.keys`: 128-bit hash of the NFKC-lowercased,
   whitespace-collapsed text) and its MinHash band digests (`scan/i.bands`), both grouped by
   partition (key hash mod the partition count) with the offsets in the task's stats.
2. exact (one task per key partition): the partition's keys from every shard; a key's first node
   is kept, every later node is removed as its duplicate (`exact/p.bin`: node, first).
3. buckets (one task per band x partition): the partition's band digests from every shard, less
   the exact removals; in each run of equal digests every node pairs with the run's first
   (`buckets/t.bin`), which connects the same documents as datatrove's pairs of neighbours.
4. resolve (one task): union of the pairs (scipy connected components); a cluster keeps its first
   node and removes the others. It writes each shard's removed indices (`decisions/i.bin`) and
   `removed_ids.jsonl`, streaming, with the ids read back from the scans. It holds the exact
   removals and the pairs, never the corpus.
5. filter (one task per input shard): streams the shard and writes the kept documents.

Each stage is `stage(config, task) -> stats`, run by `marin.stepkit.sharding.run_shards` (Ray tasks, a
local pool or inline), whose per-task ledgers make a rerun skip the tasks that finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import numpy as np

from marin.processing.documents import DocumentStream, ReadReport, shard_name, step_documents
from marin.processing.minhash import MinHashConfig, MinHasher
from marin.storage import join, open_read, open_write, read_bytes, read_range, write_bytes

logger = logging.getLogger(__name__)

RECORD = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("node", "<u8")])
"""A 128-bit key (exact key or band digest) and the node that has it."""
PAIR = np.dtype([("node", "<u8"), ("ref", "<u8")])
"""A removed (or clustered) node and the node it duplicates."""
SHARDS_PER_PARTITION = 16
"""Partitions = ceil(shards / this): each exact or bucket task holds about this many shards' records."""
SCAN_BATCH_CHARS = 1 << 20
"""Characters of text hashed per MinHash batch in the scan."""


TOP_CLUSTERS = 5
"""Largest duplicate clusters per source kept in the resolve stage's stats (the guard shows them)."""
CLUSTER_EXAMPLES = 3
"""Removed ids shown per cluster."""


class DedupConfig(Protocol):
    """What the stages read of `marin.processing.dedup.DedupConfig` (declared here so the stages do not
    import the step that runs them)."""

    output_path: str
    exact: bool
    fuzzy: MinHashConfig | None
    skip_bad_documents: bool
    partitions: int | None
    text_key: str
    id_key: str | None


def source_of(doc: dict, path: str) -> str:
    """The source a document is counted under by the guard: its `source` field, else its input shard's name."""
    return doc.get("source") or path.rsplit("/", 1)[-1]


def partitions_for(config: DedupConfig, shards: int) -> int:
    return config.partitions or max(1, math.ceil(shards / SHARDS_PER_PARTITION))


def work(config: DedupConfig, *parts: str) -> str:
    return join(config.output_path, ".work", *parts)


@dataclass(frozen=True)
class ScanTask:
    """One input shard (scan and filter stages)."""

    index: int
    """The shard's position among the input shards."""
    path: str
    """The shard's file."""
    partitions: int
    """Key partitions per kind of key (exact; per band for MinHash)."""


@dataclass(frozen=True)
class Offsets:
    """Where each partition starts in one shard's keys and bands files (records; one more than partitions)."""

    keys: list[int]
    """Offsets in `scan/i.keys`."""
    bands: list[int] | None
    """Offsets in `scan/i.bands` (band-major), None without MinHash."""


@dataclass(frozen=True)
class PartitionTask:
    """One key partition (exact stage) or one band x partition (bucket stage)."""

    index: int
    """The partition's number."""
    offsets: list[Offsets]
    """Every shard's offsets."""
    exact_partitions: int
    """How many exact outputs to read the removals from (bucket stage; 0 when exact dedup is off)."""


@dataclass(frozen=True)
class ResolveTask:
    """The one resolve task."""

    shards: int
    """Input shards."""
    exact_partitions: int
    """Exact outputs (0 when exact dedup is off)."""
    bucket_tasks: int
    """Bucket outputs (0 without MinHash)."""
    sources: list[list[str]]
    """Each shard's source labels, in the order of its `scan/i.src` indices."""


EXACT_SEGMENT_CHARS = 1 << 20
"""The exact key's whitespace is collapsed a segment (cut at a space) at a time: bounded memory."""


def exact_key(text: str) -> tuple[int, int]:
    """The 128-bit blake2b of the text NFKC-normalized, lowercased, whitespace-collapsed, as (hi, lo).

    The collapsed text is `" ".join(text.split())`, hashed a segment at a time (cut at a space, which
    `split` separates at anyway), so a long document is never held as a list of its words."""
    norm = unicodedata.normalize("NFKC", text).lower()
    h = hashlib.blake2b(digest_size=16)
    start, first = 0, True
    while start < len(norm):
        stop = norm.find(" ", start + EXACT_SEGMENT_CHARS)
        stop = len(norm) if stop < 0 else stop
        words = norm[start:stop].split()
        if words:
            h.update((("" if first else " ") + " ".join(words)).encode("utf-8"))
            first = False
        start = stop + 1
    digest = h.digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")


@cache
def _hasher(mh: MinHashConfig) -> MinHasher:
    return MinHasher(mh)


def _grouped(records: np.ndarray, partition: np.ndarray, count: int) -> tuple[bytes, list[int]]:
    """Records ordered by partition (stably), and the record offset where each partition starts."""
    order = np.argsort(partition, kind="stable")
    offsets = np.searchsorted(partition[order], np.arange(count + 1)).tolist()
    return records[order].tobytes(), offsets


# ---------------------------------------------------------------- 1. scan


class _Scan:
    def __init__(self, config: DedupConfig, shard: int):
        self.config, self.shard = config, shard
        self.keys: list[tuple[int, int, int]] = []
        self.bands: list[np.ndarray] = []
        self.texts: list[str] = []
        self.nodes: list[int] = []
        self.chars = 0
        self.signed = 0

    def add(self, node: int, text: str) -> None:
        if self.config.exact:
            self.keys.append((*exact_key(text), node))
        if self.config.fuzzy is not None:
            self.texts.append(text)
            self.nodes.append(node)
            self.chars += len(text)
            if self.chars >= SCAN_BATCH_CHARS:
                self.flush()

    def flush(self) -> None:
        if not self.texts:
            return
        mh = _hasher(self.config.fuzzy)
        sigs, has = mh.signatures(self.texts)
        digests = mh.band_digests(sigs)  # docs x bands x 2
        bands = self.config.fuzzy.num_buckets
        rec = np.empty((len(has), bands), dtype=RECORD)
        rec["hi"], rec["lo"] = digests[:, :, 0], digests[:, :, 1]
        rec["node"] = np.asarray(self.nodes, dtype=np.uint64)[has][:, None]
        self.bands.append(rec)
        self.signed += len(has)
        self.texts, self.nodes, self.chars = [], [], 0


def scan_shard(config: DedupConfig, task: ScanTask) -> dict:
    """Stage 1: ids, exact keys and band digests of one input shard, grouped by partition."""
    shard, path, partitions = task.index, task.path, task.partitions
    report = ReadReport()
    scan = _Scan(config, shard)
    labels: dict[str, int] = {}
    source_index: list[int] = []
    with open_write(work(config, "scan", f"{shard:05d}.ids")) as ids:
        for index, doc in enumerate(step_documents(config, path, report)):
            ids.write(json.dumps(doc["id"], ensure_ascii=False).encode("utf-8") + b"\n")
            source_index.append(labels.setdefault(source_of(doc, path), len(labels)))
            scan.add((shard << 32) | index, doc["text"])
    scan.flush()
    src = np.asarray(source_index, dtype="<u4")
    write_bytes(work(config, "scan", f"{shard:05d}.src"), src.tobytes())
    stats = {
        "documents": report.documents,
        "skipped": dict(report.skipped),
        "signed": scan.signed,
        "sources": list(labels),
        "source_counts": np.bincount(src, minlength=len(labels)).tolist(),
    }
    keys = np.array(scan.keys, dtype=RECORD) if scan.keys else np.empty(0, dtype=RECORD)
    data, stats["key_offsets"] = _grouped(keys, keys["hi"] % np.uint64(partitions), partitions)
    write_bytes(work(config, "scan", f"{shard:05d}.keys"), data)
    if config.fuzzy is not None:
        bands = np.concatenate(scan.bands) if scan.bands else np.empty((0, config.fuzzy.num_buckets), RECORD)
        band_of = np.broadcast_to(np.arange(bands.shape[1], dtype=np.uint64), bands.shape)
        partition = band_of * np.uint64(partitions) + bands["hi"] % np.uint64(partitions)
        data, stats["band_offsets"] = _grouped(bands.ravel(), partition.ravel(), bands.shape[1] * partitions)
        write_bytes(work(config, "scan", f"{shard:05d}.bands"), data)
    return stats


def _gather(config: DedupConfig, kind: str, task: PartitionTask) -> np.ndarray:
    """Partition `task.index` of every shard's `kind` file (keys or bands), concatenated."""
    parts = []
    for shard, offsets in enumerate(task.offsets):
        start, stop = getattr(offsets, kind)[task.index : task.index + 2]
        data = read_range(
            work(config, "scan", f"{shard:05d}.{kind}"), start * RECORD.itemsize, (stop - start) * RECORD.itemsize
        )
        parts.append(np.frombuffer(data, dtype=RECORD))
    return np.concatenate(parts) if parts else np.empty(0, dtype=RECORD)


def _runs(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For records sorted by (hi, lo, node): the nodes that are not first in their run, and that run's first."""
    if len(records) == 0:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    hi, lo = records["hi"], records["lo"]
    new = np.ones(len(records), dtype=bool)
    new[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
    start = np.maximum.accumulate(np.where(new, np.arange(len(records)), 0))
    return records["node"][~new], records["node"][start[~new]]


def _sorted(records: np.ndarray) -> np.ndarray:
    return records[np.lexsort((records["node"], records["lo"], records["hi"]))]


def _write_pairs(path: str, node: np.ndarray, ref: np.ndarray) -> None:
    out = np.empty(len(node), dtype=PAIR)
    out["node"], out["ref"] = node, ref
    write_bytes(path, np.sort(out, order=["node", "ref"]).tobytes())


def _read_pairs(paths: list[str]) -> np.ndarray:
    parts = [np.frombuffer(read_bytes(p) or b"", dtype=PAIR) for p in paths]
    return np.concatenate(parts) if parts else np.empty(0, dtype=PAIR)


# ---------------------------------------------------------------- 2. exact


def exact_partition(config: DedupConfig, task: PartitionTask) -> dict:
    """Stage 2: the exact duplicates among one key partition of the whole corpus."""
    node, first = _runs(_sorted(_gather(config, "keys", task)))
    _write_pairs(work(config, "exact", f"{task.index:05d}.bin"), node, first)
    return {"removed": len(node)}


# ---------------------------------------------------------------- 3. buckets


def bucket_partition(config: DedupConfig, task: PartitionTask) -> dict:
    """Stage 3: pairs of documents (among those exact dedup kept) that share a band, in one band partition."""
    records = _gather(config, "bands", task)
    if task.exact_partitions and len(records):
        removed = _read_pairs([work(config, "exact", f"{p:05d}.bin") for p in range(task.exact_partitions)])["node"]
        records = records[~np.isin(records["node"], removed)]
    node, first = _runs(_sorted(records))
    _write_pairs(work(config, "buckets", f"{task.index:05d}.bin"), node, first)
    return {"pairs": len(node)}


# ---------------------------------------------------------------- 4. resolve


def _clusters(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(every clustered node, its cluster's first node, number of clusters) from duplicate pairs."""
    if len(pairs) == 0:
        return np.empty(0, np.uint64), np.empty(0, np.uint64), 0
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes, inverse = np.unique(np.concatenate([pairs["node"], pairs["ref"]]), return_inverse=True)
    a, b = inverse[: len(pairs)], inverse[len(pairs) :]
    graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(len(nodes), len(nodes)))
    count, labels = connected_components(graph, directed=False)
    _, first_index = np.unique(labels, return_index=True)  # nodes are sorted: a label's first index is its min
    return nodes, nodes[first_index][labels], count


def _ids_of(config: DedupConfig, wanted: np.ndarray) -> dict[int, str]:
    """The document ids of the `wanted` nodes, read back from the scans' id files one shard at a time."""
    wanted = np.unique(wanted)
    found: dict[int, str] = {}
    for shard in np.unique(wanted >> np.uint64(32)).tolist():
        indices = set((wanted[(wanted >> np.uint64(32)) == shard] & np.uint64(0xFFFFFFFF)).tolist())
        with open_read(work(config, "scan", f"{shard:05d}.ids")) as f:
            for index, line in enumerate(f):
                if index in indices:
                    found[(shard << 32) | index] = json.loads(line)
    return found


def resolve(config: DedupConfig, task: ResolveTask) -> dict:
    """Stage 4: clusters of the fuzzy pairs; per-shard removals and removed_ids.jsonl, streamed."""
    exact = _read_pairs([work(config, "exact", f"{p:05d}.bin") for p in range(task.exact_partitions)])
    pairs = _read_pairs([work(config, "buckets", f"{t:05d}.bin") for t in range(task.bucket_tasks)])
    nodes, roots, clusters = _clusters(pairs)
    fuzzy = nodes != roots
    removed = np.empty(len(exact) + int(fuzzy.sum()), dtype=[("node", "<u8"), ("ref", "<u8"), ("fuzzy", "u1")])
    removed["node"] = np.concatenate([exact["node"], nodes[fuzzy]])
    removed["ref"] = np.concatenate([exact["ref"], roots[fuzzy]])
    removed["fuzzy"] = np.concatenate([np.zeros(len(exact), np.uint8), np.ones(int(fuzzy.sum()), np.uint8)])
    # per shard, exact removals first, then fuzzy ones, each in document order (the order of earlier releases)
    removed = removed[np.lexsort((removed["node"], removed["fuzzy"], removed["node"] >> np.uint64(32)))]
    ids = _ids_of(config, np.concatenate([removed["node"], removed["ref"]]))
    shard_of = removed["node"] >> np.uint64(32)
    for shard in range(task.shards):
        mine = removed["node"][shard_of == shard] & np.uint64(0xFFFFFFFF)
        write_bytes(work(config, "decisions", f"{shard:05d}.bin"), mine.astype("<u4").tobytes())
    with open_write(join(config.output_path, "removed_ids.jsonl")) as out:
        for node, ref, is_fuzzy in zip(
            removed["node"].tolist(), removed["ref"].tolist(), removed["fuzzy"].tolist(), strict=True
        ):
            line = {"duplicate_of": ids[ref], "id": ids[node], "reason": "fuzzy" if is_fuzzy else "exact"}
            out.write((json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    stats = {
        "exact_removed": len(exact),
        "clusters": clusters,
        "documents_in_clusters": len(nodes),
        "fuzzy_removed": int(fuzzy.sum()),
        "by_source": _by_source(config, task, removed, ids),
    }
    return stats


def _by_source(config: DedupConfig, task: ResolveTask, removed: np.ndarray, ids: dict[int, str]) -> dict[str, dict]:
    """Per source: documents removed, and the largest groups of its removed documents by the document they
    duplicate (kept node and id, how many, a few removed ids)."""
    label = np.empty(len(removed), dtype=object)
    shard_of = removed["node"] >> np.uint64(32)
    for shard in np.unique(shard_of).tolist():
        src = np.frombuffer(read_bytes(work(config, "scan", f"{shard:05d}.src")) or b"", dtype="<u4")
        mine = shard_of == shard
        names = np.asarray(task.sources[shard], dtype=object)
        label[mine] = names[src[(removed["node"][mine] & np.uint64(0xFFFFFFFF)).astype(np.int64)]]
    out: dict[str, dict] = {}
    for name in sorted(set(label.tolist())):
        mine = removed[label == name]
        refs, counts = np.unique(mine["ref"], return_counts=True)
        top = np.lexsort((refs, -counts))[:TOP_CLUSTERS]
        clusters = []
        for i in top.tolist():
            members = mine["node"][mine["ref"] == refs[i]][:CLUSTER_EXAMPLES].tolist()
            clusters.append(
                {
                    "kept_id": ids[int(refs[i])],
                    "kept_node": int(refs[i]),
                    "removed": int(counts[i]),
                    "removed_ids": [ids[m] for m in members],
                }
            )
        out[name] = {"removed": len(mine), "largest_clusters": clusters}
    return out


# ---------------------------------------------------------------- 5. filter


def filter_shard(config: DedupConfig, task: ScanTask) -> dict:
    """Stage 5: one input shard's kept documents, streamed into its output shard."""
    shard, path = task.index, task.path
    removed = np.frombuffer(read_bytes(work(config, "decisions", f"{shard:05d}.bin")) or b"", dtype="<u4")
    drop = set(removed.tolist())
    with open_write(join(config.output_path, shard_name(shard))) as raw:
        stream = DocumentStream(raw)
        documents = 0
        for index, doc in enumerate(step_documents(config, path)):
            documents += 1
            if index not in drop:
                stream.write(doc)
        stream.close()
    logger.info("wrote shard %s (%d of %d kept)", shard_name(shard), stream.count, documents)
    return {"documents": documents, "kept": stream.count}
