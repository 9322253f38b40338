"""Write a file as a stream and publish it whole; read byte ranges; append documents to a gzipped shard.

Steps that write large outputs must not build them in memory first. `open_output(path)` hands out a
binary file to write into: locally a temporary file beside `path`, renamed over it on success; on a
bucket fsspec's own upload (resumable on GCS, multipart on S3), which makes the object visible only
when it is closed, and is discarded if the block raises. Either way a reader sees the whole file or
none of it. `DocumentStream` writes documents with `encode_documents`' exact bytes (same gzip header,
level and JSON), one at a time.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO

import fsspec

from marin.processing.documents import DOC_KEYS
from marin.storage import is_local, strip_protocol


@contextlib.contextmanager
def open_output(path: str) -> Iterator[IO[bytes]]:
    """A binary file whose content is published at `path` when the block exits without an exception."""
    if is_local(path):
        local = strip_protocol(path)
        parent = os.path.dirname(local) or "."
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".tmp-", suffix="." + os.path.basename(local))
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as f:
                yield f
            os.replace(tmp, local)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    f = fsspec.open(path, "wb").open()
    try:
        yield f
    except BaseException:
        discard = getattr(f, "discard", None)
        if discard is not None:
            discard()
        raise
    f.close()


def read_range(path: str, offset: int, size: int) -> bytes:
    """`size` bytes of `path` from `offset` (a ranged read on a bucket)."""
    if size == 0:
        return b""
    opener = open(strip_protocol(path), "rb") if is_local(path) else fsspec.open(path, "rb").open()
    with opener as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) != size:
        raise OSError(f"{path}: expected {size} bytes at offset {offset}, got {len(data)}")
    return data


class DocumentStream:
    """Documents appended to an open binary file as gzipped JSON lines, byte-identical to encode_documents."""

    def __init__(self, raw: IO[bytes]):
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
        self.count = 0

    def write(self, doc: dict) -> None:
        ordered = {k: doc[k] for k in DOC_KEYS if k in doc}
        ordered.update({k: v for k, v in doc.items() if k not in ordered})
        self._gz.write(json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        self.count += 1

    def close(self) -> None:
        self._gz.close()
