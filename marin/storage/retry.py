"""Retries with exponential backoff for transient storage errors (5xx, resets), never for preconditions."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_ATTEMPTS = 8


class PreconditionFailed(Exception):
    """A conditional write found the object in another state than required; never retried."""


def is_transient(exc: BaseException) -> bool:
    """True for errors a retry may cure: connection trouble, timeouts, 429 and 5xx answers."""
    if isinstance(exc, PreconditionFailed | FileNotFoundError | PermissionError | ValueError | TypeError):
        return False
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    status = getattr(exc, "code", None) or getattr(exc, "status", None)
    response = getattr(exc, "response", None)
    if status is None and isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if isinstance(status, int):
        return status == 429 or status >= 500
    name = type(exc).__name__
    text = str(exc)
    transient_names = ("ClientConnectorError", "ServerDisconnectedError", "ClientOSError", "ClientPayloadError")
    if name in transient_names or "Connection reset" in text or "Server disconnected" in text:
        return True
    return any(token in text for token in (" 500", " 502", " 503", " 504", "ServiceUnavailable", "SlowDown"))


def with_retries(fn: Callable[[], T], what: str, attempts: int = MAX_ATTEMPTS) -> T:
    """Calls `fn`, retrying transient failures with jittered exponential backoff."""
    delay = 0.05
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            logger.debug("retrying %s after %s (attempt %d)", what, exc, attempt)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")
