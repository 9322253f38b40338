"""Objects of any size on local, GCS (fake-gcs-server) and S3 (moto): parts up, ranges down, crashes invisible.

The part size is lowered to 5 MiB (S3's minimum part, a multiple of GCS's 256 KiB chunk), so a 12 MiB
object takes the resumable (GCS) and multipart (S3) paths the same way a 40 GB one does.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from marin import storage
from marin.storage.staging import prepare_publication, publish, staging_path
from tests.emulators import STORES

MiB = 1 << 20
PART = 5 * MiB
BIG = 12 * MiB + 123  # three parts: 5 MiB, 5 MiB, the rest
BUCKETS = ["gcs", "s3"]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setenv("MARIN_STORAGE_PART_BYTES", str(PART))
    monkeypatch.setenv("MARIN_STORAGE_READ_BYTES", str(MiB))
    monkeypatch.setenv("MARIN_STORAGE_COPY_PART_BYTES", str(PART))


def _data(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _s3_client():
    from marin.storage import s3

    return s3._client()


def _s3_unfinished_uploads(prefix: str) -> list[dict]:
    bucket, key = prefix.split("://", 1)[1].split("/", 1)
    return _s3_client().list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])


def _s3_etag(path: str) -> str:
    bucket, key = path.split("://", 1)[1].split("/", 1)
    return _s3_client().head_object(Bucket=bucket, Key=key)["ETag"]


@pytest.mark.parametrize("store", STORES)
def test_a_big_object_goes_up_in_parts_and_reads_back_in_ranges(bucket_prefix, store, small_parts, tmp_path):
    prefix = bucket_prefix(store)
    path = storage.join(prefix, "shards/big.bin")
    data = _data(BIG)
    with storage.open_write(path) as f:
        for start in range(0, BIG, 3 * MiB + 7):  # uneven writes across part boundaries
            f.write(data[start : start + 3 * MiB + 7])
        if store != "local":
            assert f._parts == 2, "the first two parts go up while writing"
        assert storage.read_bytes(path) is None, "nothing is visible before close"
    if store == "s3":
        assert _s3_etag(path).endswith('-3"'), "a three-part multipart upload"

    assert storage.size(path) == BIG
    with storage.open_read(path) as f:
        assert f.read(10) == data[:10]
        f.seek(PART - 3)
        assert f.read(2 * MiB) == data[PART - 3 : PART - 3 + 2 * MiB]
        f.seek(-5, os.SEEK_END)
        assert f.read() == data[-5:]
        f.seek(0)
        assert f.read() == data
    assert storage.read_bytes(path) == data

    manifest = storage.compute_manifest(prefix)
    assert manifest["files"] == [{"path": "shards/big.bin", "size": BIG, "sha256": hashlib.sha256(data).hexdigest()}]

    local = tmp_path / "down.bin"
    storage.get_file(path, str(local))
    assert local.read_bytes() == data
    storage.put_file(str(local), storage.join(prefix, "up.bin"))
    assert storage.read_bytes(storage.join(prefix, "up.bin")) == data

    with storage.open_write(storage.join(prefix, "text.jsonl"), "w") as f:
        f.write('{"text": "é"}\n')
    with storage.open_read(storage.join(prefix, "text.jsonl"), "r") as f:
        assert f.read() == '{"text": "é"}\n'


@pytest.mark.parametrize("store", STORES)
def test_a_stream_left_by_an_exception_publishes_nothing(bucket_prefix, store, small_parts):
    prefix = bucket_prefix(store)
    path = storage.join(prefix, "out.bin")
    storage.write_bytes(path, b"previous")
    with pytest.raises(RuntimeError, match="step failed"):
        with storage.open_write(path) as f:
            f.write(_data(BIG))
            raise RuntimeError("step failed")
    with pytest.raises(RuntimeError, match="step failed"):
        with storage.open_write(storage.join(prefix, "new.txt"), "w") as f:
            f.write("x" * BIG)
            raise RuntimeError("step failed")
    dropped = storage.open_write(storage.join(prefix, "dropped.bin"))
    dropped.write(_data(BIG))
    del dropped  # never closed: an unfinished write must not be published by the garbage collector
    assert storage.read_bytes(path) == b"previous"
    assert storage.list_dir(prefix) == ["out.bin"]
    if store == "s3":
        assert _s3_unfinished_uploads(prefix) == [], "failed uploads are aborted"


VICTIM = """
import sys, time
from marin import storage

