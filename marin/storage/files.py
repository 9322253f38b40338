"""The file API every module uses: whole small objects, streams for big ones, listing and deletion.

Each call goes to the backend of its path (`backend_for`, marin.storage.backends): a local folder,
GCS or S3 on their raw APIs (one request per small operation, our own quick retries), or plain fsspec.
Writes are atomic everywhere: a temporary file and a rename locally, one upload or a finished
multipart/resumable upload on a bucket, so a reader never sees half an object. Missing files read as
`None` where that is the common case (status files), never as an exception the caller must catch.

Objects of any size go through `open_write` / `open_read` (or `put_file` / `get_file` for a local
file): parts of MARIN_STORAGE_PART_BYTES up, ranges of MARIN_STORAGE_READ_BYTES down, never the whole
object in memory (marin.storage.streams).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import IO

from marin.storage.backends import backend_for
from marin.storage.conditional import create_if_absent, read_with_version, replace_if_unchanged
from marin.storage.paths import filesystem, is_local, join, protocol_of, strip_protocol
from marin.storage.retry import with_retries

REMOTE_PARALLELISM = 64
FSYNC = os.environ.get("MARIN_FSYNC", "1") != "0"
"""On local storage, a step's outputs, its manifest and their folders are fsynced before SUCCESS is written
(marin.storage.staging), so SUCCESS survives power loss, not only process crashes. MARIN_FSYNC=0 turns it off."""
COPY_BUFFER = 8 << 20


def read_bytes(path: str) -> bytes | None:
    """The content of `path`, or None when it does not exist."""
    return backend_for(path).read(path)


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
    """Publishes `data` at `path` atomically, creating parent folders (in parts when large)."""
    backend_for(path).write(path, data)


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


class _TextWriter(io.TextIOWrapper):
    """Text over an atomic binary writer: leaving the `with` block by an exception publishes nothing."""

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            return super().__exit__(exc_type, exc, tb)
        self.detach().discard()
        return None


def open_read(path: str, mode: str = "rb") -> IO:
    """A stream over `path` ('rb' or 'r'); ranged reads on buckets. FileNotFoundError when absent."""
    if mode not in ("rb", "r"):
        raise ValueError(f"open_read mode must be 'rb' or 'r', got {mode!r} ({path})")
    stream = backend_for(path).open_read(path)
    return stream if mode == "rb" else io.TextIOWrapper(stream, encoding="utf-8")


def read_range(path: str, offset: int, size: int) -> bytes:
    """Exactly `size` bytes of `path` from `offset` (one ranged read on a bucket); OSError when shorter."""
    if size == 0:
        return b""
    with open_read(path) as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) != size:
        raise OSError(f"{path}: expected {size} bytes at offset {offset}, got {len(data)}")
    return data


def open_write(path: str, mode: str = "wb", part_bytes: int | None = None) -> IO:
    """A stream ('wb' or 'w') whose content appears at `path` only once closed without error.

    Use it as a context manager: an exception inside the block discards everything written (the
    previous object, if any, stays). On GCS/S3 the bytes go up in parts of `part_bytes` (default
    MARIN_STORAGE_PART_BYTES, 64 MiB) while you write; locally into a temporary file, renamed on close.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"open_write mode must be 'wb' or 'w', got {mode!r} ({path})")
    stream = backend_for(path).open_write(path, part_bytes)
    return stream if mode == "wb" else _TextWriter(stream, encoding="utf-8")


def put_file(local: str, path: str, part_bytes: int | None = None) -> None:
    """Uploads the local file `local` to `path`, streamed in parts (atomic, like `open_write`)."""
    with open(strip_protocol(local), "rb") as src, open_write(path, part_bytes=part_bytes) as dst:
        shutil.copyfileobj(src, dst, COPY_BUFFER)


def put_folder(local: str, path: str) -> list[str]:
    """Uploads every file below the local folder `local` to the same relative path under `path`, each one
    published like `put_file` (for libraries that can only write into a local folder); returns the relative
    paths, sorted."""
    root = strip_protocol(local)
    rels = sorted(
        os.path.relpath(os.path.join(folder, name), root) for folder, _, names in os.walk(root) for name in names
    )
    for rel in rels:
        put_file(os.path.join(root, rel), join(path, rel.replace(os.sep, "/")))
    return rels


def get_file(path: str, local: str) -> None:
    """Downloads `path` into the local file `local`, streamed (atomic: a temporary file, then a rename)."""
    with open_read(path) as src, open_write(strip_protocol(local)) as dst:
        shutil.copyfileobj(src, dst, COPY_BUFFER)


def copy(source: str, target: str) -> None:
    """Copies an object of any size: on the server when both are on one store, else streamed through."""
    if protocol_of(source) == protocol_of(target) or (is_local(source) and is_local(target)):
        if not backend_for(source).copy(source, target):
            raise FileNotFoundError(source)
        return
    with open_read(source) as src, open_write(target) as dst:
        shutil.copyfileobj(src, dst, COPY_BUFFER)


def size(path: str) -> int | None:
    """The size of the object `path` in bytes, None when it does not exist."""
    return backend_for(path).size(path)


_MODIFIED_KEYS = ("mtime", "updated", "LastModified", "last_modified", "timeCreated", "created")


def modified_time(path: str) -> datetime | None:
    """When the object `path` was last written, on the storage's own clock (UTC); None when it does not exist.

    A local file's mtime, a GCS object's `updated`, an S3 object's `LastModified`: the time the storage
    itself stamped, so two hosts' clocks never enter a comparison of two such times."""
    if is_local(path):
        try:
            return datetime.fromtimestamp(os.stat(strip_protocol(path)).st_mtime, tz=UTC)
        except (FileNotFoundError, NotADirectoryError):
            return None
    fs = filesystem(path)

    def _info():
        try:
            return fs.info(path)
        except FileNotFoundError:
            return None

    info = with_retries(_info, what=f"info {path}")
    if info is None or info.get("type") == "directory":
        return None
    for key in _MODIFIED_KEYS:
        value = info.get(key)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, tz=UTC)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, str):
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
    raise OSError(f"{path}: the storage reports no modification time (info keys: {', '.join(sorted(info))})")


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
        fd = os.open(local, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
        return
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
    return backend_for(path).exists(path)


def makedirs(path: str) -> None:
    """Creates a folder locally; a no-op on buckets, which have no folders."""
    if is_local(path):
        os.makedirs(strip_protocol(path), exist_ok=True)


def list_dir(path: str) -> list[str]:
    """Names (not paths) of the entries directly under `path`; [] when it does not exist."""
    return backend_for(path).list_names(path)


def delete(path: str, recursive: bool = False) -> None:
    """Deletes a file (or a folder with recursive=True); missing paths are fine."""
    backend_for(path).delete(path, recursive=recursive)
