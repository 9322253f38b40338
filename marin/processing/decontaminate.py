"""Decontamination: find training documents that share word n-grams with evaluation sets, then remove or mark them.

A model evaluated on text it was trained on scores too well. This step compares every training
document with every document of the named evaluation sets by word n-grams (13 by default, as GPT-3
and Marin use), normalised as datatrove's `NGramsDecontFilter` does: `simplify_text` with its default
`TextNormConfig` (lowercase, no punctuation, no diacritics, digits folded, whitespace collapsed), then
datatrove's word tokenizer for the language, and each n-gram hashed with datatrove's 64-bit xxhash. A
training document is contaminated by an evaluation document when they share at least
`min_overlapping_ngrams` distinct n-grams. Datatrove only drops a document at its first hit; this step
counts every overlap, so the report says what overlapped with what and how much.

The evaluation side is small (benchmarks), so the driver builds one index of it first: the sorted
hashes of every evaluation n-gram and, for each, the evaluation documents it comes from, written to
`.work/eval_index-<content hash>.npz` (a content-addressed name, so a worker that caches an index by
path never serves a stale one). Training shards are then processed independently and resumably, each
by `decontaminate_shard(config, shard)`: shard i writes its report lines to `.shard_reports/`, its
counts to `.shard_stats/`, and last `part-0000i.jsonl.gz`, which marks it done. An evaluation document
shorter than n words has no n-gram and cannot be matched (as in datatrove); `stats.json` counts them.

Output: `part-*.jsonl.gz` (mode "remove": the clean documents; mode "mark": every document, the
contaminated ones with `metadata[<attribute>] = {eval set: most n-grams shared with one of its
documents}`), `contamination.jsonl` (one line per (training document, evaluation document) pair over
the minimum: `id`, `input`, `eval_set`, `eval_id`, `ngrams`, `example`, in shard and document order)
and `stats.json`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata  # noqa: F401  (datatrove's dependency check uses importlib.metadata without importing it)
import io
import json
import logging
from collections import Counter
from dataclasses import dataclass

import numpy as np

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    check_keys,
    encode_documents,
    list_shards,
    read_documents,
    read_json_many,
    shard_name,
    step_documents,
    write_json,
)
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.stepkit.sharding import LEDGERS, run_shards
from marin.storage import delete, join, read_bytes, write_bytes, write_volatile_list

logger = logging.getLogger(__name__)

MODES = ("remove", "mark")
REPORT = "contamination.jsonl"


@dataclass(frozen=True, kw_only=True)
class DecontaminateConfig(StepConfig):
    """Compare `input_path` with `eval_sets` by n-grams; remove or mark what overlaps."""

    input_path: str = input_field("documents")
    """Folder of training document shards, Parquet or JSON lines, on any fsspec path."""
    eval_sets: dict[str, str] = input_field("evaluation documents")
    """Evaluation sets by name: folders (or shard files) of Dolma documents, steps or plain paths."""
    output_path: str = output_field()
    """Folder for the output shards, contamination.jsonl and stats.json."""
    n_grams: int = 13
    """Words per n-gram."""
    min_overlapping_ngrams: int = 1
    """A training document is contaminated by an evaluation document sharing at least this many n-grams."""
    mode: str = "remove"
    """'remove': drop contaminated documents; 'mark': keep them, with metadata[attribute] set."""
    attribute: str = "contamination"
    """Key of `metadata` that mode 'mark' writes."""
    language: str = "eng"
    """Language of datatrove's word tokenizer (a datatrove `Languages` code)."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""
    workers: int = unversioned(1)
    """Processes working on training shards in parallel; the output does not depend on it."""

    def validate(self) -> None:
        check_keys("DecontaminateConfig", self.text_key, self.id_key)
        if not isinstance(self.eval_sets, dict) or not self.eval_sets:
            raise ValueError(
                f"DecontaminateConfig.eval_sets must be a non-empty dict of name -> path, got {self.eval_sets!r}"
            )
        if self.n_grams < 1:
            raise ValueError(f"DecontaminateConfig.n_grams must be >= 1, got {self.n_grams}")
        if self.min_overlapping_ngrams < 1:
            raise ValueError(
                f"DecontaminateConfig.min_overlapping_ngrams must be >= 1, got {self.min_overlapping_ngrams}"
            )
        if self.mode not in MODES:
            raise ValueError(f"DecontaminateConfig.mode must be one of {MODES}, got {self.mode!r}")
        if not self.attribute:
            raise ValueError("DecontaminateConfig.attribute must be a non-empty metadata key")
        if self.workers < 1:
            raise ValueError(f"DecontaminateConfig.workers must be >= 1, got {self.workers}")


@dataclass(frozen=True)
class DecontShard:
    """One training shard and the evaluation index to check it against."""

    index: int
    path: str
    eval_index: str


