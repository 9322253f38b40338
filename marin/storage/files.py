"""Whole-object reads and writes, listing and deletion.

Local writes are published atomically (temporary file, fsync, rename), so a reader never sees half a
file; a bucket write is a single object upload, which is atomic by nature. Missing files read as
`None` where that is the common case (status files), never as an exception the caller must catch.
On gs:// and s3:// these go through the raw object clients (`gcs_conditional`, `s3_conditional`):
one request per operation and our own quick retries, instead of gcsfs's multi-second backoff.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from marin.storage.paths import filesystem, is_local, protocol_of, strip_protocol
from marin.storage.retry import with_retries

REMOTE_PARALLELISM = 64
FSYNC = os.environ.get("MARIN_FSYNC", "1") != "0"
"""On local storage, a step's outputs, its manifest and their folders are fsynced before SUCCESS is written
(marin.storage.staging), so SUCCESS survives power loss, not only process crashes. MARIN_FSYNC=0 turns it off."""


def _object_api(path: str):
    """The raw object module for gs:// and s3:// (one request per op, our retries), else None."""
    protocol = protocol_of(path)
    if protocol in ("gs", "gcs"):
        from marin.storage import gcs_conditional

        return gcs_conditional
    if protocol in ("s3", "s3a"):
        from marin.storage import s3_conditional

        return s3_conditional
    return None


def read_bytes(path: str) -> bytes | None:
    """The content of `path`, or None when it does not exist."""
    if is_local(path):
        try:
            with open(strip_protocol(path), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
    api = _object_api(path)
    if api is not None:
        return api.read_object(path)
    fs = filesystem(path)

    def _read():
        try:
            return fs.cat_file(path)
        except FileNotFoundError:
            return None

    return with_retries(_read, what=f"read {path}")


def read_text(path: str) -> str | None:
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8")


def read_bytes_many(paths: Iterable[str]) -> list[bytes | None]:
    """Reads many small objects: sequentially on local disk, concurrently on a bucket."""
    paths = list(paths)
    if not paths:
        return []
    if all(is_local(p) for p in paths):
        return [read_bytes(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(REMOTE_PARALLELISM, len(paths))) as pool:
        return list(pool.map(read_bytes, paths))


def write_bytes(path: str, data: bytes) -> None:
    """Publishes `data` at `path` atomically, creating parent folders."""
    if is_local(path):
        local = strip_protocol(path)
        parent = os.path.dirname(local) or "."
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".tmp-", suffix="." + os.path.basename(local))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, local)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    api = _object_api(path)
    if api is not None:
        api.write_object(path, data)
        return
    fs = filesystem(path)
    with_retries(lambda: fs.pipe_file(path, data), what=f"write {path}")


def upload_file(local_file: str, path: str) -> None:
    """Publishes the content of the local file `local_file` at `path` (as `write_bytes` does).

    Made for big files (a Levanter cache's chunk files); a backend may stream it in parts.
    """
    with open(local_file, "rb") as f:
        write_bytes(path, f.read())


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def append_line(path: str, line: str) -> None:
    """Appends one line (no newline inside) without rewriting what is there.

    Locally an O_APPEND write of one line is atomic between processes. Buckets have no append, so
    the object is rewritten with a precondition on the version read, retried on conflict: concurrent
    appenders never lose each other's lines. A conditional write whose answer was lost may still have
    landed, and another appender may have built on it before we look: so before each retry, an object
    that starts with exactly what we tried to write (the old bytes plus our line) means it did land.
    Only another appender adding the identical line at that very point could fool this check (run
    records carry a run id and a time, so they never are identical).
    """
    if "\n" in line:
        raise ValueError("append_line takes a single line")
    payload = (line + "\n").encode("utf-8")
    if is_local(path):
        local = strip_protocol(path)
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        fd = os.open(local, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
        return
    import random
    import time

    from marin.storage.conditional import create_if_absent, read_with_version, replace_if_unchanged

    attempted: bytes | None = None
    for attempt in range(200):
        current = read_with_version(path)
        if attempted is not None and current is not None and current.data.startswith(attempted):
            return
        if current is None:
            attempted = payload
            if create_if_absent(path, payload) is not None:
                return
        else:
            attempted = current.data + payload
            if replace_if_unchanged(path, attempted, current.version) is not None:
                return
        time.sleep(random.random() * min(0.01 * (attempt + 1), 0.2))
    raise RuntimeError(f"could not append to {path}: too many concurrent writers")


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(strip_protocol(path))
    api = _object_api(path)
    if api is not None:
        return api.object_exists(path) or bool(api.list_names(path))
    fs = filesystem(path)
    return with_retries(lambda: fs.exists(path), what=f"exists {path}")


def makedirs(path: str) -> None:
    """Creates a folder locally; a no-op on buckets, which have no folders."""
    if is_local(path):
        os.makedirs(strip_protocol(path), exist_ok=True)


def list_dir(path: str) -> list[str]:
    """Names (not paths) of the entries directly under `path`; [] when it does not exist."""
    if is_local(path):
        try:
            return sorted(os.listdir(strip_protocol(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []
    api = _object_api(path)
    if api is not None:
        return api.list_names(path)
    fs = filesystem(path)

    def _ls():
        try:
            entries = fs.ls(path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries})

    return with_retries(_ls, what=f"list {path}")


def delete(path: str, recursive: bool = False) -> None:
    """Deletes a file (or a folder with recursive=True); missing paths are fine."""
    if is_local(path):
        local = strip_protocol(path)
        if os.path.isdir(local) and recursive:
            import shutil

            shutil.rmtree(local, ignore_errors=True)
        elif os.path.lexists(local):
            os.unlink(local)
        return
    api = _object_api(path)
    if api is not None and not recursive:
        api.delete_object(path)
        return
    fs = filesystem(path)

    def _rm():
        try:
            fs.rm(path, recursive=recursive)
        except FileNotFoundError:
            pass

    with_retries(_rm, what=f"delete {path}")
