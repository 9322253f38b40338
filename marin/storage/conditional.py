"""Conditional writes: the primitives under leases (docs/design.md, "Status and leases").

`create_if_absent` succeeds for exactly one of many concurrent callers. `replace_if_unchanged` and
`delete_if_unchanged` succeed only if the object still has the version the caller read, so a runner
that lost its lease finds out at its next write instead of overwriting the new owner's. Versions are
opaque strings: locally inode, mtime and size (a compare-and-swap under a folder lock); on GCS the
object generation (`ifGenerationMatch`); on S3 the ETag (`If-Match` / `If-None-Match: *`). Each
backend implements them (marin.storage.local, .gcs, .s3); other protocols raise NotImplementedError.

Locally they write through temporary files, which a writer killed mid-write leaves behind;
`remove_orphaned_temps` removes those whose writer is provably dead (marin.storage.local). Buckets
compare on the server and leave no such files.
"""

from __future__ import annotations

from marin.storage.backends import backend_for
from marin.storage.interface import VersionedBytes
from marin.storage.paths import is_local

__all__ = [
    "VersionedBytes",
    "create_if_absent",
    "current_version",
    "delete_if_unchanged",
    "read_with_version",
    "remove_orphaned_temps",
    "replace_if_unchanged",
]


def read_with_version(path: str) -> VersionedBytes | None:
    """The content of `path` and its version token, or None when absent."""
    return backend_for(path).read_with_version(path)


def create_if_absent(path: str, data: bytes) -> str | None:
    """Writes `data` only if `path` does not exist; the new version, or None if it existed."""
    return backend_for(path).create_if_absent(path, data)


def replace_if_unchanged(path: str, data: bytes, version: str) -> str | None:
    """Overwrites `path` only if it still has `version`; the new version, or None."""
    return backend_for(path).replace_if_unchanged(path, data, version)


def current_version(path: str) -> str | None:
    """The version token `path` has now, or None when absent (a read, no write)."""
    return backend_for(path).current_version(path)


def delete_if_unchanged(path: str, version: str) -> bool:
    """Deletes `path` only if it still has `version`; True when deleted."""
    return backend_for(path).delete_if_unchanged(path, version)


def remove_orphaned_temps(folder: str) -> int:
    """Removes the temporary files of dead writers in a local `folder` (how many); 0 on a bucket."""
    if not is_local(folder):
        return 0
    from marin.storage.local import remove_orphaned_temps as remove_local

    return remove_local(folder)
