"""Tokenize documents into Levanter's cache format, train and validation splits, shard by shard.

Contract with training: `output_path/train/` and `output_path/validation/` are each exactly the cache
Levanter builds itself for `UrlSingleDatasetLMConfig(cache_dir=output_path, tokenizer=TOKENIZER,
format=TextLmDatasetFormat())` on that split, so training with `cache_dir=output_path` and the same
`tokenizer` loads them without rebuilding. The ids are those of Levanter's own preprocessor (bos and
eos added as Levanter adds them) and the files are written by Levanter's `SerialCacheWriter`
(`levanter_cache.py`). Levanter's Ray cache builder is not used: it hangs on two-core machines. Its
ledger metadata names the tokenizer's absolute path, so the two `shard_ledger.json` files are listed
in `volatile_files.txt` (the same caches built under another prefix differ only there).

Input shard i is tokenized on its own into `.parts/` (its documents' ids and lengths per split) by
`marin.stepkit.sharding.run_shards`: a Ray task per shard on a cluster, a local pool of `workers` processes
otherwise, inline with one (each shard pipelined over threads: `encode_pipelined`). A finished shard's
counts sit in its ledger (`.parts/.shards/`), so a rerun after a crash or a kill -9 tokenizes only the
shards without one, on a bucket as on disk. The caches are then assembled from the parts in shard
order, which is cheap (no tokenizing), so their bytes depend neither on where shards ran nor on where
a crash happened; on a bucket the assembly keeps at most about one Levanter write chunk on local disk
(`levanter_cache.write_cache`). The parts and their ledgers are deleted once the caches, `stats.json`
and `tokenize_info.json` are written. Which documents are validation: those of `validation_path` when
given, otherwise a fraction chosen by a hash of the document id (`validation_fraction`), so a
document's split never depends on the shard layout.
"""

from __future__ import annotations

import array
import contextlib
import contextvars
import ctypes
import functools
import hashlib
import json
import logging
import os
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO

import numpy as np

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    check_keys,
    list_shards,
    read_documents,
    write_json,
)
from marin.processing.levanter_cache import (
    FastEncoder,
    LevanterEncoder,
    encoder_from_spec,
    is_registered,
    ledger_finished,
    register_encoder,
    write_cache,
)
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.stepkit.sharding import LEDGERS, ShardResources, ray_available, run_shards
from marin.storage import (
    delete,
    exists,
    join,
    open_read,
    open_write,
    portable_path,
    read_range,
    size,
    write_bytes,
    write_volatile_list,
)

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")
PARTS = ".parts"
BATCH_CHARS = 1 << 20


