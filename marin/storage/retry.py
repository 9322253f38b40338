"""Retries with exponential backoff for transient storage errors (5xx, resets), never for preconditions.

Object stores fail now and then (a 503, a reset connection); the executor must ride through those
without a human. A failed precondition, on the other hand, is an answer ("someone else holds the
lease"), never a fault: retrying it could turn a lost race into a false win, so it is not transient.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_ATTEMPTS = 8
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 2.0

TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP answers a retry may cure (409: S3's ConditionalRequestConflict, a concurrent conditional write)."""

_TRANSIENT_NAMES = frozenset(
    {
        # aiohttp (gcsfs)
        "ClientConnectorError",
        "ClientConnectionError",
        "ClientConnectionResetError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientOSError",
        "ClientPayloadError",
        # requests (gcsfs maps 502 to ProxyError)
        "ProxyError",
        "ChunkedEncodingError",
        # botocore / urllib3 (s3fs, the S3 client)
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ProtocolError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "IncompleteRead",
        "RemoteDisconnected",
    }
)


class PreconditionFailed(Exception):
    """A conditional write found the object in another state than required; never retried."""


class HTTPStatusError(OSError):
    """An unexpected HTTP answer from a raw storage request; transient when `status` is 429/5xx."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def is_transient(exc: BaseException) -> bool:
    """True for errors a retry may cure: connection trouble, timeouts, 429 and 5xx answers."""
    if isinstance(exc, PreconditionFailed | FileNotFoundError | FileExistsError | PermissionError):
        return False
    if isinstance(exc, ValueError | TypeError | KeyError):
        return False
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if type(exc).__name__ in _TRANSIENT_NAMES:
        return True
    status = getattr(exc, "status", None) or getattr(exc, "code", None)
    response = getattr(exc, "response", None)
    if status is None and isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if isinstance(status, str) and status.isdigit():
        status = int(status)
    if isinstance(status, int):
        return status in TRANSIENT_STATUSES or status >= 500
    text = str(exc)
    if "Connection reset" in text or "Server disconnected" in text or "Connection aborted" in text:
        return True
    return any(token in text for token in (" 500", " 502", " 503", " 504", "ServiceUnavailable", "SlowDown"))


def backoff_delays(attempts: int = MAX_ATTEMPTS):
    """Jittered exponential delays, one fewer than attempts."""
    delay = FIRST_DELAY_S
    for _ in range(attempts - 1):
        yield delay * (1 + random.random())
        delay = min(delay * 2, MAX_DELAY_S)


def with_retries(fn: Callable[[], T], what: str, attempts: int = MAX_ATTEMPTS) -> T:
    """Calls `fn`, retrying transient failures with jittered exponential backoff."""
    delays = backoff_delays(attempts)
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            logger.debug("retrying %s after %r (attempt %d)", what, exc, attempt)
            time.sleep(next(delays))
    raise AssertionError("unreachable")
