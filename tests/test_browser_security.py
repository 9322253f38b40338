"""The browser serves nothing outside its roots, writes nothing, and binds 127.0.0.1 unless told otherwise.

Requests go over a real socket with http.client, which sends the path exactly as written
(httpx and browsers would normalise `..` away before it reaches the server). A spy on the
root's filesystem proves that a refused request read nothing.
"""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin.browser.app import SECURITY_HEADERS, browser_app, create_app
from marin.browser.storage import Forbidden, check_relative
from tests.browser_pipeline import lab_prefix
from tests.browser_support import ServerThread, fake_gcs_server, upload_tree

SECRET = "TOP-SECRET-CONTENT-42"

TRAVERSAL = [
    "/file/0/../secret.txt",
    "/file/0/..%2fsecret.txt",
    "/file/0/%2e%2e/secret.txt",
    "/file/0/%2E%2E/secret.txt",
    "/file/0/.%2e/secret.txt",
    "/file/0/%2e%2e%2fsecret.txt",
    "/file/0/%252e%252e/secret.txt",
    "/file/0/%252e%252e%252fsecret.txt",
    "/file/0/..%252fsecret.txt",
    "/file/0/%25252e%25252e/secret.txt",
    "/file/0/hello/../../secret.txt",
    "/file/0/hello/%2e%2e/%2e%2e/secret.txt",
    "/file/0/..%5csecret.txt",
    "/file/0/%5c..%5csecret.txt",
    "/file/0/~/secret.txt",
    "/file/0/./experiments",
    "/file/0/experiments//x.json",
    "/file/0/secret%00.txt",
    "/file/0/file:///etc/passwd",
    "/file/0/file:%2f%2f%2fetc%2fpasswd",
    "/raw/0/../secret.txt",
    "/raw/0/%2e%2e/secret.txt",
    "/raw/0//etc/passwd",
    "/raw/0/%2fetc%2fpasswd",
    "/raw/0/%252fetc%252fpasswd",
    "/raw/0/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/raw/0/gs://other-bucket/secret.txt",
    "/raw/0/gs:%2f%2fother-bucket%2fsecret.txt",
    "/raw/0/s3://other-bucket/secret.txt",
    "/raw/0/http://127.0.0.1:1/secret.txt",
    "/raw/0/memory://secret.txt",
    "/raw/0/..%2f..%2fother-bucket%2fsecret.txt",
    "/raw/9/secret.txt",
    "/raw/-1/secret.txt",
    "/raw/x/secret.txt",
    "/step/0/../secret.txt",
    "/step/0/%2e%2e",
    "/tree/0/..",
    "/tree/0/%2e%2e/",
    "/exp/0/../experiments/x.json",
    "/exp/0/%2fexperiments/x.json",
    "/api/log/0/../secret.txt",
    "/api/log/0/experiments/x.json",
    "/compare/0?a=../secret.txt&b=x",
    "/compare/0?a=x&b=gs://other-bucket/secret.txt",
    "/compare/0?a=%2Fetc&b=x",
    "/step/0/x?exp=../secret.txt",
]
SYMLINKS = [
    "/raw/0/escape-dir/secret.txt",
    "/file/0/escape-dir/secret.txt",
    "/tree/0/escape-dir",
    "/raw/0/escape-file",
    "/file/0/escape-file",
    "/step/0/escape-dir",
]


class Spy:
    """Records every call to the read methods of one filesystem instance."""

    METHODS = (
        "open",
        "_open",
        "cat",
        "cat_file",
        "ls",
        "info",
        "isdir",
        "exists",
        "find",
        "glob",
        "_cat_file",
        "_ls",
        "_info",
    )

    def __init__(self, fs):
        self.fs, self.calls, self.saved = fs, [], {}

    def __enter__(self):
        for name in self.METHODS:
            if hasattr(self.fs, name):
                orig = getattr(self.fs, name)
                self.saved[name] = orig

                def wrapper(*a, _orig=orig, _name=name, **k):
                    self.calls.append((_name, a[:1]))
                    return _orig(*a, **k)

                setattr(self.fs, name, wrapper)
        return self

    def __exit__(self, *exc):
        for name in self.saved:
            delattr(self.fs, name)


def get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Content-Length": "0"} if method in ("POST", "PUT", "PATCH") else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("sec")
    (base / "secret.txt").write_text(SECRET)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    root = base / "lab"
    with lab_prefix(root) as names:
        (root / "escape-dir").symlink_to(outside)
        (root / "escape-file").symlink_to(base / "secret.txt")
        (root / "inside-link").symlink_to(root / names["corpus"])
        yield root, names


def test_traversal_corpus_is_refused_with_nothing_read(lab):
    root, names = lab
    assert len(TRAVERSAL) + len(SYMLINKS) >= 30
    app = create_app([str(root)])
    fs = app.state.roots.get(0).fs
    with ServerThread(app) as server, Spy(fs) as spy:
        for path in TRAVERSAL + SYMLINKS:
            spy.calls.clear()
            status, body = get(server.port, path)
            assert status == 403, (path, status, body[:300])
            assert SECRET.encode() not in body, path
            assert b"Traceback" not in body
            if path not in SYMLINKS:
                assert spy.calls == [], (path, spy.calls)
        # the same server does serve what is under the root, through a symlink that stays inside it too
        for path in [
            "/",
            f"/file/0/{names['data']}/docs.jsonl",
            f"/raw/0/{names['stats']}/stats.json",
            "/raw/0/inside-link/docs.jsonl.gz",
            f"/step/0/{names['data']}",
            "/tree/0",
        ]:
            status, _ = get(server.port, path)
            assert status == 200, path


