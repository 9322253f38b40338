"""Path arithmetic that works for local paths and URLs alike (`/a/b`, `file:///a/b`, `gs://bucket/a`)."""

from __future__ import annotations

import functools
import os

from marin.storage.layout import ATTEMPT_PREFIX

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


def endpoint_for(protocol: str) -> str | None:
    """The emulator or custom endpoint configured for a protocol (env, else fsspec's own config for that
    protocol, so that marin's raw clients and plain fsspec agree), None for the real service."""
    if protocol in ("gs", "gcs"):
        found = os.environ.get("STORAGE_EMULATOR_HOST")
    elif protocol in ("s3", "s3a"):
        found = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    else:
        return None
    if found:
        return found
    import fsspec.config

    conf = fsspec.config.conf.get("gcs" if protocol == "gs" else "s3" if protocol == "s3a" else protocol) or {}
    return conf.get("endpoint_url") or (conf.get("client_kwargs") or {}).get("endpoint_url") or None


@functools.lru_cache(maxsize=64)
def _filesystem_for(protocol: str, endpoint: str | None = None, pid: int = 0):
    import fsspec

    if protocol in LOCAL_PROTOCOLS:
        return fsspec.filesystem("file")
    # Listings are never cached: the executor polls status files that other runners change.
    kwargs: dict = {"use_listings_cache": False}
    if protocol in ("gs", "gcs") and endpoint:
        kwargs.update(endpoint_url=endpoint, token="anon")
    if protocol in ("s3", "s3a") and endpoint:
        kwargs.update(endpoint_url=endpoint)
    return fsspec.filesystem(protocol, **kwargs)


def filesystem(path: str):
    """The fsspec filesystem for `path`, cached per protocol, endpoint (env) and process."""
    protocol = protocol_of(path)
    return _filesystem_for(protocol, endpoint_for(protocol), os.getpid())


def url_to_fs(path: str):
    """fsspec's `(filesystem, path without protocol)` for any URL; fsspec is imported only when called."""
    from fsspec.core import url_to_fs as fsspec_url_to_fs

    return fsspec_url_to_fs(path)


def open_url(path: str, mode: str = "r"):
    """`fsspec.open(path, mode)` (a context manager), for steps that stream a file on any storage."""
    import fsspec

    return fsspec.open(path, mode)


def published_path(path: str) -> str:
    """A path inside a staging folder (marin.storage.staging) at the place it will be published:
    `<out>/<attempt folder>/rest` -> `<out>/rest`; any other path unchanged."""
    marker = f"/{ATTEMPT_PREFIX}"
    if marker not in path:
        return path
    head, _, tail = path.partition(marker)
    _, _, rest = tail.partition("/")
    return join(head, rest) if rest else head


def portable_path(path: str, output_path: str) -> str:
    """`path` as a step should write it into its outputs: relative to `output_path` when both live on
    the same storage (so the bytes do not depend on the prefix), unchanged otherwise (an external URL).
    Both are taken where they are published: a step writing into its attempt's staging folder records
    the paths its files will have in the final folder."""
    path, output_path = published_path(path), published_path(output_path)
    if protocol_of(path) != protocol_of(output_path):
        return path
    if not is_local(path):
        bucket = path.split("://", 1)[1].split("/", 1)[0]
        if bucket != output_path.split("://", 1)[1].split("/", 1)[0]:
            return path
        return os.path.relpath(path.split("://", 1)[1], output_path.split("://", 1)[1])
    return os.path.relpath(os.path.abspath(strip_protocol(path)), os.path.abspath(strip_protocol(output_path)))
