"""Any other fsspec URL (memory://, hf://, http:// for reads, ...): plain operations through fsspec.

No conditional writes (so no leases: the executor's prefix must be local, gs:// or s3://), and a write
is only as atomic as that filesystem makes it. Retries use marin's backoff around fsspec's calls.
"""

from __future__ import annotations

from typing import BinaryIO

from marin.storage.interface import Backend
from marin.storage.paths import filesystem, protocol_of
from marin.storage.retry import with_retries


class FsspecBackend(Backend):
    def __init__(self, protocol: str):
        self.name = protocol

    def read(self, path: str) -> bytes | None:
        fs = filesystem(path)

        def _read():
            try:
                return fs.cat_file(path)
            except FileNotFoundError:
                return None

        return with_retries(_read, what=f"read {path}")

    def read_range(self, path: str, start: int, end: int) -> bytes:
        fs = filesystem(path)
        return with_retries(lambda: fs.cat_file(path, start=start, end=end), what=f"read {path}")

    def write(self, path: str, data: bytes) -> None:
        fs = filesystem(path)
        with_retries(lambda: fs.pipe_file(path, data), what=f"write {path}")

    def exists(self, path: str) -> bool:
        fs = filesystem(path)
        return with_retries(lambda: fs.exists(path), what=f"exists {path}")

    def size(self, path: str) -> int | None:
        fs = filesystem(path)
        try:
            return int(fs.size(path))
        except FileNotFoundError:
            return None

    def list_names(self, path: str) -> list[str]:
        fs = filesystem(path)

        def _ls():
            try:
                entries = fs.ls(path, detail=False, refresh=True)
            except FileNotFoundError:
                return []
            return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries})

        return with_retries(_ls, what=f"list {path}")

    def list_files(self, path: str) -> list[tuple[str, int]]:
        fs = filesystem(path)
        bare = fs._strip_protocol(path.rstrip("/"))
        try:
            found = fs.find(path.rstrip("/"), detail=True)
        except FileNotFoundError:
            return []
        return sorted(
            (full[len(bare) + 1 :], int(info.get("size") or 0))
            for full, info in found.items()
            if full.startswith(bare + "/")
        )

    def delete(self, path: str, recursive: bool = False) -> None:
        fs = filesystem(path)

        def _rm():
            try:
                fs.rm(path, recursive=recursive)
            except FileNotFoundError:
                pass

        with_retries(_rm, what=f"delete {path}")

    def open_read(self, path: str) -> BinaryIO:
        return filesystem(path).open(path, "rb")

    def open_write(self, path: str, part_bytes: int | None = None) -> BinaryIO:
        return filesystem(path).open(path, "wb")

    def copy(self, source: str, target: str) -> bool:
        fs = filesystem(source)
        if protocol_of(source) != protocol_of(target):
            raise ValueError(f"a server-side copy needs one storage: {source} -> {target}")
        try:
            fs.copy(source, target)
        except FileNotFoundError:
            return False
        return True
