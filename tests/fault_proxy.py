"""A fault-injecting HTTP proxy (127.0.0.1 only) between a storage client and an emulator.

Object stores fail in a handful of ways that matter to the executor: a 503 before anything happened,
a connection dropped before the request reached the server, and (the nasty one) a connection dropped
after the server committed the write but before the answer came back. This reverse proxy forwards
each request to the emulator and, for a configurable share of requests, injects one of those faults,
plus a fixed added latency (`latency_s`: each request waits that long before it is forwarded, in its own
thread, so concurrent requests wait together, as over a network). It speaks enough HTTP/1.1 for gcsfs
(aiohttp) and botocore (urllib3): keep-alive, `Content-Length` and chunked request bodies,
`Expect: 100-continue`. It also counts the requests by kind (`kinds`: "read .executor_status",
"write .executor_lease", "list", ...; `request_kind`), which is how the benchmarks state what a step costs.

    proxy = FaultProxy("127.0.0.1:4443", error_rate=0.05, reset_rate=0.05, latency_s=0.02).start()
    os.environ["STORAGE_EMULATOR_HOST"] = proxy.url
"""

from __future__ import annotations

import collections
import http.client
import json
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "expect",
    "content-length",
}


class FaultProxy:
    """Forwards to `upstream` ("host:port"); injects 503s, resets and latency at the given rates."""

    def __init__(
        self,
        upstream: str,
        error_rate: float = 0.0,
        reset_rate: float = 0.0,
        latency_s: float = 0.0,
        seed: int | None = None,
    ):
        self.upstream = upstream
        self.error_rate = error_rate
        self.reset_rate = reset_rate
        self.latency_s = latency_s
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.counts = {"requests": 0, "errors": 0, "resets_before": 0, "resets_after": 0}
        self.kinds: collections.Counter[str] = collections.Counter()
        """Requests by `request_kind` (every request, faulted or not)."""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._scripted: list[str | None] = []
        self._rules: list[Rule] = []
        self.applies_to: Callable[[Request], bool] | None = None
        """When set, random faults hit only the requests it accepts (scripted faults still hit any)."""

    @property
    def url(self) -> str:
        assert self._server is not None, "proxy not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        proxy = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def process_request(self, request, client_address):
                with proxy._lock:
                    proxy._connections.add(request)
                super().process_request(request, client_address)

            def shutdown_request(self, request):
                with proxy._lock:
                    proxy._connections.discard(request)
                super().shutdown_request(request)

        self._server = Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        for rule in self._rules:
            rule.release(drop=True)
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections.clear()
        self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def configure(self, error_rate: float = 0.0, reset_rate: float = 0.0, latency_s: float = 0.0) -> None:
        with self._lock:
            self.error_rate, self.reset_rate, self.latency_s = error_rate, reset_rate, latency_s

    def hold(self, predicate: Callable[[Request], bool]) -> Rule:
        """Holds the first matching request before it reaches the server, until `rule.release()`."""
        rule = Rule(predicate, before=True)
        with self._lock:
            self._rules.append(rule)
        return rule

    def watch(self, predicate: Callable[[Request], bool]) -> Rule:
        """Signals `rule.hit` once the first matching request has been answered."""
        rule = Rule(predicate, before=False)
        with self._lock:
            self._rules.append(rule)
        return rule

    def _match(self, before: bool, request: Request) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.before == before and not rule.hit.is_set() and rule.predicate(request):
                    rule.request = request
                    rule.hit.set()
                    return rule
        return None

    def script(self, *faults: str | None) -> None:
        """Forces the faults of the next requests, in order (then random draws resume)."""
        with self._lock:
            self._scripted.extend(faults)

    def _draw(self, request: Request | None = None) -> str | None:
        """The fault for the next request: None, 'error', 'reset_before' or 'reset_after'."""
        with self._lock:
            self.counts["requests"] += 1
            if request is not None:
                self.kinds[request_kind(request)] += 1
            x = self._random.random()
            if self._scripted:
                fault = self._scripted.pop(0)
                if fault is None:
                    return None
            elif self.applies_to is not None and request is not None and not self.applies_to(request):
                return None
            elif x < self.error_rate:
                fault = "error"
            elif x < self.error_rate + self.reset_rate:
                fault = "reset_before" if self._random.random() < 0.5 else "reset_after"
            else:
                return None
            self.counts["errors" if fault == "error" else f"resets_{fault.split('_')[1]}"] += 1
            return fault

    def forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes):
        host, port = self.upstream.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            conn.close()


