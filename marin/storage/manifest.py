"""The manifest of a step's output: every file with its size and sha256, streamed and in parallel.

On gs:// and s3:// one listing request gives every size, and each object is hashed from a ranged
stream (`open_read`: MARIN_STORAGE_READ_BYTES per request, 8 MiB by default), so an object of any size
is hashed in bounded memory. A stream is pinned to the version it first saw: an object replaced while
being hashed fails the manifest instead of giving a hash of two versions mixed.

It is written before SUCCESS, so that `marin verify` can compare two runs file by file and anyone can
check that a folder still holds what was published.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

from marin.storage.backends import backend_for
from marin.storage.layout import EXECUTOR_FILE_PREFIX
from marin.storage.layout import is_bookkeeping as _is_bookkeeping
from marin.storage.paths import is_local, strip_protocol

CHUNK = 1 << 20


def _sha256_stream(f) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    while chunk := f.read(8 * CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _sha256_local(path: str) -> tuple[int, str]:
    with open(path, "rb") as f:
        return _sha256_stream(f)


def _sha256_object(path: str, size: int) -> tuple[int, str]:
    """Hash of a bucket object: one request when small, a ranged stream when large."""
    backend = backend_for(path)
    if size <= 8 * CHUNK:
        data = backend.read(path)
        if data is None:
            raise FileNotFoundError(f"{path} vanished while its manifest was computed")
        return len(data), hashlib.sha256(data).hexdigest()
    try:
        with backend.open_read(path) as f:
            return _sha256_stream(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} vanished while its manifest was computed") from None


def _list_local(root: str) -> list[str]:
    """Relative paths of every file under a local root, except the executor's own bookkeeping and writes in
    progress (`is_bookkeeping`, as on a bucket; a step's publication refuses `.tmp-*` names, see staging)."""
    rels: list[str] = []
    base = strip_protocol(root)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if not d.startswith((EXECUTOR_FILE_PREFIX, ".tmp-"))]
        for name in filenames:
            if name.startswith((EXECUTOR_FILE_PREFIX, ".tmp-")):
                continue
            if not os.path.isfile(os.path.join(dirpath, name)):
                continue  # a dangling symlink or a socket: nothing to hash
            rels.append(os.path.relpath(os.path.join(dirpath, name), base))
    return sorted(rels)


def compute_manifest(root: str, parallelism: int = 8) -> dict:
    """{"files": [{"path", "size", "sha256"}...], "total_size"} for every file under `root`."""
    if is_local(root):
        rels = _list_local(root)
        base = strip_protocol(root)

        def measure(rel: str):
            return _sha256_local(os.path.join(base, rel))

    else:
        object_sizes = {rel: size for rel, size in backend_for(root).list_files(root) if not _is_bookkeeping(rel)}
        rels = sorted(object_sizes)

        def measure(rel: str):
            return _sha256_object(f"{root.rstrip('/')}/{rel}", object_sizes[rel])

    if len(rels) <= 1:
        sizes = [measure(r) for r in rels]
    else:
        with ThreadPoolExecutor(max_workers=min(parallelism, len(rels))) as pool:
            sizes = list(pool.map(measure, rels))
    files = [{"path": rel, "size": size, "sha256": sha} for rel, (size, sha) in zip(rels, sizes, strict=True)]
    patterns = _volatile_patterns(root, rels)
    if patterns:
        for entry in files:
            if is_volatile(entry["path"], patterns):
                entry["volatile"] = True
    return {"files": files, "total_size": sum(f["size"] for f in files)}


VOLATILE_LIST = "volatile_files.txt"
"""A step may list, one glob per line, output files whose bytes legitimately vary between identical runs
(wall-clock timings, tracker logs). They stay in the manifest, flagged `"volatile": true`, and
`marin verify` does not compare their bytes. Everything else must be reproducible."""


def _volatile_patterns(root: str, rels: list[str]) -> list[str]:
    if VOLATILE_LIST not in rels:
        return []
    from marin.storage.files import read_text

    text = read_text(f"{root.rstrip('/')}/{VOLATILE_LIST}") or ""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def is_volatile(rel: str, patterns: list[str]) -> bool:
    """True when `rel` matches a pattern (fnmatch; 'dir/' or 'dir/**' covers a whole folder)."""
    import fnmatch

    for pattern in patterns:
        if pattern.endswith("/") and rel.startswith(pattern):
            return True
        if fnmatch.fnmatch(rel, pattern) or (pattern.endswith("/**") and rel.startswith(pattern[:-2])):
            return True
    return False


def write_volatile_list(output_path: str, patterns: list[str]) -> None:
    """Declares which of a step's output files may differ between identical runs (see VOLATILE_LIST)."""
    from marin.storage.files import write_text

    write_text(f"{output_path.rstrip('/')}/{VOLATILE_LIST}", "".join(p + "\n" for p in patterns))
