"""Conditional writes: the primitives under leases (DESIGN.md §6).

`create_if_absent` succeeds for exactly one of many concurrent callers. `replace_if_unchanged` and
`delete_if_unchanged` succeed only if the object still has the version the caller read, so a runner
that lost its lease finds out at its next write instead of overwriting the new owner's. Versions are
opaque strings: locally inode, mtime and size (a compare-and-swap under a folder lock); on GCS the
object generation (`ifGenerationMatch`); on S3 the ETag (`If-Match` / `If-None-Match: *`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from dataclasses import dataclass

from marin.storage.paths import is_local, protocol_of, strip_protocol


@dataclass(frozen=True)
class VersionedBytes:
    data: bytes
    """The object's content."""
    version: str
    """Opaque token naming this exact version of the object."""


def read_with_version(path: str) -> VersionedBytes | None:
    """The content of `path` and its version token, or None when absent."""
    if is_local(path):
        return _local_read(strip_protocol(path))
    return _remote_backend(path).read_with_version(path)


def create_if_absent(path: str, data: bytes) -> str | None:
    """Writes `data` only if `path` does not exist; the new version, or None if it existed."""
    if is_local(path):
        return _local_create(strip_protocol(path), data)
    return _remote_backend(path).create_if_absent(path, data)


def replace_if_unchanged(path: str, data: bytes, version: str) -> str | None:
    """Overwrites `path` only if it still has `version`; the new version, or None."""
    if is_local(path):
        return _local_replace(strip_protocol(path), data, version)
    return _remote_backend(path).replace_if_unchanged(path, data, version)


def current_version(path: str) -> str | None:
    """The version token `path` has now, or None when absent (a read, no write)."""
    if is_local(path):
        return _current_token(strip_protocol(path))
    found = read_with_version(path)
    return None if found is None else found.version


def delete_if_unchanged(path: str, version: str) -> bool:
    """Deletes `path` only if it still has `version`; True when deleted."""
    if is_local(path):
        return _local_delete(strip_protocol(path), version)
    return _remote_backend(path).delete_if_unchanged(path, version)


def _remote_backend(path: str):
    protocol = protocol_of(path)
    if protocol in ("gs", "gcs"):
        from marin.storage import gcs_conditional

        return gcs_conditional
    if protocol in ("s3", "s3a"):
        from marin.storage import s3_conditional

        return s3_conditional
    raise NotImplementedError(
        f"conditional writes (leases) are not supported on {protocol}:// ({path}); use a local path, gs:// or s3://"
    )


def _token(st: os.stat_result) -> str:
    return f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"


def _local_read(path: str) -> VersionedBytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        return VersionedBytes(f.read(), _token(st))


def _write_temp(folder: str, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-cond-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return tmp


def _local_create(path: str, data: bytes) -> str | None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    if not data:  # nothing to expose half-written: one exclusive create
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return None
        return _current_token(path)
    tmp = _write_temp(folder, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return None
    else:
        return _token(os.stat(tmp))
    finally:
        os.unlink(tmp)


@contextlib.contextmanager
def _folder_lock(path: str):
    folder = os.path.dirname(path) or "."
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _current_token(path: str) -> str | None:
    try:
        return _token(os.stat(path))
    except FileNotFoundError:
        return None


def _local_replace(path: str, data: bytes, version: str) -> str | None:
    with _folder_lock(path):
        if _current_token(path) != version:
            return None
        tmp = _write_temp(os.path.dirname(path) or ".", data)
        os.replace(tmp, path)
        return _token(os.stat(path))


def _local_delete(path: str, version: str) -> bool:
    with _folder_lock(path):
        if _current_token(path) != version:
            return False
        os.unlink(path)
        return True
