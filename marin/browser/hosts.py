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
import re
import socket
from collections.abc import Iterable

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


_REG_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?)*\.?")
_PORT = re.compile(r"[0-9]{1,5}")


def host_name(header: str) -> str:
    """The host part of a `Host` header (RFC 9110: `host [":" port]`), lower-cased, without port or IPv6
    brackets; "" when the header is not one: anything after the host other than `:digits` (a userinfo-like
    `127.0.0.1:8765@evil.example`, a path, a second port), a name with characters no host name has, or
    brackets around something other than an IPv6 address."""
    header = header.strip().lower()
    if header.startswith("["):
        inside, closed, rest = header[1:].partition("]")
        if not closed or (rest and not (rest[:1] == ":" and _PORT.fullmatch(rest[1:]))):
            return ""
        return inside if _is_ipv6(inside) else ""
    if header.count(":") > 1:
        return header if _is_ipv6(header) else ""
    name, colon, port = header.partition(":")
    if colon and not _PORT.fullmatch(port):
        return ""
    return name.rstrip(".") if _REG_NAME.fullmatch(name) else ""


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


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
