"""Storage: the few operations the executor and the steps need, on a local folder, GCS or S3.

Everything marin writes goes through these functions so that a local folder, a GCS bucket and an S3
bucket behave alike. Each path is served by one backend (`backend_for(path)`: marin.storage.local,
.gcs, .s3, or plain fsspec for other URLs), all implementing one interface (marin.storage.interface):
small reads and writes, streams for objects of any size (`open_read`, `open_write`, `put_file`,
`get_file`: ranged reads, resumable/multipart uploads, published only when complete), server-side
copies, and the two conditional writes the lease protocol needs (docs/design.md, "Status and leases"): *create only if
absent* and *replace only if unchanged since I read it* (a version token: an inode and mtime locally,
a generation on GCS, an ETag on S3). docs/buckets.md describes the backends and the knobs.
"""

from marin.storage.backends import backend_for
from marin.storage.conditional import (
    VersionedBytes,
    create_if_absent,
    current_version,
    delete_if_unchanged,
    read_with_version,
    remove_orphaned_temps,
    replace_if_unchanged,
)
from marin.storage.files import (
    append_line,
    copy,
    delete,
    exists,
    get_file,
    list_dir,
    makedirs,
    modified_time,
    open_read,
    open_write,
    put_file,
    put_folder,
    read_bytes,
    read_bytes_many,
    read_range,
    read_text,
    size,
    write_bytes,
    write_text,
)
from marin.storage.interface import Backend
from marin.storage.manifest import VOLATILE_LIST, compute_manifest, write_volatile_list
from marin.storage.paths import (
    filesystem,
    is_local,
    join,
    open_url,
    portable_path,
    protocol_of,
    relative_to,
    strip_protocol,
    url_to_fs,
)
from marin.storage.streams import ObjectChanged

__all__ = [
    "VOLATILE_LIST",
    "Backend",
    "ObjectChanged",
    "VersionedBytes",
    "append_line",
    "backend_for",
    "compute_manifest",
    "copy",
    "create_if_absent",
    "current_version",
    "delete",
    "delete_if_unchanged",
    "exists",
    "filesystem",
    "get_file",
    "is_local",
    "join",
    "list_dir",
    "makedirs",
    "modified_time",
    "open_read",
    "open_url",
    "open_write",
    "portable_path",
    "protocol_of",
    "put_file",
    "put_folder",
    "read_bytes",
    "read_bytes_many",
    "read_range",
    "read_text",
    "read_with_version",
    "relative_to",
    "remove_orphaned_temps",
    "replace_if_unchanged",
    "size",
    "strip_protocol",
    "url_to_fs",
    "write_bytes",
    "write_text",
    "write_volatile_list",
]
