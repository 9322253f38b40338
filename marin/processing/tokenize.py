"""Tokenize documents into Levanter's cache format, train and validation splits, shard by shard.

Contract with training: `output_path/train/` and `output_path/validation/` are each exactly the cache
Levanter builds itself for `UrlSingleDatasetLMConfig(cache_dir=output_path, tokenizer=TOKENIZER,
format=TextLmDatasetFormat())` on that split, so training with `cache_dir=output_path` and the same
`tokenizer` loads them without rebuilding. The ids are those of Levanter's own preprocessor (bos and
eos added as Levanter adds them) and the files are written by Levanter's `SerialCacheWriter`
(`levanter_cache.py`). Levanter's Ray cache builder is not used: it hangs on two-core machines. Its
ledger metadata names the tokenizer's absolute path, so the two `shard_ledger.json` files are listed
in `volatile_files.txt` (the same caches built under another prefix differ only there).

Input shard i is tokenized on its own into `.parts/` (its documents' ids and lengths per split, then
a small json that marks the part done), by `workers` processes, or with 1 in a pipeline of three
threads here (`tokenize_inline`: reading the next shard and making the last batch's arrays overlap
the tokenizing, which releases the GIL and uses every core); a rerun after a crash tokenizes only
the shards with no part. The caches are then assembled from the parts in shard order, which is cheap
(no tokenizing), so their bytes depend neither on the worker count nor on where a crash happened; the
parts are deleted once the caches, `stats.json` and `tokenize_info.json` are written. Which documents
are validation: those of `validation_path` when given, otherwise a fraction chosen by a hash of the
document id (`validation_fraction`), so a document's split never depends on the shard layout.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import io
import json
import logging
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    list_shards,
    read_documents,
    read_json_many,
    write_json,
)
from marin.processing.levanter_cache import LevanterEncoder, encoder_from_spec, ledger_finished, write_cache
from marin.processing.shards import pending_shards, run_shards
from marin.step_config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.storage import delete, exists, join, portable_path, read_bytes, write_bytes, write_volatile_list

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")
PARTS = ".parts"


@dataclass(frozen=True, kw_only=True)
class TokenizeConfig(StepConfig):
    """Tokenize `input_path` (and `validation_path`) into Levanter caches under `output_path`."""

    input_path: str = input_field("documents")
    """Folder of Dolma jsonl(.gz) shards (any fsspec path)."""
    tokenizer: str = input_field("tokenizer folder", holds_any=("tokenizer.json", "tokenizer_config.json"))
    """A transformers tokenizer folder (a train_tokenizer step's output, or any path)."""
    output_path: str = output_field()
    """Folder for train/, validation/, stats.json and tokenize_info.json."""
    validation_path: str | None = input_field("documents", default=None)
    """Documents for the validation split; when set, every input document is train."""
    validation_fraction: float = 0.05
    """Without validation_path: the fraction of documents (by hash of id) that go to validation."""
    batch_size: int = unversioned(1024)
    """Documents per tokenizer call (the output does not depend on it)."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    workers: int = unversioned(1)
    """Processes tokenizing input shards in parallel (1: inline). The output does not depend on it."""

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"TokenizeConfig.batch_size must be >= 1, got {self.batch_size}")
        if self.workers < 1:
            raise ValueError(f"TokenizeConfig.workers must be >= 1, got {self.workers}")
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


def _part_name(kind: str, index: int) -> str:
    return f"{kind}-{index:05d}"


@dataclass(frozen=True)
class ShardTexts:
    """What `read_shard` read: texts in file order, the split of each, and what was skipped."""

    shard_path: str
    texts: list[str]
    splits: list[str]
    report: ReadReport


def read_shard(shard_path: str, validation_fraction: float | None, skip_bad: bool) -> ShardTexts:
    """The texts of one input shard and the split of each (None: every document is validation)."""
    report = ReadReport()
    texts: list[str] = []
    splits: list[str] = []
    for doc in read_documents(shard_path, skip_bad=skip_bad, report=report):
        texts.append(doc["text"])
        to_validation = validation_fraction is None or is_validation(doc["id"], validation_fraction)
        splits.append("validation" if to_validation else "train")
    return ShardTexts(shard_path, texts, splits, report)


def write_part(part_path: str, shard: ShardTexts, ids: list[np.ndarray]) -> None:
    """Write a shard's ids as `part_path`.<split>.npz (ids and lengths), then `part_path`.json (done)."""
    if len(ids) != len(shard.texts):
        raise RuntimeError(
            f"tokenize: {len(ids)} id arrays for the {len(shard.texts)} documents of {shard.shard_path}"
            " (a batch failed); its part is not marked done"
        )
    counts: dict[str, dict] = {}
    for split in SPLITS:
        mine = [i for i, s in enumerate(shard.splits) if s == split]
        lengths = np.array([len(ids[i]) for i in mine], dtype=np.int64)
        counts[split] = {
            "documents": len(mine),
            "tokens": int(lengths.sum()),
            "bytes": sum(len(shard.texts[i].encode("utf-8")) for i in mine),
        }
        if mine:
            buf = io.BytesIO()
            np.savez(buf, ids=np.concatenate([ids[i] for i in mine]), lengths=lengths)
            write_bytes(f"{part_path}.{split}.npz", buf.getvalue())
    write_json(part_path + ".json", {"splits": counts, "skipped_bad_documents": dict(shard.report.skipped)})
    logger.info("tokenized shard %s (%d documents) into %s", shard.shard_path, len(shard.texts), part_path)


def tokenize_shard(
    encoder_spec: str,
    skip_bad: bool,
    batch_size: int,
    shard_path: str,
    validation_fraction: float | None,
    part_path: str,
) -> None:
    """Tokenize one input shard into its part, start to end (what a worker process runs).

    encoder_spec: the path of the encoder's `worker_spec()` JSON. validation_fraction: the share of
    documents sent to validation by the hash of their id; None sends every document there (a
    `validation_path` shard).
    """
    encoder = encoder_from_spec(encoder_spec)
    shard = read_shard(shard_path, validation_fraction, skip_bad)
    ids: list[np.ndarray] = []
    for start in range(0, len(shard.texts), batch_size):
        ids.extend(encoder.encode(shard.texts[start : start + batch_size]))
    write_part(part_path, shard, ids)


def _extend_with(arrays: list[np.ndarray], encoded: Future) -> None:
    arrays.extend(encoded.result()())


def tokenize_inline(
    tasks: list[tuple[str, float | None, str]], encoder: LevanterEncoder, skip_bad: bool, batch_size: int, bar
) -> None:
    """Tokenize `tasks` (shard path, validation fraction, part path) here, keeping the tokenizer busy.

    A pipeline: a reader thread reads the next shard; two encoder threads hand batches to the Rust
    tokenizer, which releases the GIL and spreads each call over every core (two calls in flight, so
    the cores that finish one call's last documents early start on the next call); a finisher thread
    makes each batch's arrays, in order, and writes each shard's part. This thread only feeds them.
    At most one shard is read ahead, three batches are being encoded and six wait for the finisher, so
    memory stays bounded by about two shards. Every thread runs in a copy of this context, so what
    they log reaches the step's log.
    """

    def submit(pool: ThreadPoolExecutor, fn, *args) -> Future:
        return pool.submit(contextvars.copy_context().run, fn, *args)

    with (
        ThreadPoolExecutor(1, thread_name_prefix="tokenize-read") as reader,
        ThreadPoolExecutor(2, thread_name_prefix="tokenize-encode") as encoders,
        ThreadPoolExecutor(1, thread_name_prefix="tokenize-finish") as finisher,
    ):
        reads = deque(submit(reader, read_shard, path, fraction, skip_bad) for path, fraction, _ in tasks[:1])
        encoding: deque[Future] = deque()
        finishing: deque[Future] = deque()
        for n, (_, _, part_path) in enumerate(tasks):
            if n + 1 < len(tasks):
                path, fraction, _ = tasks[n + 1]
                reads.append(submit(reader, read_shard, path, fraction, skip_bad))
            shard = reads.popleft().result()
            arrays: list[np.ndarray] = []
            for start in range(0, len(shard.texts), batch_size):
                encoding.append(submit(encoders, encoder.encode_later, shard.texts[start : start + batch_size]))
                finishing.append(submit(finisher, _extend_with, arrays, encoding[-1]))
                while len(encoding) > 2:  # one batch queued behind the two encoding: the encoders never wait
                    encoding.popleft().result()
                while len(finishing) > 6:
                    finishing.popleft().result()
            finishing.append(submit(finisher, _write_part_and_count, part_path, shard, arrays, bar))
        while finishing:
            finishing.popleft().result()


def _write_part_and_count(part_path: str, shard: ShardTexts, ids: list[np.ndarray], bar) -> None:
    write_part(part_path, shard, ids)
    bar.update(1)


def _read_part(part_path: str, split: str) -> list[np.ndarray]:
    raw = read_bytes(f"{part_path}.{split}.npz")
    if raw is None:
        raise FileNotFoundError(f"tokenize: part {part_path}.{split}.npz is missing although its .json says done")
    with np.load(io.BytesIO(raw)) as part:
        ids, lengths = part["ids"], part["lengths"]
    return np.split(ids, np.cumsum(lengths)[:-1])


def tokenize(config: TokenizeConfig) -> dict:
    """Run the tokenize step; returns the stats also written to stats.json."""
    inputs = list_shards(config.input_path)
    val_inputs = list_shards(config.validation_path) if config.validation_path else []
    parts_root = join(config.output_path, PARTS)
    if not any(exists(join(config.tokenizer, name)) for name in ("tokenizer.json", "tokenizer_config.json")):
        raise FileNotFoundError(
            f"TokenizeConfig.tokenizer: {config.tokenizer} is not a tokenizer folder "
            "(no tokenizer.json or tokenizer_config.json)"
        )
    encoder = LevanterEncoder(config.tokenizer)
    tasks = [
        (path, config.validation_fraction, join(parts_root, _part_name("input", i))) for i, path in enumerate(inputs)
    ]
    tasks += [(path, None, join(parts_root, _part_name("validation", i))) for i, path in enumerate(val_inputs)]
    part_paths = [part_path for _, _, part_path in tasks]

    def done_path(i: int) -> str:
        return part_paths[i] + ".json"

    if config.workers == 1:
        todo = pending_shards(len(tasks), done_path, "tokenize")
        with tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc="tokenize", unit="shard") as bar:
            tokenize_inline([tasks[i] for i in todo], encoder, config.skip_bad_documents, config.batch_size, bar)
    else:  # worker processes rebuild the encoder from its spec, under a fresh name per run: see encoder_from_spec
        spec_path = join(parts_root, f"encoder-{uuid.uuid4().hex[:12]}.json")
        write_bytes(spec_path, json.dumps(encoder.worker_spec()).encode("utf-8"))
        run_shards(
            functools.partial(tokenize_shard, spec_path, config.skip_bad_documents, config.batch_size),
            tasks,
            workers=config.workers,
            desc="tokenize",
            done_path=done_path,
        )

    parts = read_json_many([p + ".json" for p in part_paths])
    skipped: Counter = Counter()
    for part in parts:
        skipped.update(part["skipped_bad_documents"])
    stats: dict[str, dict] = {}
    for split in SPLITS:
        c = {k: sum(part["splits"][split][k] for part in parts) for k in ("documents", "tokens", "bytes")}
        if c["documents"]:
            stats[split] = {**c, "skipped_bad_documents": dict(sorted(skipped.items()))}
    if "train" not in stats:
        raise EmptyInputError(f"tokenize: no documents for the train split in input path {config.input_path}")
    if "validation" not in stats and (val_inputs or config.validation_fraction > 0):
        logger.warning("tokenize: the validation split is empty; no validation cache written")

    for split in stats:
        cache_dir = join(config.output_path, split)
        if ledger_finished(cache_dir):
            logger.info("tokenize: %s is already finished, not rebuilding", cache_dir)
            continue

        def batches(split=split) -> Iterator[list[np.ndarray]]:
            for path, part in zip(part_paths, parts, strict=True):
                if part["splits"][split]["documents"]:
                    yield _read_part(path, split)

        write_cache(cache_dir, encoder, batches())

    write_json(join(config.output_path, "stats.json"), stats)
    write_volatile_list(config.output_path, [f"{split}/shard_ledger.json" for split in SPLITS])
    tokenizer = portable_path(config.tokenizer, config.output_path)
    write_json(
        join(config.output_path, "tokenize_info.json"),
        {
            "tokenizer": tokenizer,
            "tokenizer_relative_to_this_folder": tokenizer != config.tokenizer,
            "splits": sorted(stats),
            "format": "levanter.data.text.TextLmDatasetFormat(text_key='text')",
            "enforce_bos": True,
            "enforce_eos": True,
            "levanter": "UrlSingleDatasetLMConfig(cache_dir=<this folder>, tokenizer=<tokenizer>)",
        },
    )
    delete(parts_root, recursive=True)
    return stats
