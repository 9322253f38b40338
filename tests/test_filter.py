"""The filter step: datatrove quality filters over shards, counted removals, determinism, resume, bad input."""

from __future__ import annotations

import gzip
import json
import logging
import random

import pytest

from marin.processing.documents import BadDocumentError, EmptyInputError
from marin.processing.filter import FilterConfig, GopherQualityConfig, filter_documents
from tests.data_docs import doc, english_doc, read_shard, tree_bytes, write_shard


def _corpus(root, n_shards=3, good_per_shard=4):
    """Good prose plus, in every shard, one short doc, one repetitive doc and one digits-only doc."""
    rng = random.Random(0)
    planted = {}
    for s in range(n_shards):
        docs = [doc(f"good-{s}-{i}", english_doc(rng, 120)) for i in range(good_per_shard)]
        docs.append(doc(f"short-{s}", "A short note. It says very little."))
        docs.append(
            doc(
                f"repeat-{s}",
                "\n".join(
                    ["the keeper of the light went to the harbour and back with the news that the storm had passed."]
                    * 30
                ),
            )
        )
        docs.append(doc(f"digits-{s}", " ".join(str(rng.randint(0, 10**6)) for _ in range(120))))
        planted.update({f"short-{s}": 1, f"repeat-{s}": 1, f"digits-{s}": 1})
        write_shard(root / f"part-{s:05d}.jsonl.gz", docs)
    return planted


def test_filter_removes_low_quality_docs_and_counts_them_by_filter_and_reason(tmp_path):
    planted = _corpus(tmp_path / "in")
    stats = filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))

    kept = [d["id"] for i in range(3) for d in read_shard(tmp_path / "out" / f"part-{i:05d}.jsonl.gz")]
    assert kept == [f"good-{s}-{i}" for s in range(3) for i in range(4)]
    assert stats["documents"] == 21 and stats["kept"] == 12 and stats["removed"] == 9
    gq = stats["removed_by_filter"]["gopher_quality"]
    assert gq["reasons"]["gopher_short_doc"] == 3
    assert gq["reasons"]["gopher_below_alpha_threshold"] == 3
    assert stats["removed_by_filter"]["gopher_repetition"]["removed"] == 3
    assert sum(f["removed"] for f in stats["removed_by_filter"].values()) == 9
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    sample = read_shard(tmp_path / "out" / "removed_sample.jsonl.gz")
    assert {d["id"] for d in sample} == set(planted)
    assert all(d["metadata"]["filter_reason"].startswith("gopher_") for d in sample)


def test_a_threshold_set_to_none_turns_that_check_off(tmp_path):
    _corpus(tmp_path / "in", n_shards=1)
    cfg = FilterConfig(
        input_path=str(tmp_path / "in"),
        output_path=str(tmp_path / "out"),
        gopher_quality=GopherQualityConfig(min_doc_words=None, min_stop_words=None, max_non_alpha_words_ratio=None),
        gopher_repetition=None,
    )
    stats = filter_documents(cfg)
    kept = {d["id"] for d in read_shard(tmp_path / "out" / "part-00000.jsonl.gz")}
    assert {"short-0", "repeat-0"} <= kept
    assert stats["filters"] == ["gopher_quality"]


def test_filter_output_bytes_identical_across_one_and_two_workers_and_reruns(tmp_path):
    _corpus(tmp_path / "in")
    outs = []
    for name, workers in [("a", 1), ("b", 2), ("c", 1)]:
        filter_documents(
            FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / name), workers=workers)
        )
        outs.append(tree_bytes(tmp_path / name))
    assert outs[0] == outs[1] == outs[2]
    assert "part-00002.jsonl.gz" in outs[0]


def test_a_crash_after_k_shards_resumes_redoing_only_the_missing_ones(tmp_path, caplog):
    _corpus(tmp_path / "in", n_shards=4)
    good_shard = (tmp_path / "in" / "part-00002.jsonl.gz").read_bytes()
    bad = gzip.compress(gzip.decompress(good_shard) + b'{"id": "x", "text": "\xff\xfe broken"}\n', mtime=0)
    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(bad)
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"))
    with pytest.raises(BadDocumentError, match=r"part-00002\.jsonl\.gz:8: not_utf8"):
        filter_documents(cfg)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("part-*")) == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}

    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(good_shard)
    caplog.set_level(logging.INFO, logger="marin.processing.filter")
    caplog.clear()  # only the rerun's records (an earlier test may have left the logger at INFO)
    filter_documents(cfg)
    written = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("wrote shard")]
    assert written == ["part-00002.jsonl.gz", "part-00003.jsonl.gz"]
    assert {p: (out / p).stat().st_mtime_ns for p in before} == before

    filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "fresh")))
    assert tree_bytes(out) == tree_bytes(tmp_path / "fresh")


def test_bad_lines_are_counted_when_skipping_is_asked_for(tmp_path):
    rng = random.Random(1)
    write_shard(
        tmp_path / "in" / "part-00000.jsonl.gz",
        [doc("a", english_doc(rng, 100))],
        raw_lines=[b'{"id": "no-text", "body": "x"}\n', b'{"id": "bytes", "text": "\xff"}\n', b"not json\n"],
    )
    cfg = FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out"), skip_bad_documents=True)
    stats = filter_documents(cfg)
    assert stats["documents"] == 1 and stats["kept"] == 1
    assert stats["skipped_bad_documents"] == {"bad_json": 1, "missing_text": 1, "not_utf8": 1}


def test_a_missing_text_field_fails_naming_the_file_and_line(tmp_path):
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [doc("a", "fine"), {"id": "b", "content": "no text"}])
    with pytest.raises(BadDocumentError, match=r"part-00000\.jsonl\.gz:2: missing_text"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "out")))


def test_empty_input_fails_with_a_clear_error(tmp_path):
    (tmp_path / "none").mkdir()
    with pytest.raises(EmptyInputError, match="no document shards"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "none"), output_path=str(tmp_path / "out")))
    write_shard(tmp_path / "empty" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match="no documents in input path"):
        filter_documents(FilterConfig(input_path=str(tmp_path / "empty"), output_path=str(tmp_path / "out2")))
