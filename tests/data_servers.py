"""Real HTTP servers on 127.0.0.1 for the download tests: a static file server and a tiny Hugging Face hub.

`HubServer` implements the few routes huggingface_hub's `HfFileSystem` calls for a dataset repo:
repo info at a revision (`/api/datasets/ORG/NAME/revision/REV`), the file tree
(`/api/datasets/ORG/NAME/tree/REV/PATH`) and file bytes with HTTP ranges
(`/datasets/ORG/NAME/resolve/REV/PATH`). Unknown revisions answer 404 with the hub's error code, so
the client raises its own RevisionNotFoundError. Every request is recorded in `requests`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head: bool):
        self.server.requests.append((self.command, self.path))
        route = self.server.owner.route(self.command, urlparse(self.path))
        if route is None:
            self._send(
                404,
                b'{"error": "not found"}',
                {"Content-Type": "application/json", "X-Error-Code": "EntryNotFound"},
                head,
            )
            return
        status, body, headers = route
        if status == 200 and headers.get("X-Bytes") == "1":
            headers.pop("X-Bytes")
            headers["Accept-Ranges"] = "bytes"
            rng = self.headers.get("Range")
            if rng:
                m = re.match(r"bytes=(\d+)-(\d*)", rng)
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else len(body) - 1
                end = min(end, len(body) - 1)
                headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
                self._send(206, body[start : end + 1], headers, head)
                return
        self._send(status, body, headers, head)

    def _send(self, status: int, body: bytes, headers: dict, head: bool):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Base:
    def __init__(self):
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self
        self.httpd.requests = []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> list[tuple[str, str]]:
        return self.httpd.requests

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class FileServer(_Base):
    """Serves `files` (name -> bytes) at /NAME, with HEAD and Range support."""

    def __init__(self, files: dict[str, bytes]):
        super().__init__()
        self.files = files

    def route(self, method, url):
        name = unquote(url.path).lstrip("/")
        if name in self.files:
            return 200, self.files[name], {"Content-Type": "application/octet-stream", "X-Bytes": "1"}
        return None


class HubServer(_Base):
    """A hub holding one dataset repo `repo` ("org/name") with `files` at revision `revision`."""

    def __init__(self, repo: str, revision: str, files: dict[str, bytes]):
        super().__init__()
        self.repo, self.revision, self.files = repo, revision, files
        self.sha = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()

    def _known(self, rev: str) -> bool:
        return rev in (self.revision, self.sha)

    def route(self, method, url):
        path = unquote(url.path)
        prefix = f"/api/datasets/{self.repo}/"
        if path.startswith(prefix + "revision/"):
            rev = path[len(prefix + "revision/") :]
            if not self._known(rev):
                return (
                    404,
                    b'{"error": "Invalid rev id"}',
                    {"Content-Type": "application/json", "X-Error-Code": "RevisionNotFound"},
                )
            info = {
                "id": self.repo,
                "sha": self.sha,
                "private": False,
                "siblings": [{"rfilename": f} for f in sorted(self.files)],
            }
            return 200, json.dumps(info).encode(), {"Content-Type": "application/json"}
        if path.startswith(prefix + "tree/"):
            rest = path[len(prefix + "tree/") :]
            rev, _, sub = rest.partition("/")
            if not self._known(rev):
                return (
                    404,
                    b'{"error": "Invalid rev id"}',
                    {"Content-Type": "application/json", "X-Error-Code": "RevisionNotFound"},
                )
            return (
                200,
                json.dumps(self._tree(sub.strip("/"), "recursive=true" in (url.query or "").lower())).encode(),
                {"Content-Type": "application/json"},
            )
        resolve = f"/datasets/{self.repo}/resolve/"
        if path.startswith(resolve):
            rev, _, name = path[len(resolve) :].partition("/")
            if self._known(rev) and name in self.files:
                body = self.files[name]
                return (
                    200,
                    body,
                    {
                        "Content-Type": "application/octet-stream",
                        "X-Bytes": "1",
                        "ETag": f'"{hashlib.sha256(body).hexdigest()}"',
                        "X-Repo-Commit": self.sha,
                    },
                )
        return None

    def _tree(self, sub: str, recursive: bool) -> list[dict]:
        entries, dirs = [], set()
        base = f"{sub}/" if sub else ""
        for name in sorted(self.files):
            if not name.startswith(base):
                continue
            rest = name[len(base) :]
            if "/" in rest and not recursive:
                dirs.add(base + rest.split("/", 1)[0])
                continue
            if recursive:
                parts = rest.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    dirs.add(base + "/".join(parts[:i]))
            oid = hashlib.sha1(self.files[name]).hexdigest()
            entries.append({"type": "file", "oid": oid, "size": len(self.files[name]), "path": name})
        entries += [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "path": d} for d in sorted(dirs)]
        return entries
