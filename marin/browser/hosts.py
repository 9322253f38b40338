"""Answering only requests addressed to the browser by a name it was told.

The browser binds a fixed port (8765) on 127.0.0.1, which keeps other machines out but not other web
pages: a page the researcher visits can point a name it controls at 127.0.0.1 (DNS rebinding) and read
the browser's answers as same-origin. What tells such a request apart is its `Host` header, which
names the attacker's domain. So every request whose Host is not one of the names the server was
bound under (127.0.0.1, localhost and ::1 on a loopback bind, the `--host` given, and `--allowed_host`
additions) is refused with 421 Misdirected Request before any page or file is read.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(header: str) -> str:
    """The host part of a `Host` header, lower-cased, without port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    if header.count(":") > 1:
        return header
    return header.partition(":")[0].rstrip(".")


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a server bound to `bind_host` answers to; a wildcard bind (0.0.0.0, ::) adds this machine's
    host names."""
    names = {*LOOPBACK_NAMES, host_name(bind_host), *(host_name(h) for h in extra if h)}
    try:
        wildcard = ipaddress.ip_address(bind_host).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(n for n in names if n)


class HostCheck:
    """ASGI middleware: requests whose Host header names none of `allowed` get 421 and nothing else."""

    def __init__(self, app, allowed: Iterable[str]):
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
        if host_name(header) in self.allowed:
            await self.app(scope, receive, send)
            return
        body = (
            f"marin browse: refused a request for host {header[:100]!r}: this server answers only "
            f"{', '.join(sorted(self.allowed))} (add a name with --allowed_host)\n"
        ).encode()
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 421,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