def request_kind(request: Request) -> str:
    """What a GCS (JSON API) or S3 request does, and to which kind of object: "read .executor_status",
    "write .executor_attempt/.executor_manifest.json", "copy .executor_status", "list", "delete out.txt"...
    Digits in a name become N (logs `.executor_logs/N.log`); a file inside an attempt's staging folder is
    prefixed `.executor_attempt/`."""
    path, _, query = request.path.partition("?")
    path = unquote(path)
    if request.method == "POST" and "/upload/" in path:
        found = re.search(rb'"name": ?"([^"]+)"', request.body)
        op, key = "write", found.group(1).decode() if found else ""
    elif "/storage/v1/b/" in path:  # GCS JSON API
        parts = path.split("/o/", 1)
        key = parts[1] if len(parts) > 1 else ""
        if "/rewriteTo/" in key or "/copyTo/" in key:
            op, key = "copy", re.split(r"/(?:rewriteTo|copyTo)/b/[^/]+/o/", key)[-1]
        elif not key:
            op = "list"
        else:
            op = {"GET": "read", "DELETE": "delete", "PATCH": "update"}.get(request.method, request.method)
            if request.method == "GET" and "alt=media" not in query:
                op = "stat"
    else:  # S3: /bucket/key
        key = path.lstrip("/").partition("/")[2]
        if not key or "list-type" in query or "delimiter" in query:
            op = "list"
        elif request.method == "PUT" and "x-amz-copy-source" in request.headers:
            op = "copy"
        else:
            op = {"GET": "read", "PUT": "write", "DELETE": "delete", "HEAD": "stat", "POST": "post"}.get(
                request.method, request.method
            )
    if op == "list":
        return "list"
    parts = key.split("/")
    name = re.sub(r"\d+", "N", "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] == ".executor_logs" else parts[-1])
    if any(p.startswith(".executor_attempt.") for p in parts[:-1]):
        name = ".executor_attempt/" + name
    return f"{op} {name}"


@dataclass(frozen=True)
class Request:
    """A request as the proxy saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Rule:
    """A request pattern the test waits for (`hit`), optionally held until `release(drop=...)`."""

    def __init__(self, predicate: Callable[[Request], bool], before: bool):
        self.predicate = predicate
        self.before = before
        self.hit = threading.Event()
        self._released = threading.Event()
        self.drop = False
        self.request: Request | None = None
        """The request that matched."""

    def release(self, drop: bool = False) -> None:
        """Lets the held request go on, or (drop=True) drops its connection without forwarding it."""
        self.drop = drop
        self._released.set()

    def wait_released(self, timeout_s: float = 300) -> None:
        self._released.wait(timeout_s)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault-proxy"

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset(self) -> None:
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _proxy(self) -> None:
        proxy: FaultProxy = self.server.proxy  # type: ignore[attr-defined]
        body = self._read_body()
        request = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        held = proxy._match(True, request)
        if held is not None:
            held.wait_released()
            if held.drop:
                self._reset()
                return
        fault = proxy._draw(request)
        if proxy.latency_s:
            time.sleep(proxy.latency_s)
        if fault == "error":
            payload = json.dumps({"error": {"code": 503, "message": "injected by fault proxy"}}).encode()
            head = (
                f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
            )
            self.wfile.write(head.encode() + b"\r\n\r\n" + payload)
            return
        if fault == "reset_before":
            self._reset()
            return
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
        try:
            status, reason, out_headers, data = proxy.forward(self.command, self.path, headers, body)
        except OSError:
            self._reset()
            return
        if fault == "reset_after":
            self._reset()
            return
        lines = [f"HTTP/1.1 {status} {reason}"]
        upstream_length = None
        for name, value in out_headers:
            if name.lower() == "content-length":
                upstream_length = value
            elif name.lower() not in HOP_BY_HOP:
                lines.append(f"{name}: {value}")
        if self.command == "HEAD":
            lines.append(f"Content-Length: {upstream_length or 0}")
        elif status not in (204, 304) and not 100 <= status < 200:
            lines.append(f"Content-Length: {len(data)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # One write: headers and body in separate small segments would meet Nagle and delayed ACKs.
        self.wfile.write(head if self.command == "HEAD" else head + data)
        proxy._match(False, request)

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _proxy