@dataclass(frozen=True, kw_only=True)
class TokenizeConfig(StepConfig):
    """Tokenize `input_path` (and `validation_path`) into Levanter caches under `output_path`."""

    input_path: str = input_field("documents")
    """Folder of document shards, Parquet or JSON lines (.jsonl, .jsonl.gz, .jsonl.zst), on any fsspec path."""
    tokenizer: str = input_field("tokenizer folder", holds_any=("tokenizer.json", "tokenizer_config.json"))
    """A transformers tokenizer folder (a train_tokenizer step's output, or any path)."""
    output_path: str = output_field()
    """Folder for train/, validation/, stats.json and tokenize_info.json."""
    validation_path: str | None = input_field("documents", default=None)
    """Documents for the validation split; when set, every input document is train."""
    validation_fraction: float = 0.05
    """Without validation_path: the fraction of documents (by hash of id) that go to validation."""
    batch_size: int = unversioned(1024)
    """Documents per tokenizer call, at most (a call also ends at ~1 Mi characters); the output does not depend on it."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""
    workers: int = unversioned(1)
    """Processes tokenizing input shards in parallel when Ray is absent (1: inline). The output does not depend on it."""
    shard_resources: ShardResources = unversioned(ShardResources())
    """What each shard asks of a Ray cluster when the step runs on one."""

    def validate(self) -> None:
        check_keys("TokenizeConfig", self.text_key, self.id_key)
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


def read_shard(
    shard_path: str,
    validation_fraction: float | None,
    skip_bad: bool,
    text_key: str = "text",
    id_key: str | None = "id",
    report: ReadReport | None = None,
) -> Iterator[tuple[str, str]]:
    """(text, split) of each document of one input shard, in file order, read as they are consumed
    (None as the fraction: every document is validation); skipped lines are counted in `report`."""
    for doc in read_documents(shard_path, skip_bad=skip_bad, report=report, text_key=text_key, id_key=id_key):
        to_validation = validation_fraction is None or is_validation(doc["id"], validation_fraction)
        yield doc["text"], "validation" if to_validation else "train"


class PartWriter:
    """A shard's part, written while its batches are encoded: per split, `part_path`.<split>.bin holds the
    documents' ids end to end (little-endian, the encoder's dtype) and then their lengths (int64), published
    (marin.storage.open_write) only when the shard is done, so memory holds no more than the batches in flight.

    Use it as a context manager: leaving the block by an exception publishes nothing. `add` takes a batch
    of (text, split) documents and their ids, in document order.
    """

    def __init__(self, part_path: str, dtype):
        self.part_path = part_path
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.documents = 0
        self._streams = contextlib.ExitStack()
        self._files: dict[str, IO] = {}
        self._lengths = {split: array.array("q") for split in SPLITS}
        self._bytes: dict[str, int] = dict.fromkeys(SPLITS, 0)

    def __enter__(self) -> PartWriter:
        self._streams.__enter__()
        return self

    def add(self, docs: Sequence[tuple[str, str]], ids: Sequence[np.ndarray]) -> None:
        if len(ids) != len(docs):
            raise RuntimeError(
                f"tokenize: {len(ids)} id arrays for a batch of {len(docs)} documents of {self.part_path}"
                " (a batch failed); its part is not marked done"
            )
        for (text, split), row in zip(docs, ids, strict=True):
            f = self._files.get(split)
            if f is None:
                f = self._files[split] = self._streams.enter_context(open_write(part_file(self.part_path, split)))
            f.write(np.ascontiguousarray(row, dtype=self.dtype).data)
            self._lengths[split].append(len(row))
            self._bytes[split] += len(text.encode("utf-8"))
        self.documents += len(docs)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            for split, f in self._files.items():
                f.write(np.frombuffer(self._lengths[split], dtype=np.int64).astype("<i8", copy=False).data)
        self._streams.__exit__(exc_type, exc, tb)

    def counts(self) -> dict[str, dict]:
        """Documents, tokens and bytes of text per split (the part's ledger stats)."""
        return {
            split: {
                "documents": len(self._lengths[split]),
                "tokens": int(sum(self._lengths[split])),
                "bytes": self._bytes[split],
            }
            for split in SPLITS
        }


def part_file(part_path: str, split: str) -> str:
    return f"{part_path}.{split}.bin"


@dataclass(frozen=True)
class TokenizeJob:
    """What every shard of one tokenize run shares (the run's `process_shard` config)."""

    encoder_spec: str
    """The path of the encoder's `worker_spec()` JSON, fresh per run (see encoder_from_spec)."""
    skip_bad: bool
    """Skip and count bad lines instead of failing."""
    batch_size: int
    """Documents per tokenizer call."""
    text_key: str = "text"
    """Field or column holding each document's text."""
    id_key: str | None = "id"
    """Field or column holding each document's id (None: derived from shard and row)."""
    cores: int = 0
    """Cores a shard may use in a process other than the driver's (a pool worker or a Ray task); 0: all."""


@dataclass(frozen=True)
class TokenizeShard:
    """One input shard and the part it is tokenized into."""

    input_path: str
    """The documents (a jsonl(.gz) file)."""
    validation_fraction: float | None
    """The share of documents sent to validation by the hash of their id; None: all (a validation_path shard)."""
    part_path: str
    """Where its ids go: `part_path`.<split>.bin (`PartWriter`)."""


def tokenize_shard(job: TokenizeJob, shard: TokenizeShard) -> dict:
    """Tokenize one input shard into its part, start to end, streaming; returns its counts.

    Documents are read, encoded and written to the part as they come (`encode_pipelined` into a
    `PartWriter`), so a shard's memory is its batches in flight whatever its size. In the driver's own
    process (inline) the Rust tokenizer spreads each call over every core, with two calls in flight. A
    process of its own (a pool worker or a Ray task) gets `job.cores`: with one, the Rust calls run serially
    in one encoder thread (`TOKENIZERS_PARALLELISM=false` while the shard runs), since a rayon pool of every
    core in each of several processes oversubscribes the cores and its idle threads spin (measured: 28.2
    CPU-s for five shards on two workers, 21.4 with one rayon thread each). With more, rayon gets that many
    threads if its pool has not started yet (`RAYON_NUM_THREADS`).
    """
    encoder = encoder_from_spec(job.encoder_spec)
    report = ReadReport()
    docs = read_shard(shard.input_path, shard.validation_fraction, job.skip_bad, job.text_key, job.id_key, report)
    with (
        _cores(0 if is_registered(job.encoder_spec) else job.cores) as encoders,
        PartWriter(shard.part_path, encoder.dtype) as part,
    ):
        encode_pipelined(encoder, docs, job.batch_size, part.add, encoders=encoders)
    logger.info("tokenized shard %s (%d documents) into %s", shard.input_path, part.documents, shard.part_path)
    del docs
    _release_freed_memory()
    return {"splits": part.counts(), "skipped_bad_documents": dict(sorted(report.skipped.items()))}


@contextlib.contextmanager
def _cores(cores: int) -> Iterator[int]:
    """Limit the Rust tokenizer to `cores` (0: no limit) while the block runs; yields the encoder threads to use."""
    if cores <= 0:
        yield 2
        return
    name, value = ("TOKENIZERS_PARALLELISM", "false") if cores == 1 else ("RAYON_NUM_THREADS", str(cores))
    before = os.environ.get(name)
    if name == "RAYON_NUM_THREADS" and before is not None:
        yield 2
        return
    os.environ[name] = value
    try:
        yield 1 if cores == 1 else 2
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _release_freed_memory() -> None:
    """Return freed heap to the OS (glibc's malloc_trim) so a process that handles shard after shard stays flat.

    The encoder threads allocate in their own malloc arenas, which glibc keeps after the shard's texts
    and arrays are freed; without a trim the next shard's reads land beside them and peak RSS grows
    with the number of shards a process takes. The driver trims after each run of ~4 Mi tokens it reads
    back from a part to assemble the caches (measured, one shard of 75 MB: the assembly's peak 260 MB
    trimming only after the part, against 225 MB at 25 MB; docs/benchmarks-data.md).
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim from the symbols already loaded (no `find_library`, which runs `ldconfig`); None elsewhere."""
    return getattr(ctypes.CDLL(None), "malloc_trim", None)


def _submit(pool: ThreadPoolExecutor, fn, *args) -> Future:
    return pool.submit(contextvars.copy_context().run, fn, *args)


def encode_pipelined(
    encoder: LevanterEncoder | FastEncoder,
    docs: Iterable[tuple[str, str]],
    batch_size: int,
    sink: Callable[[list[tuple[str, str]], list[np.ndarray]], None],
    encoders: int = 2,
) -> None:
    """Encodes the (text, split) `docs` as they are read, handing each batch and its ids to `sink`, in order,
    keeping the tokenizer busy.

    Texts go to the tokenizer in batches of at most `batch_size` texts and about BATCH_CHARS characters
    (the encodings of a batch take ~20 bytes per character until their arrays are made, so batches of
    long documents would otherwise grow with the documents). `encoders` threads (two by default) hand
    batches to the Rust tokenizer, which releases the GIL and, unless limited (`_cores`), spreads each
    call over every core (with two calls in flight, the cores that finish one call's last documents
    early start on the next); a finisher thread makes each batch's arrays and calls `sink`, in order,
    under the GIL meanwhile, while this thread reads the next documents. At most `encoders` + 1 batches
    are being encoded and two wait for the finisher, so memory does not depend on how many documents
    there are. Every thread runs in a copy of this context, so what it logs reaches the step's log.
    """
    with (
        ThreadPoolExecutor(encoders, thread_name_prefix="tokenize-encode") as pool,
        ThreadPoolExecutor(1, thread_name_prefix="tokenize-finish") as finisher,
    ):
        encoding: deque[Future] = deque()
        finishing: deque[Future] = deque()
        for batch in _batches(docs, batch_size):
            encoding.append(_submit(pool, encoder.encode_later, [text for text, _ in batch]))
            finishing.append(_submit(finisher, _finish, sink, batch, encoding[-1]))
            while len(encoding) > encoders:  # one batch queued behind those encoding: the encoders never wait
                encoding.popleft().result()
            while len(finishing) > 2:
                finishing.popleft().result()
            del batch
        while finishing:
            finishing.popleft().result()


def _batches(docs: Iterable[tuple[str, str]], batch_size: int) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    chars = 0
    for doc in docs:
        if batch and (len(batch) >= batch_size or chars >= BATCH_CHARS):
            yield batch
            batch, chars = [], 0
        batch.append(doc)
        chars += len(doc[0])
    if batch:
        yield batch


def _finish(sink, batch: list[tuple[str, str]], encoded: Future) -> None:
    sink(batch, encoded.result()())


READ_TOKENS = 1 << 22
"""Tokens per read of a part when the caches are assembled (a few of Levanter's writes, ~32 MB of int64)."""


def _read_part(part_path: str, split: str, counts: dict, dtype) -> Iterator[list[np.ndarray]]:
    """The rows of a part's split (`PartWriter`'s file), in runs of about READ_TOKENS tokens."""
    path = part_file(part_path, split)
    dtype = np.dtype(dtype).newbyteorder("<")
    documents, tokens = counts["documents"], counts["tokens"]
    found = size(path)
    if found is None:
        raise FileNotFoundError(f"tokenize: part {path} is missing although its shard ledger says done")
    if found != tokens * dtype.itemsize + documents * 8:
        raise ValueError(
            f"tokenize: part {path} holds {found} bytes, not the {tokens} tokens and {documents} lengths its ledger"
            " names (written by another version?); delete the step's .parts folder to tokenize again"
        )
    lengths = np.frombuffer(read_range(path, tokens * dtype.itemsize, documents * 8), dtype="<i8")
    ends = np.cumsum(lengths)
    with open_read(path) as f:
        first = 0
        while first < documents:
            start = int(ends[first - 1]) if first else 0
            last = max(first + 1, int(np.searchsorted(ends, start + READ_TOKENS, side="right")))
            run = np.frombuffer(f.read((int(ends[last - 1]) - start) * dtype.itemsize), dtype=dtype)
            yield np.split(run, ends[first : last - 1] - start)
            del run
            _release_freed_memory()  # the runs written since are freed: the heap stays flat however long the part
            first = last


def _cores_per_shard(config: TokenizeConfig) -> int:
    """The cores each shard gets outside the driver: its Ray task's CPUs on a cluster, else a share of this machine's."""
    if ray_available():
        return max(1, int(config.shard_resources.cpu))
    return max(1, (os.cpu_count() or 1) // config.workers)


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
    shards = [
        TokenizeShard(path, config.validation_fraction, join(parts_root, _part_name("input", i)))
        for i, path in enumerate(inputs)
    ]
    shards += [
        TokenizeShard(path, None, join(parts_root, _part_name("validation", i))) for i, path in enumerate(val_inputs)
    ]
    # shard tasks elsewhere rebuild the encoder from its spec, under a fresh name per run (see encoder_from_spec);
    # shards run here use this very encoder
    spec_path = join(parts_root, f"encoder-{uuid.uuid4().hex[:12]}.json")
    write_bytes(spec_path, json.dumps(encoder.worker_spec()).encode("utf-8"))
    register_encoder(spec_path, encoder)
    parts = run_shards(
        tokenize_shard,
        TokenizeJob(
            spec_path,
            config.skip_bad_documents,
            config.batch_size,
            config.text_key,
            config.id_key,
            cores=_cores_per_shard(config),
        ),
        shards,
        desc="tokenize",
        ledger_dir=join(parts_root, LEDGERS),
        workers=config.workers,
        resources=config.shard_resources,
    )
    part_paths = [shard.part_path for shard in shards]

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
                    yield from _read_part(path, split, part["splits"][split], encoder.dtype)

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
