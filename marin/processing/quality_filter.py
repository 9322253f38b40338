"""Keep the documents a fastText quality classifier scores high, writing each kept document's score.

Marin's `consolidate` step for a quality attribute, in one step: every document is scored with the
classifier of a `train_quality_classifier` step (P(positive label), rounded to 6 digits), and those
at or above the threshold are kept, input order preserved, with the score in
`metadata[<attribute>]`. The threshold is either given (`threshold`) or computed so that a fraction of
the corpus is kept (`keep_fraction`: the score of the ceil(fraction * N)-th best document over all
shards; ties at that score are kept too).

Two sharded passes, each resumable per shard: `score_shard` writes `.scores/part-0000i.npy` (one
float64 per document), then `keep_shard` writes `part-0000i.jsonl.gz` and `.shard_stats/part-0000i.json`.
Only the first pass runs the model, and `keep_fraction` needs every score before any shard can be
written. Scores depend only on the model and the document, so the output is the same for any worker
count. `stats.json` gives documents, kept, removed, the threshold used and a histogram of scores.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    check_keys,
    encode_documents,
    list_shards,
    read_json_many,
    shard_name,
    step_documents,
    write_json,
)
from marin.processing.quality_classifier import INFO, MODEL, fasttext_text, positive_scores
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.stepkit.sharding import LEDGERS, run_shards
from marin.storage import is_local, join, read_bytes, strip_protocol, write_bytes, write_volatile_list

logger = logging.getLogger(__name__)

SCORES = ".scores"
SHARD_STATS = ".shard_stats"


@dataclass(frozen=True, kw_only=True)
class QualityFilterConfig(StepConfig):
    """Score every document under `input_path` with `classifier` and keep the high scorers."""

    input_path: str = input_field("documents")
    """Folder of document shards, Parquet or JSON lines (.jsonl, .jsonl.gz, .jsonl.zst), on any fsspec path."""
    classifier: str = input_field("quality classifier", holds_any=(MODEL,))
    """A train_quality_classifier step's output (model.bin and classifier_info.json)."""
    output_path: str = output_field()
    """Folder for the kept shards and stats.json."""
    threshold: float | None = 0.5
    """Keep documents whose score is at least this; None when keep_fraction is set."""
    keep_fraction: float | None = None
    """Instead of a threshold: keep this fraction of the documents, the best scored (ties kept)."""
    attribute: str = "quality_score"
    """Key of `metadata` the score is written under in kept documents."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""
    workers: int = unversioned(1)
    """Processes scoring shards in parallel; the output does not depend on it."""

    def validate(self) -> None:
        check_keys("QualityFilterConfig", self.text_key, self.id_key)
        if (self.threshold is None) == (self.keep_fraction is None):
            raise ValueError(
                "QualityFilterConfig: set exactly one of threshold and keep_fraction, "
                f"got threshold={self.threshold} keep_fraction={self.keep_fraction}"
            )
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"QualityFilterConfig.threshold must be in [0, 1], got {self.threshold}")
        if self.keep_fraction is not None and not 0.0 < self.keep_fraction <= 1.0:
            raise ValueError(f"QualityFilterConfig.keep_fraction must be in (0, 1], got {self.keep_fraction}")
        if not self.attribute:
            raise ValueError("QualityFilterConfig.attribute must be a non-empty metadata key")
        if self.workers < 1:
            raise ValueError(f"QualityFilterConfig.workers must be >= 1, got {self.workers}")


@dataclass(frozen=True)
class QualityShard:
    """One input shard of the step, and (second pass) the threshold to keep by."""

    index: int
    path: str
    threshold: float | None = None


@functools.lru_cache(maxsize=2)
def load_classifier(classifier: str) -> tuple[object, dict]:
    """The fastText model and classifier_info.json of a classifier folder, loaded once per process."""
    import fasttext_new

    raw_info = read_bytes(join(classifier, INFO))
    if raw_info is None:
        raise FileNotFoundError(f"QualityFilterConfig.classifier: {classifier} has no {INFO}")
    info = json.loads(raw_info)
    if is_local(classifier):
        return fasttext_new.load_model(os.path.join(strip_protocol(classifier), MODEL)), info
    raw = read_bytes(join(classifier, MODEL))
    if raw is None:
        raise FileNotFoundError(f"QualityFilterConfig.classifier: {classifier} has no {MODEL}")
    with tempfile.TemporaryDirectory(prefix="marin-fasttext-") as tmp:
        path = os.path.join(tmp, MODEL)
        with open(path, "wb") as f:
            f.write(raw)
        return fasttext_new.load_model(path), info


def _scores_path(config: QualityFilterConfig, index: int) -> str:
    return join(config.output_path, SCORES, f"part-{index:05d}.npy")


def _read_scores(config: QualityFilterConfig, index: int) -> np.ndarray:
    raw = read_bytes(_scores_path(config, index))
    if raw is None:
        raise FileNotFoundError(f"quality filter: scores of shard {index} are missing ({_scores_path(config, index)})")
    return np.load(io.BytesIO(raw))


def score_shard(config: QualityFilterConfig, shard: QualityShard) -> dict:
    """First pass: the score of every document of one shard, saved as .scores/part-0000i.npy."""
    model, info = load_classifier(config.classifier)
    report = ReadReport()
    lines = [fasttext_text(doc["text"], info["max_chars"]) for doc in step_documents(config, shard.path, report)]
    scores = np.array([round(s, 6) for s in positive_scores(model, lines)], dtype=np.float64)
    buf = io.BytesIO()
    np.save(buf, scores)
    write_bytes(_scores_path(config, shard.index), buf.getvalue())
    return {"documents": len(lines)}


def keep_shard(config: QualityFilterConfig, shard: QualityShard) -> dict:
    """Second pass: write the documents of one shard scoring at least `shard.threshold`, with their score."""
    scores = _read_scores(config, shard.index)
    report = ReadReport()
    kept = []
    docs = step_documents(config, shard.path, report)
    for n, doc in enumerate(docs):
        if n >= len(scores):
            raise RuntimeError(f"quality filter: {shard.path} has more documents than its scores; rerun from scratch")
        if scores[n] >= shard.threshold:
            kept.append({**doc, "metadata": {**doc["metadata"], config.attribute: float(scores[n])}})
    stats = {
        "input": shard.path.rsplit("/", 1)[-1],
        "documents": report.documents,
        "kept": len(kept),
        "skipped_bad_documents": dict(sorted(report.skipped.items())),
    }
    write_json(join(config.output_path, SHARD_STATS, f"part-{shard.index:05d}.json"), stats)
    write_bytes(join(config.output_path, shard_name(shard.index)), encode_documents(kept))
    return stats


def fraction_threshold(scores: np.ndarray, keep_fraction: float) -> float:
    """The score of the ceil(keep_fraction * N)-th best document: keeping >= it keeps at least that share."""
    best_first = np.sort(scores)[::-1]
    return float(best_first[max(1, math.ceil(keep_fraction * len(scores))) - 1])


def quality_filter(config: QualityFilterConfig) -> dict:
    """Run the quality filter step; returns the totals also written to stats.json."""
    paths = list_shards(config.input_path)
    load_classifier(config.classifier)  # a missing or broken classifier fails here, before any shard
    shards = [QualityShard(i, p) for i, p in enumerate(paths)]
    run_shards(
        score_shard,
        config,
        shards,
        desc="quality score",
        ledger_dir=join(config.output_path, LEDGERS, "score"),
        workers=config.workers,
    )
    all_scores = np.concatenate([_read_scores(config, s.index) for s in shards])
    if not len(all_scores):
        raise EmptyInputError(f"quality filter: no documents in input path {config.input_path}")
    threshold = config.threshold
    if threshold is None:
        threshold = fraction_threshold(all_scores, config.keep_fraction)
    logger.info("quality filter: keeping scores >= %s", threshold)
    run_shards(
        keep_shard,
        config,
        [QualityShard(s.index, s.path, threshold) for s in shards],
        desc="quality keep",
        ledger_dir=join(config.output_path, LEDGERS, "keep"),
        workers=config.workers,
    )
    write_volatile_list(config.output_path, [LEDGERS + "/"])
    per_shard = read_json_many([join(config.output_path, SHARD_STATS, f"part-{s.index:05d}.json") for s in shards])
    skipped: dict[str, int] = {}
    for s in per_shard:
        for reason, n in s["skipped_bad_documents"].items():
            skipped[reason] = skipped.get(reason, 0) + n
    histogram, _ = np.histogram(all_scores, bins=10, range=(0.0, 1.0))
    kept = sum(s["kept"] for s in per_shard)
    stats = {
        "shards": len(shards),
        "documents": int(len(all_scores)),
        "kept": kept,
        "removed": int(len(all_scores)) - kept,
        "threshold": threshold,
        "keep_fraction": config.keep_fraction,
        "attribute": config.attribute,
        "score_histogram": {f"{b / 10:.1f}-{(b + 1) / 10:.1f}": int(n) for b, n in enumerate(histogram)},
        "skipped_bad_documents": dict(sorted(skipped.items())),
    }
    write_json(join(config.output_path, "stats.json"), stats)
    logger.info("quality filter: kept %d of %d documents -> %s", kept, stats["documents"], config.output_path)
    return stats
