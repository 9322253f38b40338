"""Storage: the few operations the executor and the steps need, over fsspec.

Everything marin writes goes through these functions so that a local folder, a GCS bucket and an S3
bucket behave alike. Besides plain reads and writes, the lease protocol (DESIGN.md §6) needs two
conditional writes that every backend implements natively: *create only if absent* and *replace only
if unchanged since I read it* (a version token: an inode and mtime locally, a generation on GCS, an
ETag on S3). The backend-specific parts live in `conditional.py`; this package re-exports the API.
"""

from marin.storage.conditional import (
    VersionedBytes,
    create_if_absent,
    current_version,
    delete_if_unchanged,
    read_with_version,
    replace_if_unchanged,
)
from marin.storage.files import (
    append_line,
    delete,
    exists,
    list_dir,
    makedirs,
    read_bytes,
    read_bytes_many,
    read_text,
    upload_file,
    write_bytes,
    write_text,
)
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

__all__ = [
    "VOLATILE_LIST",
    "portable_path",
    "open_url",
    "url_to_fs",
    "write_volatile_list",
    "VersionedBytes",
    "append_line",
    "compute_manifest",
    "create_if_absent",
    "current_version",
    "delete",
    "delete_if_unchanged",
    "exists",
    "filesystem",
    "is_local",
    "join",
    "list_dir",
    "makedirs",
    "protocol_of",
    "read_bytes",
    "read_bytes_many",
    "read_text",
    "read_with_version",
    "relative_to",
    "replace_if_unchanged",
    "strip_protocol",
    "upload_file",
    "write_bytes",
    "write_text",
]