@functools.lru_cache(maxsize=2)
def _ngram_hasher(language: str, n: int):
    from datatrove.utils.hashing import HashConfig, create_hash_func
    from datatrove.utils.text import TextNormConfig, ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    tokenizer, hash_func, norm = load_word_tokenizer(language), create_hash_func(HashConfig()), TextNormConfig()
    words = _memo_words(tokenizer)

    def hashes(text: str) -> tuple[np.ndarray, list[str]]:
        """The hashes of the text's n-grams, in order (repeats included), and the n-grams themselves."""
        grams = [" ".join(g) for g in ngrams(words(simplify_text(text, norm)), n)]
        return np.array([hash_func(g) for g in grams], dtype=np.uint64), grams

    return hashes


def _memo_words(tokenizer, max_memo: int = 1_000_000):
    """datatrove's `word_tokenize` of simplified text, with each space-separated word tokenized once.

    After `simplify_text` words are separated by single spaces, and spaCy tokenizes each
    space-separated piece on its own (its rules never look across a space), so the tokens of a text
    are the tokens of its pieces, in order. datatrove runs spaCy on every document inside a fresh
    memory zone, which drops spaCy's own cache each time: 90 % of the step's time on Shakespeare. We
    keep a memo of pieces instead (cleared when it reaches `max_memo`). Other word tokenizers (not
    spaCy, e.g. for Chinese or Japanese, which do not split on spaces) are called as datatrove calls them.
    """
    from datatrove.utils.word_tokenizers import SpaCyTokenizer, strip_strings

    if not isinstance(tokenizer, SpaCyTokenizer) or tokenizer.language in ("zh", "ja", "vi", "th"):
        return tokenizer.word_tokenize
    memo: dict[str, list[str]] = {}

    def words(simplified: str) -> list[str]:
        pieces = simplified.split(" ")
        distinct = dict.fromkeys(pieces)
        new = [p for p in distinct if p not in memo]
        if new:
            if len(memo) + len(new) > max_memo:
                memo.clear()
                new = list(distinct)
            nlp = tokenizer.tokenizer
            with nlp.memory_zone():
                for piece in new:
                    memo[piece] = strip_strings([t.text for t in nlp.tokenizer(piece)])
        return [w for p in pieces for w in memo[p]]

    return words


def build_eval_index(config: DecontaminateConfig) -> tuple[str, dict]:
    """Write the evaluation n-gram index under .work/; returns its path and the evaluation sets' counts."""
    hasher = _ngram_hasher(config.language, config.n_grams)
    names: list[list[str]] = []
    pairs: list[np.ndarray] = []
    counts: dict[str, dict] = {}
    for name in sorted(config.eval_sets):
        c = {"documents": 0, "too_short": 0, "ngrams": 0}
        for shard in list_shards(config.eval_sets[name]):
            for doc in read_documents(shard, skip_bad=config.skip_bad_documents):
                hashes = np.unique(hasher(doc["text"])[0])
                c["documents"] += 1
                c["ngrams"] += len(hashes)
                c["too_short"] += not len(hashes)
                pairs.append(np.stack([hashes, np.full(len(hashes), len(names), dtype=np.uint64)], axis=1))
                names.append([name, doc["id"]])
        if not c["documents"]:
            raise EmptyInputError(f"DecontaminateConfig.eval_sets[{name!r}]: no documents in {config.eval_sets[name]}")
        if c["too_short"]:
            logger.warning(
                "decontaminate: %d documents of %s are shorter than %d words", c["too_short"], name, config.n_grams
            )
        counts[name] = c
    table = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.uint64)
    table = table[np.lexsort((table[:, 1], table[:, 0]))]
    buf = io.BytesIO()
    np.savez(buf, hashes=table[:, 0], owners=table[:, 1].astype(np.int64), names=np.array(json.dumps(names)))
    raw = buf.getvalue()
    path = join(config.output_path, ".work", f"eval_index-{hashlib.sha256(raw).hexdigest()[:16]}.npz")
    write_bytes(path, raw)
    return path, counts


@functools.lru_cache(maxsize=2)
def _load_index(path: str) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    raw = read_bytes(path)
    if raw is None:
        raise FileNotFoundError(f"decontaminate: evaluation index {path} is missing")
    with np.load(io.BytesIO(raw)) as z:
        return z["hashes"], z["owners"], json.loads(str(z["names"]))


