"""The manifest of a step's output: every file with its size and sha256, streamed and in parallel.

On gs:// and s3:// one listing request gives every size, a small file is hashed from one read and a
large one from 8 MiB ranged reads, all through the raw clients (fast retries, no gcsfs backoff).

It is written before SUCCESS, so that `marin verify` can compare two runs file by file and anyone can
check that a folder still holds what was published.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

from marin.storage.layout import EXECUTOR_FILE_PREFIX
from marin.storage.layout import is_bookkeeping as _is_bookkeeping
from marin.storage.paths import filesystem, is_local, strip_protocol

CHUNK = 1 << 20


def _sha256_local(path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _sha256_remote(fs, path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with fs.open(path, "rb", block_size=8 * CHUNK) as f:
        while chunk := f.read(8 * CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _sha256_object(api, path: str, size: int) -> tuple[int, str]:
    """Hash of a bucket object: one request when small, ranged reads of CHUNK * 8 when large."""
    if size <= 8 * CHUNK:
        data = api.read_object(path)
        if data is None:
            raise FileNotFoundError(f"{path} vanished while its manifest was computed")
        return len(data), hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    for start in range(0, size, 8 * CHUNK):
        digest.update(api.read_range(path, start, min(size, start + 8 * CHUNK)))
    return size, digest.hexdigest()


def _list_files(root: str) -> list[str]:
    """Relative paths of every file under root, except the executor's own bookkeeping."""
    rels: list[str] = []
    if is_local(root):
        base = strip_protocol(root)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(EXECUTOR_FILE_PREFIX)]
            for name in filenames:
                if name.startswith(EXECUTOR_FILE_PREFIX) or name.startswith(".tmp-"):
                    continue
                if not os.path.isfile(os.path.join(dirpath, name)):
                    continue  # a dangling symlink or a socket: nothing to hash
                rels.append(os.path.relpath(os.path.join(dirpath, name), base))
        return sorted(rels)
    fs = filesystem(root)
    base = root.rstrip("/")
    bare = fs._strip_protocol(base)
    try:
        found = fs.find(base, detail=False)
    except FileNotFoundError:
        return []
    for full in found:
        rel = full[len(bare) + 1 :] if full.startswith(bare + "/") else full
        if _is_bookkeeping(rel):
            continue
        rels.append(rel)
    return sorted(rels)


def compute_manifest(root: str, parallelism: int = 8) -> dict:
    """{"files": [{"path", "size", "sha256"}...], "total_size"} for every file under `root`."""
    from marin.storage.files import _object_api

    api = None if is_local(root) else _object_api(root)
    if api is not None:
        object_sizes = {rel: size for rel, size in api.list_files(root) if not _is_bookkeeping(rel)}
        rels = sorted(object_sizes)

        def measure(rel: str):
            return _sha256_object(api, f"{root.rstrip('/')}/{rel}", object_sizes[rel])

    elif is_local(root):
        rels = _list_files(root)
        base = strip_protocol(root)

        def measure(rel: str):
            return _sha256_local(os.path.join(base, rel))

    else:
        rels = _list_files(root)
        fs = filesystem(root)

        def measure(rel: str):
            return _sha256_remote(fs, f"{root.rstrip('/')}/{rel}")

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
