"""`backend_for(path)`: the one place that maps a path's protocol to its storage backend.

    /data/x, file:///data/x   -> LocalBackend      (marin.storage.local)
    gs://bucket/x             -> GcsBackend        (marin.storage.gcs, JSON API)
    s3://bucket/x             -> S3Backend         (marin.storage.s3, botocore)
    anything else             -> FsspecBackend     (plain fsspec, no leases)

Backends import only `interface`, `streams`, `paths`, `retry` and `object_listing`, never the modules
built on them (`files`, `conditional`, `staging`, `manifest`), so the package has no import cycle.
"""

from __future__ import annotations

import functools

from marin.storage.interface import Backend
from marin.storage.paths import LOCAL_PROTOCOLS, protocol_of


@functools.lru_cache(maxsize=32)
def _backend(protocol: str) -> Backend:
    if protocol in LOCAL_PROTOCOLS:
        from marin.storage.local import LocalBackend

        return LocalBackend()
    if protocol in ("gs", "gcs"):
        from marin.storage.gcs import GcsBackend

        return GcsBackend()
    if protocol in ("s3", "s3a"):
        from marin.storage.s3 import S3Backend

        return S3Backend()
    from marin.storage.fsspec_store import FsspecBackend

    return FsspecBackend(protocol)


def backend_for(path: str) -> Backend:
    """The backend that serves `path` (one instance per protocol)."""
    return _backend(protocol_of(path))


def reset_clients() -> None:
    """Forgets cached storage clients, so that changed endpoint variables take effect."""
    from marin.storage import s3

    s3.reset_clients()