chunk = bytes(range(256)) * 4096
writers = [storage.open_write(p) for p in sys.argv[1:]]
for _ in range(11):
    for w in writers:
        w.write(chunk)
for w in writers:
    w.flush()
print("parts", [getattr(w, "_parts", w.tell()) for w in writers], flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("store", STORES)
def test_kill_9_mid_upload_leaves_nothing_a_reader_or_the_manifest_takes_for_complete(
    bucket_prefix, store, small_parts
):
    prefix = bucket_prefix(store)
    done, old, new = (storage.join(prefix, name) for name in ("done.bin", "old.bin", "new.bin"))
    storage.write_bytes(done, b"complete")
    storage.write_bytes(old, b"version 1")
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, new, old], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = victim.stdout.readline()
        assert line.startswith("parts"), f"the uploader died early: {line!r}"
        if store != "local":
            assert line.strip() == "parts [2, 2]", line  # killed with two parts of each object uploaded
        else:
            assert line.strip() == f"parts [{11 * MiB}, {11 * MiB}]", line
        os.kill(victim.pid, signal.SIGKILL)
    finally:
        victim.kill()
        victim.wait()

    assert storage.read_bytes(new) is None and not storage.exists(new) and storage.size(new) is None
    assert storage.read_bytes(old) == b"version 1"
    with pytest.raises(FileNotFoundError):
        storage.open_read(new)
    manifest = storage.compute_manifest(prefix)
    assert [(f["path"], f["size"]) for f in manifest["files"]] == [("done.bin", 8), ("old.bin", 9)]
    names = storage.list_dir(prefix)
    assert [n for n in names if not n.startswith(".tmp-")] == ["done.bin", "old.bin"]
    if store == "local":  # the temporary files hold what was written, under names nobody publishes
        leftovers = sorted(n.rsplit(".", 2)[-2] for n in names if n.startswith(".tmp-"))
        assert leftovers == ["new", "old"]
    if store == "s3":  # the two uploads exist, unfinished and invisible
        assert sorted(u["Key"].rsplit("/", 1)[-1] for u in _s3_unfinished_uploads(prefix)) == ["new.bin", "old.bin"]

    data = _data(BIG, seed=1)
    with storage.open_write(new) as f:
        f.write(data)
    assert storage.read_bytes(new) == data


@pytest.mark.parametrize("store", BUCKETS)
def test_publish_copies_objects_above_the_single_copy_size_in_parts(bucket_prefix, store, small_parts):
    prefix = bucket_prefix(store)
    out = storage.join(prefix, "out")
    staging = staging_path(out, "001-0123abcd")
    data = _data(BIG, seed=2)
    storage.write_bytes(storage.join(staging, "cache/train.bin"), data)
    storage.write_bytes(storage.join(staging, "meta.json"), b"{}")
    publish(prepare_publication(staging, out))
    assert storage.read_bytes(storage.join(out, "cache/train.bin")) == data
    assert storage.read_bytes(storage.join(out, "meta.json")) == b"{}"
    if store == "s3":
        assert _s3_etag(storage.join(out, "cache/train.bin")).endswith('-3"'), "UploadPartCopy in three parts"
        assert _s3_unfinished_uploads(prefix) == []


