"""The formats labs publish: the same documents as Parquet, .jsonl.zst and .jsonl.gz give the same kept
documents and byte-identical tokenized caches, on disk, GCS and S3; bad files fail naming the file."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from marin.processing.dedup import DedupConfig, SourceWipeoutError, dedup_documents
from marin.processing.documents import BadDocumentError, BadShardError, read_documents
from marin.processing.filter import FilterConfig, filter_documents
from marin.processing.minhash import MinHashConfig
from tests.data_docs import english_doc, read_shard, tree_bytes

FORMATS = ("parquet", "jsonl.zst", "jsonl.gz")


def fineweb_rows(seed: int, n: int) -> list[dict]:
    """FineWeb-shaped rows (text, id, dump, url, language_score), with one exact duplicate and one short text."""
    rng = random.Random(seed)
    rows = [
        {
            "text": english_doc(rng, 120),
            "id": f"<urn:uuid:{seed}-{i}>",
            "dump": "CC-MAIN-2024-10",
            "url": f"https://example.org/{seed}/{i}",
            "language_score": round(0.8 + i / 1000, 3),
        }
        for i in range(n)
    ]
    rows[3] = {**rows[3], "text": rows[1]["text"]}
    rows[5] = {**rows[5], "text": "Too short."}
    return rows


def write_as(folder: Path, kind: str, shards: list[list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s, rows in enumerate(shards):
        path = folder / f"part-{s:05d}.{kind}"
        body = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
        if kind == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=3, compression="zstd")
        elif kind == "jsonl.zst":
            path.write_bytes(zstandard.ZstdCompressor().compress(body))
        else:
            path.write_bytes(gzip.compress(body, mtime=0))
    return folder


def caches(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in tree_bytes(root).items() if k.startswith(("train/", "validation/"))}


@pytest.fixture(scope="module")
def corpus():
    return [fineweb_rows(1, 8), fineweb_rows(2, 8)]


def test_parquet_zst_and_gz_give_the_same_kept_documents_and_identical_caches(tmp_path, corpus):
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    kept, tokenized = {}, {}
    for kind in FORMATS:
        src = write_as(tmp_path / kind / "src", kind, corpus)
        out = tmp_path / kind
        filter_documents(FilterConfig(input_path=str(src), output_path=str(out / "filtered")))
        dedup_documents(
            DedupConfig(
                input_path=str(out / "filtered"), output_path=str(out / "deduped"), fuzzy=MinHashConfig(num_buckets=4)
            )
        )
        kept[kind] = {p.name: p.read_bytes() for p in sorted((out / "deduped").glob("part-*"))}
        if kind == FORMATS[0]:
            train_tokenizer(
                TrainTokenizerConfig(input_path=str(src), output_path=str(tmp_path / "tok"), vocab_size=300)
            )
        tokenize(
            TokenizeConfig(
                input_path=str(src),
                tokenizer=str(tmp_path / "tok"),
                output_path=str(out / "tok"),
                validation_fraction=0.2,
            )
        )
        tokenized[kind] = caches(out / "tok")

    assert kept["parquet"] == kept["jsonl.zst"] == kept["jsonl.gz"]
    assert tokenized["parquet"] == tokenized["jsonl.zst"] == tokenized["jsonl.gz"] and tokenized["parquet"]
    docs = [d for name in sorted(kept["parquet"]) for d in read_shard(tmp_path / "parquet" / "deduped" / name)]
    assert len(docs) == 12  # 16, less one short text and one exact duplicate per shard
    assert docs[0]["metadata"] == {"dump": "CC-MAIN-2024-10", "language_score": 0.8, "url": "https://example.org/1/0"}
    assert docs[0]["id"] == "<urn:uuid:1-0>"


def test_without_ids_every_format_derives_the_same_ids_from_shard_and_row(tmp_path, corpus):
    rows = [{k: v for k, v in r.items() if k != "id"} for r in corpus[0]]
    read = {}
    for kind in FORMATS:
        folder = write_as(tmp_path / kind, kind, [rows])
        read[kind] = list(read_documents(str(folder / f"part-00000.{kind}"), id_key=None))
    assert read["parquet"] == read["jsonl.zst"] == read["jsonl.gz"]
    assert [d["id"] for d in read["parquet"]] == [f"part-00000/{i}" for i in range(8)]
    with pytest.raises(BadShardError, match=r"part-00000\.parquet: no id column 'id'.*id_key=None"):
        list(read_documents(str(tmp_path / "parquet" / "part-00000.parquet")))
    with pytest.raises(BadDocumentError, match=r"part-00000\.jsonl\.gz:1: missing_id.*id_key=None"):
        list(read_documents(str(tmp_path / "jsonl.gz" / "part-00000.jsonl.gz")))


def test_text_key_names_the_text_column_and_the_other_columns_become_metadata(tmp_path):
    rows = [{"content": f"text {i}", "id": i, "source": "nemotron", "quality": "high"} for i in range(3)]
    folder = write_as(tmp_path, "parquet", [rows])
    (d,) = list(read_documents(str(folder / "part-00000.parquet"), text_key="content"))[:1]
    assert d == {"id": "0", "text": "text 0", "source": "nemotron", "metadata": {"quality": "high"}}
    with pytest.raises(ValueError, match="FilterConfig: text_key and id_key are both 'id'"):
        FilterConfig(input_path="x", output_path="y", text_key="id")


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_every_format_filters_on_a_bucket_as_on_disk(tmp_path, corpus, bucket_prefix, store):
    prefix = bucket_prefix(store)
    fs, _ = fsspec.core.url_to_fs(prefix)
    for kind in FORMATS:
        local = write_as(tmp_path / kind / "src", kind, corpus)
        fs.put(str(local) + "/", f"{prefix}/{kind}/src/", recursive=True)
        filter_documents(FilterConfig(input_path=str(local), output_path=str(tmp_path / kind / "out")))
        filter_documents(FilterConfig(input_path=f"{prefix}/{kind}/src", output_path=f"{prefix}/{kind}/out"))
        for name in ("part-00000.jsonl.gz", "part-00001.jsonl.gz"):
            assert fs.cat_file(f"{prefix}/{kind}/out/{name}") == (tmp_path / kind / "out" / name).read_bytes()


def test_bad_files_fail_naming_the_file_even_when_bad_documents_are_skipped(tmp_path, corpus):
    for kind in FORMATS:
        whole = write_as(tmp_path / "whole", kind, corpus[:1]) / f"part-00000.{kind}"
        cut = tmp_path / "cut" / kind / f"part-00000.{kind}"
        cut.parent.mkdir(parents=True)
        cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
        with pytest.raises(BadShardError, match=rf"{cut}: (truncated|not a readable Parquet)"):
            filter_documents(FilterConfig(input_path=str(cut.parent), output_path=str(tmp_path / "o" / kind)))
        with pytest.raises(BadShardError, match=str(cut)):
            list(read_documents(str(cut), skip_bad=True))
    mislabelled = tmp_path / "m" / "part-00000.jsonl"
    mislabelled.parent.mkdir()
    mislabelled.write_bytes((tmp_path / "whole" / "part-00000.jsonl.gz").read_bytes())
    with pytest.raises(BadShardError, match=rf"{mislabelled}: named as plain JSON lines but holds gzip"):
        list(read_documents(str(mislabelled), skip_bad=True))
    not_gzip = tmp_path / "m" / "part-00001.jsonl.gz"
    not_gzip.write_bytes(b'{"id": 1, "text": "x"}\n')
    with pytest.raises(BadShardError, match=rf"{not_gzip}: not a valid gzip stream"):
        list(read_documents(str(not_gzip), skip_bad=True))
    numbers = tmp_path / "m" / "part-00002.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": [3]}), numbers)
    with pytest.raises(BadShardError, match=rf"{numbers}: text column 'text' is int64, not a string"):
        list(read_documents(str(numbers), skip_bad=True))
    with pytest.raises(BadShardError, match=rf"{numbers}: no text column 'body'"):
        list(read_documents(str(numbers), text_key="body"))
    nulls = tmp_path / "m" / "part-00003.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": ["one", None, "three"]}), nulls)
    with pytest.raises(BadDocumentError, match=rf"{nulls}: row 1: missing_text"):
        list(read_documents(str(nulls)))
    assert [d["id"] for d in read_documents(str(nulls), skip_bad=True)] == ["a", "c"]


@pytest.mark.parametrize("extras", [(), ("url",), ("url", "score", "tags")])
def test_parquet_batches_give_the_documents_the_json_lines_reader_gives(tmp_path, monkeypatch, extras):
    """Whole batches are built column by column; a batch with a null text goes row by row: both give what
    the JSON-lines reader gives for the same records, ids converted, metadata in the same key order."""
    import marin.processing.documents as documents

    monkeypatch.setattr(documents, "PARQUET_BATCH_ROWS", 4)
    values = {"url": lambda i: f"https://e.org/{i}", "score": lambda i: i / 4, "tags": lambda i: ["a", str(i)]}
    rows = [
        {"id": 100 + i, "text": None if i == 6 else f"text {i}", "source": "web", **{k: values[k](i) for k in extras}}
        for i in range(11)
    ]
    write_as(tmp_path, "parquet", [rows])
    write_as(tmp_path, "jsonl.gz", [rows])
    for key in ("id", None):
        got = {
            kind: list(read_documents(str(tmp_path / f"part-00000.{kind}"), skip_bad=True, id_key=key))
            for kind in ("parquet", "jsonl.gz")
        }
        assert got["parquet"] == got["jsonl.gz"]
        kept_columns = sorted(extras) if key else sorted((*extras, "id"))
        assert [list(d["metadata"]) for d in got["parquet"]] == [kept_columns] * 10
    assert [d["id"] for d in got["parquet"]][5:7] == ["part-00000/5", "part-00000/7"]


def test_multi_member_gzip_and_multi_frame_zstd_read_whole(tmp_path, corpus):
    lines = [json.dumps(r).encode() + b"\n" for r in corpus[0]]
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(b"".join(gzip.compress(line) for line in lines))
    zst = tmp_path / "a.jsonl.zst"
    zst.write_bytes(b"".join(zstandard.ZstdCompressor().compress(line) for line in lines))
    assert list(read_documents(str(gz))) == list(read_documents(str(zst)))
    assert len(list(read_documents(str(gz)))) == 8


def templated_corpus(folder: Path) -> str:
    """Source 'synthetic' is one template filled in 10 times (near-duplicates); 'web' is varied text."""
    rng = random.Random(5)
    template = english_doc(rng, 150)
    rows = [
        {"id": f"syn-{i}", "text": template + f" Item {i}.", "source": "synthetic", "metadata": {}} for i in range(10)
    ]
    rows += [{"id": f"web-{i}", "text": english_doc(rng, 150), "source": "web", "metadata": {}} for i in range(6)]
    write_as(folder, "jsonl.gz", [rows])
    return template


def test_the_guard_refuses_to_publish_when_a_source_would_be_wiped_out(tmp_path):
    template = templated_corpus(tmp_path / "src")
    out = tmp_path / "out"
    config = DedupConfig(input_path=str(tmp_path / "src"), output_path=str(out), fuzzy=MinHashConfig(num_buckets=14))
    with pytest.raises(
        SourceWipeoutError, match=r"source 'synthetic' would lose 90\.0% .*\(9 of 10\).*max_removed_fraction=0\.8"
    ):
        dedup_documents(config)
    assert not list(out.glob("part-*")) and not (out / "stats.json").exists()
    report = json.loads((out / "dedup_guard.json").read_text())
    (cluster,) = report["over_the_limit"]["synthetic"]["largest_clusters"]
    assert cluster["kept_id"] == "syn-0" and cluster["removed"] == 9
    assert cluster["kept_text"] == template[:500]
    assert cluster["removed_ids"] == ["syn-1", "syn-2", "syn-3"]
    assert set(report["sources"]) == {"synthetic", "web"}

    import dataclasses

    stats = dedup_documents(dataclasses.replace(config, max_removed_fraction=None))
    assert stats["sources"] == {
        "synthetic": {"documents": 10, "removed": 9, "removed_fraction": 0.9},
        "web": {"documents": 6, "removed": 0, "removed_fraction": 0.0},
    }
    assert len(read_shard(out / "part-00000.jsonl.gz")) == 7
    assert not (out / "dedup_guard.json").exists()

    from starlette.testclient import TestClient

    from marin.browser.app import create_app

    page = TestClient(create_app([str(tmp_path)])).get("/dups/0/out").text
    table = page.split('id="removals-by-source"')[1].split("</table>")[0]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in table.split("<tr>")[2:]]
    assert rows == [["synthetic", "10", "9", "90.0%"], ["web", "6", "0", "0.0%"]]
