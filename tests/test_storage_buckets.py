"""marin.storage on a local folder, on GCS (fake-gcs-server) and on S3 (moto), also under injected faults.

The servers are real HTTP servers on 127.0.0.1 (tests/emulators.py); races run in separate processes.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from marin import storage
from marin.storage.retry import PreconditionFailed, is_transient
from tests.emulators import STORES

BUCKETS = ["gcs", "s3"]


_startup_barrier = None


def _init_worker(barrier) -> None:
    global _startup_barrier
    _startup_barrier = barrier


def _warm() -> int:
    import botocore.session  # noqa: F401
    import gcsfs  # noqa: F401

    _startup_barrier.wait(timeout=120)  # holds each worker until all eight run: one warm-up each
    return os.getpid()


def _in_env(env: dict, fn, *args):
    os.environ.update(env)
    return fn(*args)


def _claim(path: str, me: int, start_at: float) -> tuple[int, str | None]:
    time.sleep(max(0.0, start_at - time.time()))
    return me, storage.create_if_absent(path, f"runner-{me}".encode())


def _append_lines(path: str, me: int, n: int, start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))
    for i in range(n):
        storage.append_line(path, f"{me}:{i}")


@pytest.fixture(scope="module")
def racers():
    """Eight worker processes, started once (imports cost seconds), shared by the race tests."""
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(8)
    with ProcessPoolExecutor(8, mp_context=spawn, initializer=_init_worker, initargs=(barrier,)) as pool:
        pids = {f.result(timeout=180) for f in [pool.submit(_warm) for _ in range(8)]}
        assert len(pids) == 8
        yield pool


def _race(pool, fn, args_list) -> list:
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "STORAGE_EMULATOR"))}
    futures = [pool.submit(_in_env, env, fn, *args) for args in args_list]
    return [f.result(timeout=120) for f in futures]


@pytest.mark.parametrize("store", STORES)
def test_plain_reads_writes_list_and_delete(bucket_prefix, store):
    prefix = bucket_prefix(store)
    path = storage.join(prefix, "step-1/data/a.txt")
    assert storage.read_bytes(path) is None
    assert not storage.exists(path)
    storage.write_text(path, "hello")
    storage.write_bytes(storage.join(prefix, "step-1/b.bin"), b"\x00\x01")
    assert storage.read_text(path) == "hello"
    assert storage.exists(path)
    assert storage.exists(storage.join(prefix, "step-1"))
    assert storage.list_dir(storage.join(prefix, "step-1")) == ["b.bin", "data"]
    assert storage.read_bytes_many([path, storage.join(prefix, "nope"), storage.join(prefix, "step-1/b.bin")]) == [
        b"hello",
        None,
        b"\x00\x01",
    ]
    storage.delete(path)
    storage.delete(path)
    assert storage.read_bytes(path) is None
    storage.delete(storage.join(prefix, "step-1"), recursive=True)
    assert storage.list_dir(storage.join(prefix, "step-1")) == []


@pytest.mark.parametrize("store", STORES)
def test_exactly_one_of_8_processes_wins_create_if_absent(bucket_prefix, racers, store):
    prefix = bucket_prefix(store)
    for r in range(3):
        path = f"{prefix}/claim-{r}"
        start_at = time.time() + 0.3
        outcomes = _race(racers, _claim, [(path, me, start_at) for me in range(8)])
        winners = [(me, v) for me, v in outcomes if v is not None]
        assert len(winners) == 1, f"round {r}: winners {winners}"
        (me, version), current = winners[0], storage.read_with_version(path)
        assert current == storage.VersionedBytes(f"runner-{me}".encode(), version)


@pytest.mark.parametrize("store", STORES)
def test_stale_version_cannot_replace_or_delete(bucket_prefix, store):
    path = storage.join(bucket_prefix(store), "lease.json")
    v1 = storage.create_if_absent(path, b"owner=a")
    assert v1 is not None
    assert storage.create_if_absent(path, b"owner=b") is None
    assert storage.read_with_version(path) == storage.VersionedBytes(b"owner=a", v1)
    v2 = storage.replace_if_unchanged(path, b"owner=b", v1)
    assert v2 is not None and v2 != v1
    assert storage.replace_if_unchanged(path, b"owner=c", v1) is None
    assert not storage.delete_if_unchanged(path, v1)
    assert storage.read_with_version(path) == storage.VersionedBytes(b"owner=b", v2)
    assert storage.delete_if_unchanged(path, v2)
    assert storage.read_with_version(path) is None
    assert storage.replace_if_unchanged(path, b"owner=d", v2) is None
    assert storage.read_with_version(path) is None


@pytest.mark.parametrize("store", STORES)
def test_append_line_from_several_processes_loses_no_line(bucket_prefix, racers, store):
    path = storage.join(bucket_prefix(store), "experiments/x.runs.jsonl")
    n, lines = 6, 8
    start_at = time.time() + 0.3
    _race(racers, _append_lines, [(path, me, lines, start_at) for me in range(n)])
    got = storage.read_text(path).splitlines()
    assert sorted(got) == sorted(f"{me}:{i}" for me in range(n) for i in range(lines))
    for me in range(n):
        assert [x for x in got if x.startswith(f"{me}:")] == [f"{me}:{i}" for i in range(lines)]


@pytest.mark.parametrize("store", STORES)
def test_manifest_lists_every_output_file_with_size_and_sha256(bucket_prefix, store, monkeypatch):
    monkeypatch.setattr("marin.storage.manifest.CHUNK", 1000)  # so that shards/00001.bin is read in ranges
    root = storage.join(bucket_prefix(store), "tokenized/tiny-0123abcd")
    files = {
        "docs.jsonl": b'{"text": "a"}\n' * 50,
        "shards/00000.bin": bytes(range(256)) * 9,
        "shards/00001.bin": bytes(range(251)) * 100,
        "empty.txt": b"",
    }
    for rel, data in files.items():
        storage.write_bytes(storage.join(root, rel), data)
    storage.write_text(storage.join(root, ".executor_status"), "RUNNING")
    storage.write_text(storage.join(root, ".executor_logs/001.log"), "log")
    manifest = storage.compute_manifest(root)
    expected = [
        {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for rel, data in sorted(files.items())
    ]
    assert manifest == {"files": expected, "total_size": sum(len(d) for d in files.values())}


def test_preconditions_are_never_transient():
    assert not is_transient(PreconditionFailed("x"))
    assert not is_transient(FileExistsError("gs://b/o"))
    assert is_transient(ConnectionResetError())


@pytest.mark.parametrize("store", BUCKETS)
def test_create_whose_answer_was_lost_still_reports_its_win(bucket_prefix, fault_endpoint, store):
    prefix = bucket_prefix(store)
    proxy = fault_endpoint(store)
    path = storage.join(prefix, "lease.json")
    proxy.script("reset_after")
    version = storage.create_if_absent(path, b"mine")
    assert proxy.counts["resets_after"] == 1
    assert version is not None
    assert storage.read_with_version(path) == storage.VersionedBytes(b"mine", version)
    proxy.script("reset_after")
    v2 = storage.replace_if_unchanged(path, b"mine, renewed", version)
    assert v2 is not None
    assert storage.read_with_version(path) == storage.VersionedBytes(b"mine, renewed", v2)
    proxy.script("reset_after")
    assert storage.delete_if_unchanged(path, v2)
    assert storage.read_with_version(path) is None


@pytest.mark.parametrize("store", BUCKETS)
def test_200_conditional_writes_under_5_percent_faults_all_end_correct(bucket_prefix, fault_endpoint, store):
    prefix = bucket_prefix(store)
    proxy = fault_endpoint(store, error_rate=0.05, reset_rate=0.05, seed=7)
    chain = storage.join(prefix, "chain")
    version = storage.create_if_absent(chain, b"0")
    assert version is not None
    for i in range(1, 100):
        version = storage.replace_if_unchanged(chain, str(i).encode(), version)
        assert version is not None, f"replace {i} lost"
    for i in range(100):
        assert storage.create_if_absent(storage.join(prefix, f"new/{i}"), str(i).encode()) is not None, i
    proxy.configure()
    assert storage.read_with_version(chain) == storage.VersionedBytes(b"99", version)
    assert storage.read_bytes_many([storage.join(prefix, f"new/{i}") for i in range(100)]) == [
        str(i).encode() for i in range(100)
    ]
    assert proxy.counts["errors"] > 0 and proxy.counts["resets_before"] > 0 and proxy.counts["resets_after"] > 0


@pytest.mark.parametrize("store", BUCKETS)
def test_precondition_failure_is_never_retried_into_success(bucket_prefix, fault_endpoint, store):
    prefix = bucket_prefix(store)
    path = storage.join(prefix, "lease.json")
    current = storage.create_if_absent(path, b"owner=a")
    stale = storage.replace_if_unchanged(path, b"owner=a2", current)
    current = storage.replace_if_unchanged(path, b"owner=a3", stale)
    proxy = fault_endpoint(store, error_rate=0.1, reset_rate=0.1, seed=3)
    for i in range(40):
        assert storage.create_if_absent(path, f"thief-{i}".encode()) is None
        assert storage.replace_if_unchanged(path, f"thief-{i}".encode(), stale) is None
        assert not storage.delete_if_unchanged(path, stale)
    proxy.configure()
    assert storage.read_with_version(path) == storage.VersionedBytes(b"owner=a3", current)
    assert proxy.counts["errors"] + proxy.counts["resets_before"] + proxy.counts["resets_after"] > 0


def test_fault_proxy_forwards_chunked_bodies_and_keeps_the_connection_alive(gcs_emulator, fault_endpoint):
    import http.client

    proxy = fault_endpoint("gcs", latency_s=0.01)
    host, port = proxy.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    meta = b'{"name": "proxy/chunked.txt"}'
    body = b"--b\r\nContent-Type: application/json\r\n\r\n" + meta + b"\r\n--b\r\n\r\nchunked payload\r\n--b--\r\n"
    conn.putrequest("POST", f"/upload/storage/v1/b/{gcs_emulator.bucket}/o?uploadType=multipart")
    conn.putheader("Content-Type", "multipart/related; boundary=b")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for part in (body[:10], body[10:]):
        conn.send(b"%x\r\n%s\r\n" % (len(part), part))
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 200, response.read()
    response.read()
    sock = conn.sock
    conn.request("GET", f"/download/storage/v1/b/{gcs_emulator.bucket}/o/proxy%2Fchunked.txt?alt=media")
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, b"chunked payload")
    conn.request("HEAD", f"/download/storage/v1/b/{gcs_emulator.bucket}/o/proxy%2Fchunked.txt?alt=media")
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == "15" and response.read() == b""
    assert conn.sock is sock, "the proxy closed a keep-alive connection"
    conn.close()
    assert proxy.counts["requests"] == 3


@pytest.mark.parametrize("store", BUCKETS)
def test_append_line_writes_each_line_once_when_replies_are_lost_while_others_append(
    bucket_prefix, fault_endpoint, store
):
    from concurrent.futures import ThreadPoolExecutor

    path = storage.join(bucket_prefix(store), "experiments/x.runs.jsonl")
    proxy = fault_endpoint(store, reset_rate=0.3, seed=3)
    n, lines = 4, 10
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda me: _append_lines(path, me, lines, 0.0), range(n)))
    proxy.configure()
    got = storage.read_text(path).splitlines()
    assert proxy.counts["resets_after"] > 0
    assert sorted(got) == sorted(f"{me}:{i}" for me in range(n) for i in range(lines))
