"""Tokenize documents into Levanter's cache format, train and validation splits.

Contract with training: `output_path/train/` and `output_path/validation/` are each exactly the cache
Levanter builds itself for `UrlSingleDatasetLMConfig(cache_dir=output_path, tokenizer=TOKENIZER,
format=TextLmDatasetFormat())` on that split, so training with `cache_dir=output_path` and the same
`tokenizer` string loads them without rebuilding. We get there with Levanter's own parts: the
tokenizer is loaded with `levanter.compat.hf_checkpoints.load_tokenizer`, documents go through the
preprocessor from `preprocessor_for_format(TextLmDatasetFormat(), tokenizer)` (bos and eos added as
Levanter adds them), and rows are written with `levanter.store.SerialCacheWriter`, whose ledger
(`shard_ledger.json`, written last) carries that preprocessor's metadata. Levanter's Ray cache
builder is not used: it hangs on two-core machines. Levanter's ledger metadata names the tokenizer's
absolute path, so the two `shard_ledger.json` files are listed in `volatile_files.txt` (the same
caches built under another prefix differ only there).

Which documents are validation: those of `validation_path` when given, otherwise a fraction chosen by
a hash of the document id (`validation_fraction`), so a document's split never depends on shard
layout or worker count. One pass over the input feeds both caches. A split whose ledger is finished
is not rebuilt on a rerun; an unfinished one is deleted and rebuilt. Also written: `stats.json`
(documents, tokens, UTF-8 bytes per split) and `tokenize_info.json` (the tokenizer, relative to this
folder when both are on the same storage, so that the bytes do not depend on the prefix).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    concrete,
    list_shards,
    read_documents,
    write_json,
)
from marin.storage import join, portable_path, write_volatile_list

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")


@dataclass(frozen=True, kw_only=True)
class TokenizeConfig:
    """Tokenize `input_path` (and `validation_path`) into Levanter caches under `output_path`."""

    input_path: str
    """Folder of Dolma jsonl(.gz) shards (any fsspec path)."""
    tokenizer: str
    """A transformers tokenizer folder (a train_tokenizer step's output, or any path)."""
    output_path: str
    """Folder for train/, validation/, stats.json and tokenize_info.json."""
    validation_path: str | None = None
    """Documents for the validation split; when set, every input document is train."""
    validation_fraction: float = 0.05
    """Without validation_path: the fraction of documents (by hash of id) that go to validation."""
    batch_size: int = 1024
    """Documents per tokenizer call."""
    skip_bad_documents: bool = False
    """Skip and count lines that are not valid documents instead of failing on the first."""

    def __post_init__(self):
        if self.batch_size < 1:
            raise ValueError(f"TokenizeConfig.batch_size must be >= 1, got {self.batch_size}")
        if not concrete(self.validation_fraction, self.validation_path):
            return
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"TokenizeConfig.validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.validation_path is not None and self.validation_fraction != 0.0:
            raise ValueError(
                "TokenizeConfig: set validation_fraction=0 when validation_path names the validation documents"
            )


def is_validation(doc_id: str, fraction: float) -> bool:
    """Deterministic split by id: the first 8 bytes of sha256(id) as a fraction of 2**64."""
    if fraction <= 0:
        return False
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")
    return h < fraction * 2**64


def _load_tokenizer(tokenizer_path: str):
    from levanter.compat.hf_checkpoints import load_tokenizer

    return load_tokenizer(tokenizer_path)


def _chunked(items: Iterable, n: int) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _prefetch(items: Iterator, depth: int = 2) -> Iterator:
    """Yield `items` while a background thread computes the next ones (tokenizing overlaps cache writes)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def produce():
        try:
            for item in items:
                q.put((item, None))
        except BaseException as e:  # handed to the consumer, which re-raises it
            q.put((None, e))
            return
        q.put((done, None))

    thread = threading.Thread(target=produce, daemon=True, name="tokenize-prefetch")
    thread.start()
    while True:
        item, error = q.get()
        if error is not None:
            raise error
        if item is done:
            break
        yield item
    thread.join()


def _ledger_finished(cache_dir: str) -> bool:
    import json

    import fsspec

    try:
        with fsspec.open(join(cache_dir, "shard_ledger.json"), "r") as f:
            return bool(json.load(f).get("is_finished"))
    except FileNotFoundError:
        return False


def write_levanter_caches(
    docs: Iterable[tuple[str, dict]], tokenizer, tokenizer_path: str, cache_dirs: dict[str, str], batch_size: int = 1024
) -> dict[str, dict]:
    """Tokenize `(split, doc)` pairs into one finished Levanter cache per split in `cache_dirs`, in one pass.

    Three threads overlap: one reads and parses documents, one tokenizes, this one writes the caches.

    Pairs for splits not in `cache_dirs` are skipped. A split that gets no document gets no cache.
    Returns counts per written split.
    """
    import fsspec
    from levanter.data.text import TextLmDatasetFormat, preprocessor_for_format
    from levanter.store.cache import CacheMetadata, SerialCacheWriter
    from tqdm import tqdm

    processor = preprocessor_for_format(TextLmDatasetFormat(), tokenizer, enforce_bos=True, enforce_eos=True)
    metadata = CacheMetadata(preprocessor_metadata=processor.metadata)

    def batches() -> Iterator[tuple[str, list[dict], list[dict]]]:
        pending: dict[str, list[dict]] = {split: [] for split in cache_dirs}
        for split, doc in (pair for chunk in _prefetch(_chunked(docs, 256)) for pair in chunk):
            if split not in pending:
                continue
            pending[split].append(doc)
            if len(pending[split]) == batch_size:
                yield split, pending[split], processor(pending[split])
                pending[split] = []
        for split, batch in pending.items():
            if batch:
                yield split, batch, processor(batch)

    counts: dict[str, dict] = {}
    with contextlib.ExitStack() as stack, tqdm(desc="tokenize", unit="doc") as bar:
        writers = {}
        for split, batch, rows in _prefetch(batches()):
            if split not in writers:
                fs, root = fsspec.core.url_to_fs(cache_dirs[split])
                if fs.exists(root):
                    fs.rm(root, recursive=True)
                writers[split] = stack.enter_context(
                    SerialCacheWriter(cache_dirs[split], processor.output_exemplar, metadata=metadata)
                )
                counts[split] = {"documents": 0, "tokens": 0, "bytes": 0}
            writers[split].write_batch(rows)
            c = counts[split]
            c["documents"] += len(batch)
            c["tokens"] += sum(len(r["input_ids"]) for r in rows)
            c["bytes"] += sum(len(d["text"].encode("utf-8")) for d in batch)
            bar.update(len(batch))
    for split, c in counts.items():
        logger.info(
            "wrote Levanter cache %s (%d docs, %d tokens) with tokenizer %s",
            cache_dirs[split],
            c["documents"],
            c["tokens"],
            tokenizer_path,
        )
    return counts


def build_levanter_cache(texts: Iterable[str], tokenizer_dir: str, cache_dir: str, batch_size: int = 1024) -> dict:
    """Public helper: a Levanter text cache at `cache_dir` (a split folder, e.g. OUT/train) from plain strings.

    Identical to what the tokenize step writes for the same texts; load it with
    `UrlSingleDatasetLMConfig(cache_dir=<parent of cache_dir>, tokenizer=tokenizer_dir)`.
    """
    tokenizer = _load_tokenizer(tokenizer_dir)
    pairs = (("cache", {"text": t}) for t in texts)
    counts = write_levanter_caches(pairs, tokenizer, tokenizer_dir, {"cache": cache_dir}, batch_size)
    if "cache" not in counts:
        raise EmptyInputError(f"build_levanter_cache: no texts for {cache_dir}")
    return counts["cache"]


def tokenize(config: TokenizeConfig) -> dict:
    """Run the tokenize step; returns the stats also written to stats.json."""
    tokenizer = _load_tokenizer(config.tokenizer)
    inputs = list_shards(config.input_path)
    val_inputs = list_shards(config.validation_path) if config.validation_path else None
    report = ReadReport()

    def routed() -> Iterator[tuple[str, dict]]:
        for path in inputs:
            for doc in read_documents(path, skip_bad=config.skip_bad_documents, report=report):
                yield ("validation" if is_validation(doc["id"], config.validation_fraction) else "train"), doc
        for path in val_inputs or []:
            for doc in read_documents(path, skip_bad=config.skip_bad_documents, report=report):
                yield "validation", doc

    stats_path = join(config.output_path, ".split_stats")
    wanted = [s for s in SPLITS if s == "train" or val_inputs is not None or config.validation_fraction > 0]
    stats: dict = {}
    todo = {}
    for split in wanted:
        cache_dir = join(config.output_path, split)
        done = _read_json(join(stats_path, f"{split}.json"))
        if _ledger_finished(cache_dir) and done is not None:
            logger.info("tokenize: %s is already finished, not rebuilding", cache_dir)
            stats[split] = done
        else:
            todo[split] = cache_dir
    if todo:
        counts = write_levanter_caches(routed(), tokenizer, config.tokenizer, todo, config.batch_size)
        if "train" in todo and "train" not in counts:
            raise EmptyInputError(f"tokenize: no documents for the train split in input path {config.input_path}")
        if "validation" in todo and "validation" not in counts:
            logger.warning("tokenize: the validation split is empty; no validation cache written")
        for split, c in counts.items():
            c["skipped_bad_documents"] = dict(sorted(report.skipped.items()))
            write_json(join(stats_path, f"{split}.json"), c)
            stats[split] = c
    stats = {split: stats[split] for split in SPLITS if split in stats}
    write_json(join(config.output_path, "stats.json"), stats)
    write_volatile_list(config.output_path, [f"{split}/shard_ledger.json" for split in SPLITS])
    write_json(
        join(config.output_path, "tokenize_info.json"),
        {
            "tokenizer": portable_path(config.tokenizer, config.output_path),
            "tokenizer_relative_to_this_folder": portable_path(config.tokenizer, config.output_path)
            != config.tokenizer,
            "splits": sorted(stats),
            "format": "levanter.data.text.TextLmDatasetFormat(text_key='text')",
            "enforce_bos": True,
            "enforce_eos": True,
            "levanter": "UrlSingleDatasetLMConfig(cache_dir=<this folder>, tokenizer=<tokenizer>)",
        },
    )
    return stats


def _read_json(path: str):
    import json

    import fsspec

    try:
        with fsspec.open(path, "r") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