@pytest.mark.parametrize("store", BUCKETS)
def test_big_objects_go_up_and_down_intact_through_faults(bucket_prefix, fault_endpoint, store, small_parts):
    """10% 503s and 10% dropped connections on every request through the proxy, except GCS session chunks.

    fake-gcs-server cannot resume a resumable session as GCS does (fsouza/fake-gcs-server#1149): it
    finalizes the object on a status query (`Content-Range: bytes */*`) and appends a re-sent chunk. So
    on GCS random faults spare the session's chunks; the answer to the last chunk is lost on purpose.
    """
    prefix = bucket_prefix(store)
    proxy = fault_endpoint(store, error_rate=0.1, reset_rate=0.1, seed=5)
    if store == "gcs":
        proxy.applies_to = lambda request: "upload_id=" not in request.path
    data = _data(BIG, seed=3)
    # the answer to the request that commits the object (S3: CompleteMultipartUpload, GCS: the last chunk)
    # is lost after the store committed it: the writer must still know that it succeeded
    proxy.script(*[None] * (4 if store == "s3" else 3), "reset_after")
    storage.write_bytes(storage.join(prefix, "big-0.bin"), data)
    assert proxy.counts["resets_after"] == 1
    for i in (1, 2):
        storage.write_bytes(storage.join(prefix, f"big-{i}.bin"), data)
    storage.copy(storage.join(prefix, "big-2.bin"), storage.join(prefix, "copy.bin"))
    got = storage.read_bytes_many([storage.join(prefix, f"{n}.bin") for n in ("big-0", "big-1", "big-2", "copy")])
    with storage.open_read(storage.join(prefix, "big-0.bin")) as f:
        streamed = f.read()
    manifest = storage.compute_manifest(prefix)
    proxy.configure()
    assert got == [data] * 4 and streamed == data
    assert {f["sha256"] for f in manifest["files"]} == {hashlib.sha256(data).hexdigest()}
    assert proxy.counts["errors"] > 0 and proxy.counts["resets_before"] + proxy.counts["resets_after"] > 1
    if store == "s3":
        # (a CreateMultipartUpload whose answer was lost leaves an upload nobody knows: a lifecycle rule's job)
        assert _s3_etag(storage.join(prefix, "big-0.bin")).endswith('-3"')


@pytest.mark.parametrize("store", BUCKETS)
def test_an_object_replaced_while_streamed_fails_the_read_instead_of_mixing_versions(bucket_prefix, store, small_parts):
    path = storage.join(bucket_prefix(store), "x.bin")
    storage.write_bytes(path, _data(3 * MiB, seed=4))
    with storage.open_read(path) as f:
        f.read(MiB)
        storage.write_bytes(path, _data(3 * MiB, seed=5))
        with pytest.raises(storage.ObjectChanged):
            f.read(MiB)


def test_part_sizes_the_stores_refuse_are_named_before_any_request(monkeypatch):
    with pytest.raises(ValueError, match="S3 parts must be at least 5 MiB"):
        storage.open_write("s3://b/k", part_bytes=MiB)
    with pytest.raises(ValueError, match="multiples of 256 KiB"):
        storage.open_write("gs://b/k", part_bytes=PART + 1)
    monkeypatch.setenv("MARIN_STORAGE_PART_BYTES", "lots")
    with pytest.raises(ValueError, match="MARIN_STORAGE_PART_BYTES must be a number of bytes"):
        storage.open_write("gs://b/k")


def _storage_imports(path: Path, modules: set[str]) -> set[str]:
    """The marin.storage modules that `path` imports, at any depth (lazy imports in functions count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("marin.storage"):
            if node.module == "marin.storage":
                found |= {a.name if a.name in modules else "__init__" for a in node.names}
            else:
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("marin.storage.")}
    return found


def test_the_storage_package_has_no_import_cycle():
    folder = REPO / "marin" / "storage"
    modules = {p.stem for p in folder.glob("*.py")}
    graph = {m: _storage_imports(folder / f"{m}.py", modules) - {m} for m in modules}
    cycles, state = [], {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycles.append(" -> ".join(trail[trail.index(n) :] + [m, n]) if n in trail else f"{m} -> {n}")
            elif n not in state:
                visit(n, trail + [m])
        state[m] = "done"

    for m in sorted(modules):
        if m not in state:
            visit(m, [])
    assert not cycles, "import cycles in marin.storage:\n" + "\n".join(cycles)
