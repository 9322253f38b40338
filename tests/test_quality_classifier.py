"""The quality classifier steps: a fastText model trained from positive and negative documents, and the
filter that keeps documents by its score, on a small corpus of prose (positive) and spam (negative)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from marin.processing.documents import EmptyInputError
from marin.processing.quality_classifier import TrainQualityClassifierConfig, train_quality_classifier
from marin.processing.quality_filter import QualityFilterConfig, fraction_threshold, quality_filter
from tests.data_docs import doc, english_doc, read_shard, tree_bytes, write_shard

SPAM = (
    "click buy now free offer cheap deals subscribe winner prize casino bonus limited discount viagra "
    "loans crypto guaranteed earn money fast unlock exclusive act today visit www dot com"
).split()


def spam_doc(rng: random.Random, n_words: int) -> str:
    """Mostly spam words with some prose words, in short shouted lines."""
    words = [
        rng.choice(SPAM) if rng.random() < 0.7 else rng.choice(english_doc(rng, 8).split()) for _ in range(n_words)
    ]
    return "\n".join(" ".join(words[i : i + 6]).upper() + "!!!" for i in range(0, n_words, 6))


def _shards(root, prefix: str, make, rng, shards: int, per_shard: int) -> None:
    for s in range(shards):
        docs = [doc(f"{prefix}{s}-{i}", make(rng, rng.randint(40, 120))) for i in range(per_shard)]
        write_shard(root / f"part-{s:05d}.jsonl.gz", docs)


SMALL_MODEL = {"dim": 16, "bucket": 20_000, "epoch": 10, "lr": 0.5}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("quality")
    rng = random.Random(3)
    _shards(root / "pos", "p", english_doc, rng, 2, 40)
    _shards(root / "neg", "n", spam_doc, rng, 2, 40)
    mixed = []
    for s in range(3):  # the corpus to filter: unseen prose and spam, interleaved
        docs = []
        for i in range(20):
            make, kind = (english_doc, "prose") if i % 2 else (spam_doc, "spam")
            docs.append(doc(f"m{s}-{i}", make(rng, rng.randint(40, 120)), kind=kind))
        write_shard(root / "mixed" / f"part-{s:05d}.jsonl.gz", docs)
        mixed += docs
    config = TrainQualityClassifierConfig(
        positive_paths=(str(root / "pos"),),
        negative_paths=(str(root / "neg"),),
        output_path=str(root / "clf"),
        validation_fraction=0.25,
        **SMALL_MODEL,
    )
    info = train_quality_classifier(config)
    return root, config, info, mixed


def test_the_classifier_separates_the_labels_and_training_twice_gives_the_same_model_bytes(trained, tmp_path):
    root, config, info, _ = trained
    assert {p.name for p in (root / "clf").iterdir()} == {"model.bin", "classifier_info.json"}
    assert json.loads((root / "clf" / "classifier_info.json").read_text()) == info
    counts = info["documents"]
    assert sum(c["train"] + c["validation"] for c in counts.values()) == 160
    assert all(c["validation"] > 0 for c in counts.values())
    assert info["validation"]["accuracy"] >= 0.95
    assert info["fasttext_args"]["thread"] == 1 and info["fasttext_args"]["seed"] == 0

    train_quality_classifier(dataclasses.replace(config, output_path=str(tmp_path / "again")))
    assert tree_bytes(tmp_path / "again") == tree_bytes(root / "clf")
    train_quality_classifier(dataclasses.replace(config, output_path=str(tmp_path / "seed1"), seed=1))
    assert (tmp_path / "seed1" / "model.bin").read_bytes() != (root / "clf" / "model.bin").read_bytes()


def test_sampling_caps_each_label_by_id_hash(trained, tmp_path):
    _, config, _, _ = trained
    info = train_quality_classifier(
        dataclasses.replace(config, output_path=str(tmp_path / "capped"), max_documents_per_label=30)
    )
    assert all(c["train"] + c["validation"] == 30 for c in info["documents"].values())


def test_the_filter_keeps_prose_with_its_score_and_writes_the_same_bytes_with_two_workers(trained, tmp_path):
    root, _, _, mixed = trained
    base = QualityFilterConfig(
        input_path=str(root / "mixed"), classifier=str(root / "clf"), output_path=str(tmp_path / "one")
    )
    stats = quality_filter(base)
    quality_filter(dataclasses.replace(base, output_path=str(tmp_path / "two"), workers=2))
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")

    kept = [d for s in range(3) for d in read_shard(tmp_path / "one" / f"part-{s:05d}.jsonl.gz")]
    assert stats["documents"] == 60 and stats["kept"] == len(kept) and stats["removed"] == 60 - len(kept)
    assert sum(stats["score_histogram"].values()) == 60
    assert [d["metadata"]["kind"] for d in kept].count("prose") >= 28
    assert [d["metadata"]["kind"] for d in kept].count("spam") <= 2
    assert all(d["metadata"]["quality_score"] >= 0.5 for d in kept)
    order = [d["id"] for d in mixed]
    assert [d["id"] for d in kept] == sorted((d["id"] for d in kept), key=order.index)

    (tmp_path / "one" / "part-00001.jsonl.gz").unlink()  # as a crash before shard 1's ledger leaves it
    (tmp_path / "one" / ".shards" / "keep" / "part-00001.json").unlink()
    quality_filter(base)
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")


def test_keep_fraction_keeps_the_best_scored_share(trained, tmp_path):
    root, _, _, _ = trained
    stats = quality_filter(
        QualityFilterConfig(
            input_path=str(root / "mixed"),
            classifier=str(root / "clf"),
            output_path=str(tmp_path / "f"),
            threshold=None,
            keep_fraction=0.25,
            attribute="hq",
        )
    )
    assert stats["kept"] >= 15 and stats["threshold"] > 0.5
    kept = [d for s in range(3) for d in read_shard(tmp_path / "f" / f"part-{s:05d}.jsonl.gz")]
    assert min(d["metadata"]["hq"] for d in kept) == stats["threshold"]
    import numpy as np

    assert fraction_threshold(np.array([0.1, 0.9, 0.5, 0.7]), 0.5) == 0.7
    assert fraction_threshold(np.array([0.1, 0.9, 0.5, 0.7]), 0.01) == 0.9


def test_bad_configs_and_inputs_fail_naming_the_field(trained, tmp_path):
    root, config, _, _ = trained
    with pytest.raises(ValueError, match="exactly one of threshold and keep_fraction"):
        QualityFilterConfig(input_path="in", classifier="c", output_path="o", keep_fraction=0.5)
    with pytest.raises(
        TypeError, match=r"TrainQualityClassifierConfig.positive_paths: expected tuple\[str, \.\.\.\], got str"
    ):
        dataclasses.replace(config, positive_paths=str(root / "pos"))
    with pytest.raises(ValueError, match="validation_fraction"):
        dataclasses.replace(config, validation_fraction=1.0)
    write_shard(tmp_path / "empty" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match="no documents for __label__lq"):
        train_quality_classifier(
            dataclasses.replace(config, negative_paths=(str(tmp_path / "empty"),), output_path=str(tmp_path / "x"))
        )
    with pytest.raises(FileNotFoundError, match="QualityFilterConfig.classifier"):
        quality_filter(
            QualityFilterConfig(
                input_path=str(root / "mixed"), classifier=str(tmp_path), output_path=str(tmp_path / "o")
            )
        )
