"""Path arithmetic that works for local paths and URLs alike (`/a/b`, `file:///a/b`, `gs://bucket/a`)."""

from __future__ import annotations

import functools
import os

LOCAL_PROTOCOLS = ("", "file", "local")


def protocol_of(path: str) -> str:
    """The URL scheme of a path, '' for a plain local path."""
    head, sep, _ = path.partition("://")
    return head if sep else ""


def is_local(path: str) -> bool:
    return protocol_of(path) in LOCAL_PROTOCOLS


def strip_protocol(path: str) -> str:
    """A local path without `file://`; URLs other than file:// are returned unchanged."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return path


def join(base: str, *parts: str) -> str:
    """Joins with '/', never doubling slashes; keeps the scheme of `base`."""
    out = base.rstrip("/")
    for part in parts:
        if part:
            out = f"{out}/{part.strip('/')}"
    return out


def relative_to(path: str, base: str) -> str:
    """`path` relative to `base`; a ValueError names both when `path` is not under `base`."""
    base = base.rstrip("/")
    if path == base:
        return ""
    if not path.startswith(base + "/"):
        raise ValueError(f"path {path!r} is not under {base!r}")
    return path[len(base) + 1 :]


@functools.lru_cache(maxsize=64)
def _filesystem_for(protocol: str):
    import fsspec

    if protocol in LOCAL_PROTOCOLS:
        return fsspec.filesystem("file")
    kwargs = {}
    if protocol in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        kwargs = {"endpoint_url": os.environ["STORAGE_EMULATOR_HOST"], "token": "anon"}
    if protocol == "s3" and os.environ.get("AWS_ENDPOINT_URL"):
        kwargs = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    return fsspec.filesystem(protocol, **kwargs)


def filesystem(path: str):
    """The fsspec filesystem for `path` (cached per protocol)."""
    return _filesystem_for(protocol_of(path))