def overlaps(text: str, config: DecontaminateConfig, eval_index: str) -> list[dict]:
    """The evaluation documents sharing at least min_overlapping_ngrams n-grams with `text`, most first."""
    index_hashes, owners, names = _load_index(eval_index)
    hashes, grams = _ngram_hasher(config.language, config.n_grams)(text)
    if not len(hashes) or not len(index_hashes):
        return []
    distinct, first = np.unique(hashes, return_index=True)
    lo = np.searchsorted(index_hashes, distinct, side="left")
    hi = np.searchsorted(index_hashes, distinct, side="right")
    hit = hi > lo
    if not hit.any():
        return []
    shared: Counter = Counter()
    example: dict[int, int] = {}
    for a, b, pos in zip(lo[hit], hi[hit], first[hit], strict=True):
        for owner in owners[a:b].tolist():
            shared[owner] += 1
            example[owner] = min(example.get(owner, pos), pos)
    found = [
        {"eval_set": names[o][0], "eval_id": names[o][1], "ngrams": n, "example": grams[example[o]]}
        for o, n in shared.items()
        if n >= config.min_overlapping_ngrams
    ]
    return sorted(found, key=lambda f: (-f["ngrams"], f["eval_set"], f["eval_id"]))


def _report_path(config: DecontaminateConfig, index: int) -> str:
    return join(config.output_path, ".shard_reports", f"part-{index:05d}.jsonl")


def _stats_path(config: DecontaminateConfig, index: int) -> str:
    return join(config.output_path, ".shard_stats", f"part-{index:05d}.json")


def decontaminate_shard(config: DecontaminateConfig, shard: DecontShard) -> dict:
    """Check one training shard; write its report lines, its counts, then its output shard (done)."""
    report = ReadReport()
    out, lines = [], []
    by_set: Counter = Counter()
    contaminated = 0
    for doc in step_documents(config, shard.path, report):
        found = overlaps(doc["text"], config, shard.eval_index)
        if not found:
            out.append(doc)
            continue
        contaminated += 1
        worst: dict[str, int] = {}
        for f in found:
            worst[f["eval_set"]] = max(worst.get(f["eval_set"], 0), f["ngrams"])
            lines.append({"id": doc["id"], "input": shard.path.rsplit("/", 1)[-1], **f})
        by_set.update(worst.keys())
        if config.mode == "mark":
            out.append({**doc, "metadata": {**doc["metadata"], config.attribute: dict(sorted(worst.items()))}})
    stats = {
        "documents": report.documents,
        "contaminated": contaminated,
        "contaminated_by_eval_set": dict(sorted(by_set.items())),
        "skipped_bad_documents": dict(sorted(report.skipped.items())),
    }
    body = "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    write_bytes(_report_path(config, shard.index), body.encode("utf-8"))
    write_json(_stats_path(config, shard.index), stats)
    write_bytes(join(config.output_path, shard_name(shard.index)), encode_documents(out))
    return stats


def decontaminate(config: DecontaminateConfig) -> dict:
    """Run the decontamination step; returns the totals also written to stats.json."""
    paths = list_shards(config.input_path)
    eval_index, eval_counts = build_eval_index(config)
    run_shards(
        decontaminate_shard,
        config,
        [DecontShard(i, p, eval_index) for i, p in enumerate(paths)],
        desc="decontaminate",
        ledger_dir=join(config.output_path, LEDGERS, "decontaminate"),
        workers=config.workers,
    )
    write_volatile_list(config.output_path, [LEDGERS + "/"])
    per_shard = read_json_many([_stats_path(config, i) for i in range(len(paths))])
    documents = sum(s["documents"] for s in per_shard)
    if documents == 0:
        raise EmptyInputError(f"decontaminate: no documents in input path {config.input_path}")
    report = b"".join(read_bytes(_report_path(config, i)) or b"" for i in range(len(paths)))
    write_bytes(join(config.output_path, REPORT), report)
    contaminated = sum(s["contaminated"] for s in per_shard)
    by_set: Counter = Counter()
    skipped: Counter = Counter()
    for s in per_shard:
        by_set.update(s["contaminated_by_eval_set"])
        skipped.update(s["skipped_bad_documents"])
    for name, c in eval_counts.items():
        c["contaminated_training_documents"] = by_set.get(name, 0)
    stats = {
        "shards": len(paths),
        "documents": documents,
        "contaminated": contaminated,
        "removed": contaminated if config.mode == "remove" else 0,
        "kept": documents - contaminated if config.mode == "remove" else documents,
        "mode": config.mode,
        "n_grams": config.n_grams,
        "min_overlapping_ngrams": config.min_overlapping_ngrams,
        "overlapping_pairs": report.count(b"\n"),
        "eval_sets": eval_counts,
        "skipped_bad_documents": dict(sorted(skipped.items())),
    }
    write_json(join(config.output_path, "stats.json"), stats)
    delete(join(config.output_path, ".work"), recursive=True)
    logger.info(
        "decontaminate: %d of %d documents overlap the eval sets -> %s", contaminated, documents, config.output_path
    )
    return stats
