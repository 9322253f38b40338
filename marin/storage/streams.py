"""Streams over bucket objects of any size: writes go up in parts, reads come down in ranges.

A 40 GB tokenized shard or checkpoint must not pass through memory whole, and one request cannot
carry it either (S3 caps a single PUT at 5 GiB and a single CopyObject at 5 GiB). So:

- `PartWriter` buffers at most one part (`MARIN_STORAGE_PART_BYTES`, default 64 MiB). An object that
  fits in one part goes up in one request, as before; a larger one opens an upload session (a GCS
  resumable upload, an S3 multipart upload) on its first full part and finishes it on `close()`. Until
  then the object does not exist for any reader or listing: leaving the `with` block by an exception,
  dropping the stream unclosed, or a kill -9 of the process leaves the previous object (or none).
- `RangeReader` reads `MARIN_STORAGE_READ_BYTES` (default 8 MiB) per ranged GET, each retried on its
  own, pinned to the version it first saw: if the object is replaced meanwhile, the read fails with
  `ObjectChanged` instead of mixing two versions.
- server-side copies of objects above `MARIN_STORAGE_COPY_PART_BYTES` (default 512 MiB) go in parts
  of that size (S3 UploadPartCopy, GCS rewrite calls).

The knobs are read when a stream is opened, so tests lower them to run the multi-part paths on the
emulators with objects of a few MiB.
"""

from __future__ import annotations

import io
import os

MiB = 1 << 20
PART_BYTES_ENV = "MARIN_STORAGE_PART_BYTES"
READ_BYTES_ENV = "MARIN_STORAGE_READ_BYTES"
COPY_PART_BYTES_ENV = "MARIN_STORAGE_COPY_PART_BYTES"
DEFAULT_PART_BYTES = 64 * MiB
DEFAULT_READ_BYTES = 8 * MiB
DEFAULT_COPY_PART_BYTES = 512 * MiB


def _env_bytes(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of bytes, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def part_bytes(override: int | None = None) -> int:
    """Upload part size: `override`, else MARIN_STORAGE_PART_BYTES, else 64 MiB."""
    if override is not None:
        if override <= 0:
            raise ValueError(f"part_bytes must be positive, got {override}")
        return override
    return _env_bytes(PART_BYTES_ENV, DEFAULT_PART_BYTES)


def read_bytes_per_request() -> int:
    """Bytes per ranged read: MARIN_STORAGE_READ_BYTES, else 8 MiB."""
    return _env_bytes(READ_BYTES_ENV, DEFAULT_READ_BYTES)


def copy_part_bytes() -> int:
    """Part size of server-side copies: MARIN_STORAGE_COPY_PART_BYTES, else 512 MiB."""
    return _env_bytes(COPY_PART_BYTES_ENV, DEFAULT_COPY_PART_BYTES)


class ObjectChanged(OSError):
    """The object was replaced or deleted while a stream was reading it."""


class PartWriter(io.BufferedIOBase):
    """A write stream that publishes its object on `close()` and never before.

    Subclasses implement four requests (each gets a bytes-like object: a bytearray or a memoryview):
    `_put_whole` (an object of at most one part, one request),
    `_start` (open an upload session), `_send_part` (one full part) and `_finish` (the last part, which
    commits the object), plus `_abort` (best effort: the session is invisible either way).
    """

    def __init__(self, path: str, part_size: int):
        super().__init__()
        self.path = path
        self.part_size = part_size
        self._buf = bytearray()
        self._offset = 0
        self._started = False
        self._parts = 0

    # the four requests ------------------------------------------------------------------------------

    def _put_whole(self, data: bytes) -> None:
        raise NotImplementedError

    def _start(self) -> None:
        raise NotImplementedError

    def _send_part(self, number: int, offset: int, data: bytes) -> None:
        raise NotImplementedError

    def _finish(self, number: int, offset: int, data: bytes) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        raise NotImplementedError

    # io -----------------------------------------------------------------------------------------------

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._offset + len(self._buf)

    def _send(self, data) -> None:
        """Sends one full part (a bytearray or a memoryview slice: no copy is made here)."""
        if not self._started:
            self._start()
            self._started = True
        self._parts += 1
        self._send_part(self._parts, self._offset, data)
        self._offset += len(data)

    def write(self, b) -> int:
        if self.closed:
            raise ValueError(f"write to a closed stream ({self.path})")
        view = memoryview(b).cast("B")
        n = len(view)
        # A part is sent only when more bytes follow it, so the last part (sent by close) is never empty.
        if self._buf and len(self._buf) + len(view) > self.part_size:
            take = self.part_size - len(self._buf)
            self._buf += view[:take]
            view = view[take:]
            full, self._buf = self._buf, bytearray()  # a fresh buffer: the client may still hold the old one
            self._send(full)
            del full
        while len(view) > self.part_size:
            self._send(view[: self.part_size])
            view = view[self.part_size :]
        self._buf += view
        return n

    def close(self) -> None:
        """Publishes the object (the last part commits it); on failure the upload is abandoned."""
        if self.closed:
            return
        try:
            if self._started:
                self._finish(self._parts + 1, self._offset, self._buf)
            else:
                self._put_whole(self._buf)
        except BaseException:
            self._discard_session()
            raise
        finally:
            self._buf = bytearray()
            super().close()

    def discard(self) -> None:
        """Closes without publishing: the object keeps its previous content (or stays absent)."""
        if self.closed:
            return
        self._buf = bytearray()
        self._discard_session()
        super().close()

    def _discard_session(self) -> None:
        if self._started:
            try:
                self._abort()
            except Exception:  # the session is invisible to readers and expires on its own
                pass
            self._started = False

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        # io.IOBase would close (publish) a stream dropped unclosed; an unfinished write must not appear
        if "_buf" in self.__dict__ and not self.closed:
            self.discard()


class RangeReader(io.RawIOBase):
    """A seekable read stream over an object of known size, one ranged request per read."""

    def __init__(self, path: str, size: int, fetch, block: int):
        super().__init__()
        self.path = path
        self.size = size
        self._fetch = fetch
        self._block = block
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position in {self.path}")
        self._pos = base + offset
        return self._pos

    def readinto(self, b) -> int:
        if self._pos >= self.size:
            return 0
        end = min(self.size, self._pos + len(b))
        data = self._fetch(self._pos, end)
        if len(data) != end - self._pos:
            raise ObjectChanged(f"{self.path}: asked for bytes {self._pos}-{end}, got {len(data)} bytes")
        memoryview(b).cast("B")[: len(data)] = data
        self._pos = end
        return len(data)

    def readall(self) -> bytes:
        chunks = []
        while self._pos < self.size:
            end = min(self.size, self._pos + self._block)
            chunks.append(self._fetch(self._pos, end))
            self._pos = end
        return b"".join(chunks)


def buffered_reader(raw: RangeReader) -> io.BufferedReader:
    return io.BufferedReader(raw, buffer_size=raw._block)
