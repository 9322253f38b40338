"""The one interface every storage backend implements (local folder, GCS, S3, any other fsspec URL).

`marin.storage`'s public functions pick a backend with `backend_for(path)` (marin.storage.backends) and
call it; nothing above this layer branches on the protocol. A backend promises:

- plain reads and writes of small objects in one request each (`read`, `write`), listings, deletion;
- streams for objects of any size (`open_read`, `open_write`): reads come in ranges, writes go up in
  parts (GCS resumable upload, S3 multipart upload, a temporary file locally) and the object appears
  only when the stream is closed without error; a writer that is abandoned or killed leaves nothing a
  reader or a manifest takes for the object (see docs/buckets.md, "What a crash leaves behind");
- a server-side `copy` that works for objects of any size (the bytes do not pass through this host);
- the conditional writes of the lease protocol (docs/design.md, "Status and leases"): create only if absent, replace or delete
  only if unchanged since read, against an opaque version token.

Backends are stateless apart from cached clients; `marin.storage.streams` holds the part-size knobs and
the buffered stream classes the bucket backends share.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class VersionedBytes:
    data: bytes
    """The object's content."""
    version: str
    """Opaque token naming this exact version of the object."""


class Backend(abc.ABC):
    """Storage operations on one kind of path; every method takes full paths (`gs://b/k`, `/a/b`)."""

    name: str
    """Short name for messages: 'local', 'gcs', 's3' or the fsspec protocol."""

    # plain reads and writes -------------------------------------------------------------------------

    @abc.abstractmethod
    def read(self, path: str) -> bytes | None:
        """The whole content of `path` (meant for small objects), or None when it does not exist."""

    @abc.abstractmethod
    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of `path`; FileNotFoundError when it does not exist."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Publishes `data` at `path` atomically (large data goes up in parts, like `open_write`)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """True for an object or a non-empty folder."""

    @abc.abstractmethod
    def size(self, path: str) -> int | None:
        """The size in bytes of the object `path`, None when absent."""

    @abc.abstractmethod
    def list_names(self, path: str) -> list[str]:
        """Names (not paths) of the entries directly under the folder `path`, sorted; [] when absent."""

    @abc.abstractmethod
    def list_files(self, path: str) -> list[tuple[str, int]]:
        """(path relative to `path`, size) of every file below the folder `path`."""

    @abc.abstractmethod
    def delete(self, path: str, recursive: bool = False) -> None:
        """Deletes a file (or everything below a folder with recursive=True); missing paths are fine."""

    # streams ----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def open_read(self, path: str) -> BinaryIO:
        """A seekable binary stream over `path` (ranged reads on buckets); FileNotFoundError when absent."""

    @abc.abstractmethod
    def open_write(self, path: str, part_bytes: int | None = None) -> BinaryIO:
        """A binary stream whose bytes appear at `path` only when it is closed without error.

        Used as a context manager: leaving the block with an exception discards what was written, and so
        does dropping the stream without closing it. `part_bytes` overrides MARIN_STORAGE_PART_BYTES.
        """

    # server-side copy -------------------------------------------------------------------------------

    @abc.abstractmethod
    def copy(self, source: str, target: str) -> bool:
        """Copies `source` to `target` on the server, any size; False when `source` does not exist."""

    # conditional writes (leases) --------------------------------------------------------------------

    def list_versions(self, path: str) -> list[tuple[str, str]]:
        """(path relative to `path`, version token) of every object below the folder `path`."""
        raise self._no_conditional(path)

    def read_with_version(self, path: str) -> VersionedBytes | None:
        """The content of `path` and its version token, or None when absent."""
        raise self._no_conditional(path)

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        """Writes `data` only if `path` does not exist; the new version, or None if it existed."""
        raise self._no_conditional(path)

    def replace_if_unchanged(self, path: str, data: bytes, version: str) -> str | None:
        """Overwrites `path` only if it still has `version`; the new version, or None."""
        raise self._no_conditional(path)

    def delete_if_unchanged(self, path: str, version: str) -> bool:
        """Deletes `path` only if it still has `version`; True when deleted."""
        raise self._no_conditional(path)

    def current_version(self, path: str) -> str | None:
        """The version token `path` has now, or None when absent (a read, no write)."""
        found = self.read_with_version(path)
        return None if found is None else found.version

    def _no_conditional(self, path: str) -> NotImplementedError:
        return NotImplementedError(
            f"conditional writes (leases) are not supported on {self.name}:// ({path}); "
            "use a local path, gs:// or s3://"
        )
