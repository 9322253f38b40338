"""Every file of an input folder is read, or the step fails naming it: no shard is left out for its name.

Hidden files and folders, and the files marin's steps write beside their documents, are the only ones
left out (and logged)."""

from __future__ import annotations

import bz2
import gzip
import json
import logging
import lzma

import pytest
import zstandard

from marin.processing.documents import BadShardError, list_shards, read_documents
from marin.processing.filter import FilterConfig, filter_documents
from tests.data_docs import doc, read_shard, write_shard

COMPRESS = {
    "": lambda b: b,
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".gzip": lambda b: gzip.compress(b, mtime=0),
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}


def _lines(prefix: str, n: int) -> bytes:
    return b"".join(json.dumps(doc(f"{prefix}-{i}", f"Document {i} of {prefix}.")).encode() + b"\n" for i in range(n))


def _keep_everything(tmp_path, name: str = "out") -> FilterConfig:
    return FilterConfig(
        input_path=str(tmp_path / "in"),
        output_path=str(tmp_path / name),
        gopher_quality=None,
        gopher_repetition=None,
        min_kept_fraction=None,
    )


@pytest.mark.parametrize(
    "other",
    [
        "part-00001.jsonl.bz2",
        "part-00001.jsonl.xz",
        "part-00001.json",
        "part-00001.JSONL",
        "part-00001.jsonl.gzip",
        "extra-data.jsonl",
        "sub/more.json.zst",
    ],
)
def test_every_file_beside_a_part_shard_is_read(tmp_path, other):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-00000.jsonl").write_bytes(_lines("a", 50))
    target = tmp_path / "in" / other
    target.parent.mkdir(parents=True, exist_ok=True)
    compression = next((s for s in (".bz2", ".xz", ".gzip", ".zst", ".gz") if other.endswith(s)), "")
    target.write_bytes(COMPRESS[compression](_lines("b", 50)))

    stats = filter_documents(_keep_everything(tmp_path))

    assert stats["documents"] == 100 and stats["kept"] == 100
    ids = [d["id"] for p in sorted((tmp_path / "out").glob("part-*")) for d in read_shard(p)]
    assert sorted(ids) == sorted([f"a-{i}" for i in range(50)] + [f"b-{i}" for i in range(50)])


@pytest.mark.parametrize("stray", ["notes.txt", "part-00001.jsonl.lz4", "data.csv", "sub/README.md"])
def test_a_file_the_step_cannot_read_fails_it_naming_the_file_before_anything_is_written(tmp_path, stray):
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [doc("a", "Some text here.")])
    (tmp_path / "in" / stray).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "in" / stray).write_bytes(b"whatever\n")
    with pytest.raises(BadShardError, match=rf"holds 1 file\(s\) that are not document shards: {stray}\b"):
        filter_documents(_keep_everything(tmp_path))
    assert not (tmp_path / "out").exists()


def test_hidden_files_and_marins_own_sidecars_are_left_out_and_logged(tmp_path, caplog):
    """A filter's output folder, read by the next step: its shards, never its removed sample or stats."""
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [doc("kept", "Some text here.")])
    write_shard(tmp_path / "in" / "removed_sample.jsonl.gz", [doc("removed", "Not a document of the corpus.")])
    (tmp_path / "in" / "stats.json").write_text("{}")
    (tmp_path / "in" / "volatile_files.txt").write_text(".shards/\n")
    write_shard(tmp_path / "in" / ".shards" / "filter" / "part-00000.jsonl.gz", [doc("ledger", "x")])
    (tmp_path / "in" / ".executor_info").write_text("{}")
    caplog.set_level(logging.INFO, logger="marin.processing.documents")

    shards = list_shards(str(tmp_path / "in"))

    assert shards == [str(tmp_path / "in" / "part-00000.jsonl.gz")]
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "left out 2 hidden file(s)" in logged
    assert "removed_sample.jsonl.gz, stats.json, volatile_files.txt" in logged


def test_a_json_file_that_is_one_json_document_is_a_bad_shard_even_when_skipping_bad_lines(tmp_path):
    path = tmp_path / "in" / "data.json"
    path.parent.mkdir()
    path.write_text(json.dumps([doc("a", "one"), doc("b", "two")], indent=2))
    with pytest.raises(BadShardError, match=r"data\.json: not JSON lines"):
        list(read_documents(str(path), skip_bad=True))


@pytest.mark.parametrize("suffix", [".bz2", ".xz"])
def test_a_truncated_or_mislabelled_bz2_or_xz_shard_is_a_bad_shard(tmp_path, suffix):
    whole = COMPRESS[suffix](_lines("a", 200))
    (tmp_path / f"cut.jsonl{suffix}").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(BadShardError, match=r"cut\.jsonl.*truncated"):
        list(read_documents(str(tmp_path / f"cut.jsonl{suffix}")))
    (tmp_path / f"gz.jsonl{suffix}").write_bytes(gzip.compress(_lines("a", 3)))
    with pytest.raises(BadShardError, match=r"gz\.jsonl.*not a valid"):
        list(read_documents(str(tmp_path / f"gz.jsonl{suffix}")))
    (tmp_path / "plain.jsonl").write_bytes(whole)
    with pytest.raises(BadShardError, match=r"plain\.jsonl: named as plain JSON lines but holds"):
        list(read_documents(str(tmp_path / "plain.jsonl")))


def test_ids_derived_from_the_place_ignore_every_format_suffix(tmp_path):
    line = json.dumps({"text": "x"}).encode() + b"\n"
    files = {"a.jsonl.bz2": COMPRESS[".bz2"](line), "b.JSONL": line, "c.json.xz": COMPRESS[".xz"](line)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    ids = [d["id"] for name in files for d in read_documents(str(tmp_path / name), id_key=None)]
    assert ids == ["a/0", "b/0", "c/0"]


def test_on_every_storage_the_folder_is_listed_whole_less_hidden_files_and_sidecars(prefix):
    from marin.storage import write_bytes

    folder = f"{prefix}/corpus"
    files = {
        "part-00000.jsonl": _lines("a", 2),
        "extra-data.jsonl.bz2": COMPRESS[".bz2"](_lines("b", 2)),
        "sub/more.JSONL": _lines("c", 2),
        "stats.json": b"{}",
        ".executor_status": b"SUCCESS",
        ".shards/filter/part-00000.json": b"{}",
    }
    for rel, data in files.items():
        write_bytes(f"{folder}/{rel}", data)
    shards = list_shards(folder)
    assert shards == [f"{folder}/{rel}" for rel in ("extra-data.jsonl.bz2", "part-00000.jsonl", "sub/more.JSONL")]
    assert [d["id"] for s in shards for d in read_documents(s)] == ["b-0", "b-1", "a-0", "a-1", "c-0", "c-1"]
    write_bytes(f"{folder}/notes.txt", b"x")
    with pytest.raises(BadShardError, match=r"holds 1 file\(s\) that are not document shards: notes\.txt"):
        list_shards(folder)
