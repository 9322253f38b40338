"""The download step against real sources: local folders, a real HTTP server, and a local Hugging Face hub.

The hub is `data_servers.HubServer` on 127.0.0.1: it answers the API routes huggingface_hub's
HfFileSystem calls (repo info, tree, resolve with ranges), so these are real HfFileSystem requests
over HTTP; only the hub at the other end is ours.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from marin.download.download import ChecksumMismatchError, DownloadConfig, download
from tests.data_docs import tree_bytes
from tests.data_servers import FileServer, HubServer

FILES = {
    "data/train/part-00000.jsonl.gz": b"\x1f\x8b" + bytes(range(256)) * 40,
    "data/train/part-00001.jsonl.gz": b"second shard " * 5000,
    "data/valid/part-00000.jsonl.gz": b"validation",
    "README.md": b"# tiny dataset\n",
}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _local_source(root):
    for name, body in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    return root


def test_local_and_file_url_sources_copy_globbed_files_and_write_provenance(tmp_path):
    src = _local_source(tmp_path / "src")
    for name, source in (("a", str(src / "data")), ("b", f"file://{src}/data")):
        prov = download(DownloadConfig(source=source, output_path=str(tmp_path / name), glob="**/*.jsonl.gz"))
        assert [f["path"] for f in prov["files"]] == [
            "train/part-00000.jsonl.gz",
            "train/part-00001.jsonl.gz",
            "valid/part-00000.jsonl.gz",
        ]
        for f in prov["files"]:
            body = FILES[f"data/{f['path']}"]
            assert (tmp_path / name / f["path"]).read_bytes() == body
            assert f["sha256"] == _sha(body) and f["size"] == len(body)
        assert prov["source"] == (source if name == "b" else "../src/data") and prov["revision"] is None
        assert json.loads((tmp_path / name / "provenance.json").read_text()) == prov
    assert not list((tmp_path / "a").rglob(".tmp-*"))


def test_https_style_source_downloads_from_a_real_local_http_server_and_checks_sha256(tmp_path):
    names = ("data/train/part-00000.jsonl.gz", "data/train/part-00001.jsonl.gz")
    with FileServer(FILES) as server:
        prov = download(
            DownloadConfig(
                source=f"{server.url}/data",
                files=("train/part-00000.jsonl.gz", "train/part-00001.jsonl.gz"),
                expected_sha256={"train/part-00001.jsonl.gz": _sha(FILES[names[1]])},
                output_path=str(tmp_path / "out"),
            )
        )
        assert {p for _, p in server.requests} >= {f"/{n}" for n in names}
    assert [f["sha256"] for f in prov["files"]] == [_sha(FILES[n]) for n in names]
    assert (tmp_path / "out" / "train" / "part-00001.jsonl.gz").read_bytes() == FILES[names[1]]


def test_hf_source_downloads_a_pinned_revision_through_hffilesystem(tmp_path, monkeypatch):
    with HubServer("org/tiny", "v1.0", FILES) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        prov = download(
            DownloadConfig(source="hf://datasets/org/tiny@v1.0/data/train", output_path=str(tmp_path / "out"))
        )
        paths = [p.split("?")[0] for _, p in hub.requests]
    assert prov["revision"] == "v1.0" and prov["source"] == "hf://datasets/org/tiny@v1.0/data/train"
    assert [f["path"] for f in prov["files"]] == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    assert (tmp_path / "out" / "part-00001.jsonl.gz").read_bytes() == FILES["data/train/part-00001.jsonl.gz"]
    assert "/api/datasets/org/tiny/revision/v1.0" in paths
    assert "/datasets/org/tiny/resolve/v1.0/data/train/part-00001.jsonl.gz" in paths


def test_hf_source_needs_a_revision_and_an_unknown_one_fails(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"DownloadConfig.revision: hf:// sources need a revision"):
        download(DownloadConfig(source="hf://datasets/org/tiny/data", output_path=str(tmp_path / "out")))
    with HubServer("org/tiny", "v1.0", FILES) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(FileNotFoundError):
            download(DownloadConfig(source="hf://datasets/org/tiny@v9/data", output_path=str(tmp_path / "out")))
        prov = download(
            DownloadConfig(
                source="hf://datasets/org/tiny/data/valid", revision="v1.0", output_path=str(tmp_path / "ok")
            )
        )
    assert prov["revision"] == "v1.0" and len(prov["files"]) == 1


def test_a_wrong_checksum_fails_naming_the_file_and_leaves_nothing_in_place(tmp_path):
    src = _local_source(tmp_path / "src")
    cfg = DownloadConfig(
        source=str(src / "data"),
        output_path=str(tmp_path / "out"),
        expected_sha256={"valid/part-00000.jsonl.gz": "0" * 64},
    )
    with pytest.raises(
        ChecksumMismatchError, match=r"valid/part-00000\.jsonl\.gz: sha256 [0-9a-f]{64} does not match expected 0{64}"
    ):
        download(cfg)
    assert not (tmp_path / "out" / "valid" / "part-00000.jsonl.gz").exists()
    assert not list((tmp_path / "out").rglob(".tmp-*"))
    assert not (tmp_path / "out" / "provenance.json").exists()


def test_a_rerun_fetches_only_the_missing_files_and_output_does_not_depend_on_workers(tmp_path):
    names = tuple(sorted(n for n in FILES if n.endswith(".gz")))
    with FileServer(FILES) as server:
        for out, workers in (("a", 1), ("b", 4)):
            download(DownloadConfig(source=server.url, files=names, output_path=str(tmp_path / out), workers=workers))
        assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
        (tmp_path / "a" / names[1]).unlink()
        server.requests.clear()
        download(DownloadConfig(source=server.url, files=names, output_path=str(tmp_path / "a")))
        fetched = {p for m, p in server.requests if m == "GET"}
    assert fetched == {f"/{names[1]}"}
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")


def test_a_missing_source_or_a_glob_matching_nothing_fails_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="source does not exist"):
        download(DownloadConfig(source=str(tmp_path / "nope"), output_path=str(tmp_path / "out")))
    src = _local_source(tmp_path / "src")
    with pytest.raises(FileNotFoundError, match=r"no files match '\*\.parquet'"):
        download(DownloadConfig(source=str(src), glob="*.parquet", output_path=str(tmp_path / "out")))
    with pytest.raises(ValueError, match="expected_sha256 names files the source does not have: nope.txt"):
        download(
            DownloadConfig(source=str(src), output_path=str(tmp_path / "out"), expected_sha256={"nope.txt": "0" * 64})
        )