def test_traversal_corpus_is_refused_on_a_gcs_root(lab, tmp_path_factory):
    import gcsfs

    root, names = lab
    with fake_gcs_server(tmp_path_factory.mktemp("gcs-sec")) as url:
        fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=url)
        fs.mkdir("lab-bucket")
        fs.mkdir("other-bucket")
        fs.pipe_file("other-bucket/secret.txt", SECRET.encode())
        fs.pipe_file("lab-bucket/secret.txt", SECRET.encode())
        upload_tree(fs, root / names["corpus"], f"lab-bucket/lab/{names['corpus']}")
        app = create_app(["gs://lab-bucket/lab"], storage_options={"gs": {"token": "anon", "endpoint_url": url}})
        with ServerThread(app) as server, Spy(app.state.roots.get(0).fs) as spy:
            for path in TRAVERSAL:
                spy.calls.clear()
                status, body = get(server.port, path)
                assert status == 403, (path, status, body[:300])
                assert SECRET.encode() not in body and spy.calls == [], path
            status, body = get(server.port, f"/raw/0/{names['corpus']}/docs.jsonl.gz")
            assert status == 200 and body[:2] == b"\x1f\x8b"


@pytest.mark.parametrize(
    "rel",
    [
        "..",
        "a/../b",
        "/abs",
        "a//b",
        "./a",
        "a/.",
        "gs://b/x",
        "s3:",
        "file:/etc/passwd",
        "c:x",
        "%2e%2e",
        "a\\b",
        "a\x00b",
        "~/x",
    ],
)
def test_check_relative_refuses_each_kind_of_escape(rel):
    with pytest.raises(Forbidden):
        check_relative(rel)


def test_check_relative_keeps_ordinary_names():
    for rel in ["", "experiments/hello-1a2b3c4d.json", "a/b.c/d", "100%.txt", "step-10:loss.json", "a b/c"]:
        assert check_relative(rel) == rel


def test_no_route_writes(lab, tmp_path):
    original, names = lab
    root = tmp_path / "copy"  # a still copy: in the original, the running step's executor renews its lease
    shutil.copytree(original, root, symlinks=True, ignore=shutil.ignore_patterns(".tmp-*"))

    def snapshot():
        return sorted((str(p), p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*"))

    before = snapshot()
    with ServerThread(create_app([str(root)])) as server:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            for path in [
                "/",
                f"/file/0/{names['data']}/docs.jsonl",
                f"/raw/0/{names['stats']}/stats.json",
                f"/step/0/{names['data']}",
                f"/api/log/0/{names['train']}/.executor_logs/001.log",
            ]:
                status, _ = get(server.port, path, method)
                assert status == 405, (method, path, status)
        status, body = get(server.port, f"/raw/0/{names['stats']}/stats.json", "HEAD")
        assert status == 200 and body == b""
    assert snapshot() == before


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.Popen(
        [sys.executable, "-m", "marin.browser.app", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def test_binding_beyond_loopback_needs_the_flag_and_warns(lab):
    root, _ = lab
    refused = _start([str(root), "--host", "0.0.0.0"])
    out, err = refused.communicate(timeout=30)
    assert refused.returncode == 2
    assert "--allow-remote" in err and "0.0.0.0" in err

    for args, host, warns in (([], "127.0.0.1", False), (["--host", "0.0.0.0", "--allow-remote"], "0.0.0.0", True)):
        proc = _start([str(root), "--port", "0", *args])
        try:
            line = proc.stdout.readline()
            assert f"http://{host}:" in line, line
            port = int(line.split(f"http://{host}:")[1].split("/")[0])
            deadline = time.time() + 10
            while True:
                try:
                    status, body = get(port, "/")
                    break
                except OSError:
                    assert time.time() < deadline
                    time.sleep(0.1)
            assert status == 200 and b"hello_world" in body
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=15)
        assert ("WARNING" in err) == warns, err


def _request(port: int, path: str, host: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_a_host_header_with_anything_after_the_port_is_refused(lab):
    root, _ = lab
    with ServerThread(browser_app([str(root)])) as server:
        port = server.port
        assert _request(port, "/", f"127.0.0.1:{port}").status == 200
        for host in (
            f"127.0.0.1:{port}@evil.example",
            f"localhost:{port}@evil.example",
            f"127.0.0.1:{port}:{port}",
            f"127.0.0.1:{port}/evil.example",
            f"127.0.0.1 evil.example:{port}",
            f"[::1]:{port}@evil.example",
            f"[evil.example]:{port}",
            "127.0.0.1:x",
        ):
            assert _request(port, "/", host).status == 421, host


def test_error_responses_carry_the_same_security_headers_as_pages(lab):
    root, names = lab
    with ServerThread(browser_app([str(root)])) as server:
        port, host = server.port, f"127.0.0.1:{server.port}"
        page = _request(port, "/", host)
        assert page.status == 200
        expected = {name: page.getheader(name) for name in SECURITY_HEADERS}
        assert all(expected.values()), expected
        for path, host_header, status in (
            ("/no-such-route", host, 404),
            (f"/step/0/{names['data']}-missing", host, 404),
            ("/raw/0/no-such-file.json", host, 404),
            ("/raw/0/../secret.txt", host, 403),
            ("/", "evil.example", 421),
            ("/static/nothing.css", host, 404),
        ):
            response = _request(port, path, host_header)
            assert response.status == status, (path, response.status)
            got = {name: response.getheader(name) for name in SECURITY_HEADERS}
            assert got == expected, (path, status, got)
