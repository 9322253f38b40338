"""Train a fastText quality classifier from a set of positive and a set of negative documents.

The recipe of DCLM and Marin's `train_fasttext`: documents from reference sources (a step's output or
any folder) are positives, documents from the corpus to be filtered are negatives, and a supervised
fastText model learns to tell them apart; the `quality_filter` step then keeps the documents it scores
as positive. Training uses `fasttext-new` (a maintained Rust port of fastText with the original API,
import name `fasttext_new`, so it installs beside the predict-only `fasttext` module that the language
filter uses).

Determinism: fastText's SGD is Hogwild! over `threads` threads, so only one thread gives the same
model twice. The step therefore trains on one thread by default, with a fixed `seed`, on examples in
a fixed order: documents read in path and shard order, sampled and split into train and validation by
a hash of their id (never by position, so the split does not depend on the shard layout), then
shuffled with `random.Random(seed)`. Same documents and config, same `model.bin` bytes (tested).

Output, under `output_path`: `model.bin` (loadable with `fasttext_new.load_model` or the C++
package), and `classifier_info.json`: the labels, how many documents of each went to train and
validation, the validation accuracy, precision and recall of the positive label at 0.5, and the
training arguments. The filter step reads `classifier_info.json` to know which label is positive.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import tempfile
from dataclasses import dataclass

from marin.processing.documents import EmptyInputError, ReadReport, check_keys, list_shards, step_documents, write_json
from marin.stepkit.config import StepConfig, input_field, output_field, versioned_unless_default
from marin.storage import join, write_bytes

logger = logging.getLogger(__name__)

MODEL = "model.bin"
INFO = "classifier_info.json"
POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"

_SPACE = re.compile(r"\s+")


def fasttext_text(text: str, max_chars: int) -> str:
    """A document as one fastText line: whitespace runs (newlines included) become one space."""
    return _SPACE.sub(" ", text[:max_chars]).strip()


def _id_fraction(doc_id: str, salt: str) -> float:
    """A number in [0, 1) fixed by the document's id (and what it is drawn for)."""
    digest = hashlib.sha256(f"{salt}\0{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, kw_only=True)
class TrainQualityClassifierConfig(StepConfig):
    """Train a fastText model telling `positive_paths` documents from `negative_paths` documents."""

    positive_paths: tuple[str, ...] = input_field("documents")
    """Folders (or shard files) of Dolma documents of the quality to keep: steps or plain paths."""
    negative_paths: tuple[str, ...] = input_field("documents")
    """Folders (or shard files) of Dolma documents of the quality to drop."""
    output_path: str = output_field()
    """Folder for model.bin and classifier_info.json."""
    max_documents_per_label: int | None = None
    """Sample at most about this many documents of each label (by a hash of the id, seeded); None: all."""
    validation_fraction: float = 0.1
    """Share of documents (by a hash of the id) held out to measure the classifier."""
    seed: int = 0
    """Seed of the sampling, the shuffle and fastText's own initialisation."""
    max_chars: int = 10_000
    """Only the first this many characters of a document are used (for training and scoring)."""
    lr: float = 0.1
    """fastText learning rate."""
    epoch: int = 5
    """fastText epochs."""
    dim: int = 100
    """Size of the word vectors."""
    word_ngrams: int = 2
    """Word n-grams fastText uses as features (2: words and word pairs, as DCLM's classifier)."""
    min_count: int = 1
    """A word must occur this often to get its own vector."""
    bucket: int = 2_000_000
    """Hash buckets for word n-grams; the model takes about (words + bucket) * dim * 4 bytes."""
    threads: int = versioned_unless_default(1)
    """fastText training threads. More than 1 is faster but gives a different model each run."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""

    def validate(self) -> None:
        check_keys("TrainQualityClassifierConfig", self.text_key, self.id_key)
        for name in ("positive_paths", "negative_paths"):
            value = getattr(self, name)
            if isinstance(value, str) or not value:
                raise ValueError(
                    f"TrainQualityClassifierConfig.{name} must be a non-empty tuple of paths, got {value!r}"
                )
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(
                f"TrainQualityClassifierConfig.validation_fraction must be in [0, 1), got {self.validation_fraction}"
            )
        if self.max_documents_per_label is not None and self.max_documents_per_label < 1:
            raise ValueError(
                f"TrainQualityClassifierConfig.max_documents_per_label must be >= 1 or None, "
                f"got {self.max_documents_per_label}"
            )
        for name in ("epoch", "dim", "word_ngrams", "min_count", "bucket", "threads", "max_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainQualityClassifierConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"TrainQualityClassifierConfig.lr must be > 0, got {self.lr}")


def _examples(config: TrainQualityClassifierConfig, paths: tuple[str, ...], label: str, report: ReadReport):
    """(split, line) for every document under `paths`, in path and shard order."""
    docs: list[tuple[str, str]] = []
    for path in paths:
        for shard in list_shards(path):
            for doc in step_documents(config, shard, report):
                text = fasttext_text(doc["text"], config.max_chars)
                if text:
                    docs.append((doc["id"], f"{label} {text}"))
    if not docs:
        raise EmptyInputError(f"quality classifier: no documents for {label} in {list(paths)}")
    if config.max_documents_per_label is not None and len(docs) > config.max_documents_per_label:
        ranked = sorted(docs, key=lambda d: _id_fraction(d[0], f"sample-{config.seed}"))
        keep = {doc_id for doc_id, _ in ranked[: config.max_documents_per_label]}
        docs = [d for d in docs if d[0] in keep]
    for doc_id, line in docs:
        split = "validation" if _id_fraction(doc_id, "validation") < config.validation_fraction else "train"
        yield split, line


def train_quality_classifier(config: TrainQualityClassifierConfig) -> dict:
    """Train, write model.bin and classifier_info.json; returns the info."""
    import fasttext_new

    report = ReadReport()
    splits: dict[str, list[str]] = {"train": [], "validation": []}
    counts = {label: {"train": 0, "validation": 0} for label in (POSITIVE, NEGATIVE)}
    for paths, label in ((config.positive_paths, POSITIVE), (config.negative_paths, NEGATIVE)):
        for split, line in _examples(config, paths, label, report):
            splits[split].append(line)
            counts[label][split] += 1
    for label, c in counts.items():
        if not c["train"]:
            raise EmptyInputError(f"quality classifier: every {label} document went to validation; lower it")
    random.Random(config.seed).shuffle(splits["train"])

    args = {
        "lr": config.lr,
        "epoch": config.epoch,
        "dim": config.dim,
        "wordNgrams": config.word_ngrams,
        "minCount": config.min_count,
        "bucket": config.bucket,
        "thread": config.threads,
        "seed": config.seed,
        "loss": "softmax",
    }
    logger.info("training a fastText classifier on %d examples (%s)", len(splits["train"]), counts)
    with tempfile.TemporaryDirectory(prefix="marin-fasttext-") as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in splits["train"])
        model = fasttext_new.train_supervised(input=train_file, verbose=0, **args)
        model_file = os.path.join(tmp, MODEL)
        model.save_model(model_file)
        with open(model_file, "rb") as f:
            write_bytes(join(config.output_path, MODEL), f.read())

    info = {
        "positive_label": POSITIVE,
        "negative_label": NEGATIVE,
        "documents": counts,
        "validation": _measure(model, splits["validation"]),
        "max_chars": config.max_chars,
        "fasttext_args": args,
        "trainer": f"fasttext-new {fasttext_new.__version__}",
        "skipped_bad_documents": dict(sorted(report.skipped.items())),
    }
    write_json(join(config.output_path, INFO), info)
    logger.info("quality classifier: validation %s", info["validation"])
    return info


def _measure(model, lines: list[str]) -> dict:
    """Accuracy, and precision and recall of the positive label, on `lines` (label + text)."""
    if not lines:
        return {"documents": 0}
    truth = [line.split(" ", 1)[0] == POSITIVE for line in lines]
    scores = positive_scores(model, [line.split(" ", 1)[1] for line in lines])
    predicted = [s >= 0.5 for s in scores]
    tp = sum(p and t for p, t in zip(predicted, truth, strict=True))
    return {
        "documents": len(lines),
        "accuracy": round(sum(p == t for p, t in zip(predicted, truth, strict=True)) / len(lines), 6),
        "precision": round(tp / sum(predicted), 6) if any(predicted) else None,
        "recall": round(tp / sum(truth), 6) if any(truth) else None,
    }


def positive_scores(model, lines: list[str]) -> list[float]:
    """P(positive) for each one-line text, as fastText's softmax gives it (float32 made float)."""
    if not lines:
        return []
    labels, probs = model.predict(lines, k=-1)
    return [float(dict(zip(ls, ps, strict=True)).get(POSITIVE, 0.0)) for ls, ps in zip(labels, probs, strict=True)]
