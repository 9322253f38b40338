"""The quality classifier, quality filter and decontamination steps read and write buckets (emulators)."""

from __future__ import annotations

import random

import pytest

from marin.processing.decontaminate import DecontaminateConfig, decontaminate
from marin.processing.quality_classifier import TrainQualityClassifierConfig, train_quality_classifier
from marin.processing.quality_filter import QualityFilterConfig, quality_filter
from tests.data_docs import doc, english_doc, tree_bytes, write_shard


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_classifier_filter_and_decontamination_in_a_bucket_write_the_same_bytes_as_on_disk(
    tmp_path, bucket_prefix, store
):
    from marin.storage import filesystem

    rng = random.Random(1)
    prose = [doc(f"p{i}", english_doc(rng, 60)) for i in range(30)]
    write_shard(tmp_path / "pos" / "part-00000.jsonl.gz", prose[:20])
    write_shard(tmp_path / "neg" / "part-00000.jsonl.gz", [doc(f"n{i}", "buy now " * 30) for i in range(20)])
    write_shard(tmp_path / "docs" / "part-00000.jsonl.gz", prose[20:])
    write_shard(tmp_path / "eval" / "part-00000.jsonl.gz", [doc("e0", " ".join(prose[25]["text"].split()[:20]))])

    remote = bucket_prefix(store)
    for root in (str(tmp_path / "local"), remote):
        train_quality_classifier(
            TrainQualityClassifierConfig(
                positive_paths=(str(tmp_path / "pos"),),
                negative_paths=(str(tmp_path / "neg"),),
                output_path=root + "/clf",
                dim=8,
                bucket=1000,
            )
        )
        quality_filter(
            QualityFilterConfig(input_path=str(tmp_path / "docs"), classifier=root + "/clf", output_path=root + "/q")
        )
        stats = decontaminate(
            DecontaminateConfig(
                input_path=str(tmp_path / "docs"), eval_sets={"e": str(tmp_path / "eval")}, output_path=root + "/d"
            )
        )
        assert stats["contaminated"] == 1, stats
    filesystem(remote).get(remote + "/", str(tmp_path / "fetched") + "/", recursive=True)
    assert tree_bytes(tmp_path / "fetched") == tree_bytes(tmp_path / "local")
