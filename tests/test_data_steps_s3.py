"""The document steps and train_tokenizer on s3:// (a real S3 protocol server, moto, on 127.0.0.1) give the same bytes as on disk."""

from __future__ import annotations

import json
import random

import fsspec
import pytest

from marin.download.download import DownloadConfig, download
from marin.processing.dedup import DedupConfig, MinHashConfig, dedup_documents
from marin.processing.filter import FilterConfig, filter_documents
from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
from tests.data_docs import doc, english_doc, tree_bytes, write_shard


@pytest.fixture
def s3(monkeypatch):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    for k, v in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": f"http://{host}:{port}"})
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("data-bucket")
    yield fs
    server.stop()


def test_download_filter_dedup_and_train_tokenizer_on_s3_match_the_local_run(tmp_path, s3):
    rng = random.Random(2)
    texts = [english_doc(rng, 150) for _ in range(6)]
    for s in range(2):
        docs = [doc(f"d{s}-{i}", texts[(s * 3 + i) % 6]) for i in range(4)] + [doc(f"short-{s}", "Too short.")]
        write_shard(tmp_path / "src" / f"part-{s:05d}.jsonl.gz", docs)
    s3.put(str(tmp_path / "src") + "/", "data-bucket/src/", recursive=True)

    for root, kind in ((str(tmp_path / "local"), "local"), ("s3://data-bucket/run", "s3")):
        download(
            DownloadConfig(
                source=str(tmp_path / "src") if kind == "local" else "s3://data-bucket/src", output_path=f"{root}/raw"
            )
        )
        filter_documents(FilterConfig(input_path=f"{root}/raw", output_path=f"{root}/filtered"))
        dedup_documents(
            DedupConfig(
                input_path=f"{root}/filtered", output_path=f"{root}/deduped", fuzzy=MinHashConfig(num_buckets=4)
            )
        )
        train_tokenizer(TrainTokenizerConfig(input_path=f"{root}/deduped", output_path=f"{root}/tok", vocab_size=300))

    s3.get("data-bucket/run/", str(tmp_path / "from_s3") + "/", recursive=True)
    local, remote = tree_bytes(tmp_path / "local"), tree_bytes(tmp_path / "from_s3")
    prov_local, prov_remote = (json.loads(t.pop("raw/provenance.json")) for t in (local, remote))
    assert prov_remote["source"] == "../../src" and prov_local["files"] == prov_remote["files"]
    assert local == remote
    assert "deduped/part-00001.jsonl.gz" in remote and "filtered/stats.json" in remote
    assert "tok/tokenizer.json" in remote and "tok/train_info.json" in remote
    assert not s3.exists("data-bucket/run/deduped/.work")
