"""The browser answers only requests addressed to a name it binds: a rebound DNS name gets a 4xx, no page."""

from __future__ import annotations

import http.client
import sys
import urllib.parse

from marin.browser.hosts import allowed_hosts, host_name
from tests.browse_process import browsing


def _get(url: str, host: str | None) -> tuple[int, str]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("GET", "/", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def test_only_the_bound_names_are_answered_over_http(tmp_path):
    root = tmp_path / "lab"
    (root / "experiments").mkdir(parents=True)
    argv = [sys.executable, "-m", "marin.cli", "browse", str(root), "--port", "0", "--allowed_host", "lab.example"]
    with browsing(argv) as url:
        port = urllib.parse.urlsplit(url).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"LAB.example:{port}", f"[::1]:{port}"):
            status, body = _get(url, host)
            assert status == 200 and "<html" in body.lower(), host
        for host in (f"evil.example:{port}", "127.0.0.1.evil.example", "", f"lab.example.evil:{port}"):
            status, body = _get(url, host)
            assert status == 421, host
            assert "refused a request" in body and "<html" not in body.lower()
        status, _ = _get(url, None)
        assert status in (400, 421)  # HTTP/1.1 without a Host header: the HTTP server refuses it first


def test_host_names_parse_ports_brackets_and_wildcards():
    assert host_name("Example.COM:8765") == "example.com"
    assert host_name("[::1]:8765") == "::1" and host_name("::1") == "::1"
    assert host_name("localhost.") == "localhost"
    assert allowed_hosts("127.0.0.1") == frozenset({"127.0.0.1", "localhost", "::1"})
    assert "10.1.2.3" in allowed_hosts("10.1.2.3", ["tunnel.example"])
    assert "tunnel.example" in allowed_hosts("10.1.2.3", ["tunnel.example"])
    assert host_name("127.0.0.1:8765@evil.example") == "", "a port is digits only: nothing may follow it"
    assert host_name("[::1]:8765@evil.example") == "" and host_name("[evil.example]:80") == ""
    assert host_name("127.0.0.1/x") == "" and host_name("a b") == ""
