"""Reuse across labs: a step another prefix already published is verified byte by byte, then published here.

    python experiments/tutorial/tiny_lm.py --prefix lab-b --cache_from lab-a

Lab B's `tokenized/shakespeare-1a2b3c4d` has the same identity (`<name>-<hash>`) as lab A's, because the
prefix never enters a hash. Before B runs that step, the runner (under B's lease, in the attempt's staging
folder) asks each source in turn, `reuse_output(...)`:

1. does `<source>/<name>-<hash>` say SUCCESS, with a manifest and an `.executor_info` of the same name
   and hash, made by the same code fingerprint (unless the run asks for reuse across code changes)?
2. is every manifest path a plain relative path that stays inside the source folder (no `..`, no
   absolute path, no executor file, no symlink leading out), present, and of the size the manifest says?
3. copying: each file goes into the staging folder (a server-side copy inside one bucket backend, else
   a stream), and the bytes that arrived are hashed and compared with the manifest. Nothing of a remote
   SUCCESS is trusted: a file whose sha256 differs rejects the source;
4. the source's status and manifest still have the versions (generation, ETag, inode and mtime) read in
   step 1, so a source rewritten while it was copied is detected.

Only then is the output published here by the usual rules (manifest, SUCCESS, under this prefix's lease),
with `reused_from` (source, path, record that made it, manifest digest) in its `.executor_info` and the
outcome REUSED. Any failure is a reason in the step's log (`.executor_logs/NNN.reuse.log`) and the step
runs as if no source existed. A source is only read: nothing is written, locked or leased there.

A source is untrusted input: its records are read bounded (`_read_limited`, `_holds`) and checked field by
field (`_check_info`, `_check_manifest`), and any failure, foreseen or not, is a reason not to reuse that
source, never an error of the step.

With `mode="reference"` the files are hashed where they are and not copied: the step's folder here holds
only the executor's files, its manifest is the source's, and downstream steps read the source folder
(`referenced_path`). Before a step reads such an input it is checked (hashed again, unless it was verified
in this run and every file still has the version it was hashed at: `pin_references`), and after the step
every file must still have that version (`check_pinned`), or the step fails instead of publishing what it
made from bytes that are no longer the verified ones.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import orjson

from marin.storage import (
    ObjectChanged,
    VersionedBytes,
    backend_for,
    current_version,
    delete,
    exists,
    is_local,
    join,
    list_dir,
    open_read,
    open_write,
    protocol_of,
    read_bytes,
    size,
    strip_protocol,
)
from marin.storage.layout import INFO_FILE, MANIFEST_FILE, STATUS_FILE, is_bookkeeping, is_record_name

logger = logging.getLogger(__name__)

CacheMode = Literal["copy", "reference"]
CACHE_FROM_ENV = "MARIN_CACHE_FROM"
"""Sources to reuse from when `--cache_from` is not given: prefixes separated by commas."""
COPY_CHUNK = 8 << 20
PARALLELISM = 8
STATUS_LIMIT = 1 << 10
"""The most bytes of a source's status file that are read (SUCCESS is 7); a larger one is not reused."""
INFO_LIMIT = 16 << 20
"""The most bytes of a source's `.executor_info` that are read."""
MANIFEST_LIMIT = 64 << 20
"""The most bytes of a source's manifest that are read (about half a million files)."""
RECORD_LIMIT = 64 << 20
"""Experiment records (and their `.runs.jsonl`) of a source larger than this are not searched for the step."""
SEARCH_CHUNK = 1 << 20
MAX_FILE_SIZE = 1 << 53
"""A manifest size beyond this (8 PiB, the largest integer a JSON reader keeps exactly) is refused."""


@dataclass(frozen=True, kw_only=True)
class CacheFrom:
    """Where a run may reuse outputs from, and how."""

    sources: tuple[str, ...] = ()
    """Prefixes (folders, gs://, s3://) tried in order for each step that would run."""
    mode: CacheMode = "copy"
    """'copy': the verified files are copied here. 'reference': they stay in the source and are read there."""
    code_changed: bool = False
    """Reuse an output even when the code that made it differs from this checkout's (off by default)."""
    pinned: dict[str, str] = field(default_factory=dict)
    """Step identity -> the manifest digest it must have (a rerun of a record that referenced it): any other
    manifest, or bytes that do not verify, refuse the step instead of running it."""

    def __post_init__(self) -> None:
        if self.mode not in ("copy", "reference"):
            raise ValueError(f"cache_mode must be 'copy' or 'reference', got {self.mode!r}")
        for s in self.sources:
            if not isinstance(s, str) or not s.strip():
                raise ValueError(f"cache_from: an empty source prefix in {list(self.sources)!r}")

    @classmethod
    def build(
        cls, sources: list[str] | tuple[str, ...] | None, mode: str = "copy", code_changed: bool = False
    ) -> CacheFrom | None:
        """From the flags, else MARIN_CACHE_FROM; None when there is no source."""
        if not sources:
            env = os.environ.get(CACHE_FROM_ENV, "")
            sources = [s for s in (p.strip() for p in env.split(",")) if s]
        if not sources:
            return None
        normal = tuple(s.rstrip("/") if "://" in s else os.path.abspath(s) for s in sources)
        return cls(sources=normal, mode=mode, code_changed=code_changed)  # type: ignore[arg-type]


class Rejected(Exception):
    """This source cannot be reused for this step; the message says why."""


class Unreachable(Rejected):
    """The source could not be read at all (a warning, not a verdict on its bytes)."""


@dataclass
class Candidate:
    """A source's SUCCESS output of the step, as read before any byte is copied."""

    source: str
    """The source prefix."""
    path: str
    """The step's folder in the source."""
    manifest: dict
    """The source's manifest, as read."""
    manifest_version: str = ""
    """The versions of the manifest and the status as read (empty: not checked for changes)."""
    status_version: str = ""
    info: dict = field(default_factory=dict)
    """The source's `.executor_info`."""
    manifest_sha256: str = ""
    """sha256 of the manifest's bytes: the digest records name a reused output by."""

    @property
    def total_bytes(self) -> int:
        return sum(int(f["size"]) for f in self.manifest["files"])


@dataclass
class Reused:
    """What `reuse_output` published: the manifest for this prefix and where it came from."""

    manifest: dict
    origin: dict
    reasons: list[str] = field(default_factory=list)
    """Why earlier sources were passed over."""
    versions: dict[str, str] | None = None
    """By reference: each file's version (`file_versions`) when its bytes were hashed (None: not kept)."""


def _check_entry_path(rel: object) -> str:
    if not isinstance(rel, str) or not rel:
        raise Rejected(f"manifest entry with a bad path {_shown(rel)}")
    if len(rel) > 4096 or any(ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF for c in rel):
        raise Rejected(f"manifest path {_shown(rel)} holds a control character or is too long")
    if rel.startswith("/") or "\\" in rel or "://" in rel:
        raise Rejected(f"manifest path {_shown(rel)} is not a relative path inside the step's folder")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or posixpath.normpath(rel) != rel:
        raise Rejected(f"manifest path {_shown(rel)} escapes the step's folder")
    if is_bookkeeping(rel):
        raise Rejected(f"manifest path {_shown(rel)} names an executor file")
    return rel


def _check_manifest(manifest: object, where: str) -> dict:
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise Rejected(f"{where}: the manifest has no file list")
    seen = set()
    for entry in manifest["files"]:
        if not isinstance(entry, dict):
            raise Rejected(f"{where}: a manifest entry is not an object")
        rel = _check_entry_path(entry.get("path"))
        size, sha = entry.get("size"), entry.get("sha256")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_FILE_SIZE:
            raise Rejected(f"{where}: manifest size of {rel!r} is {_shown(size)}")
        if not isinstance(sha, str) or len(sha) != 64 or sha.strip("0123456789abcdef"):
            raise Rejected(f"{where}: manifest sha256 of {rel!r} is {_shown(sha)}")
        if rel in seen:
            raise Rejected(f"{where}: {rel!r} is listed twice in the manifest")
        seen.add(rel)
    total = manifest.get("total_size")
    if total is not None and (
        not isinstance(total, int) or isinstance(total, bool) or total != sum(f["size"] for f in manifest["files"])
    ):
        raise Rejected(f"{where}: the manifest's total_size {_shown(total)} is not the sum of its file sizes")
    return manifest


def _shown(value: object, limit: int = 80) -> str:
    """`value` for a reason: its repr, cut (a hostile source decides what it holds)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _read_limited(path: str, limit: int, what: str, versioned: bool = True) -> VersionedBytes | None:
    """The bytes of `path` (and, `versioned`, their version), reading at most `limit` + 1 bytes whatever the
    object holds (None when absent); Rejected when it is larger, or (`versioned`) was rewritten while it
    was read. On GCS and S3 one ranged read pinned to the version asked first (2 requests); elsewhere the
    version is asked before and after the read."""
    before = current_version(path) if versioned else ""
    if before is None:
        return None
    pinned_reads = protocol_of(path) in ("gs", "s3")
    try:
        data = None
        if pinned_reads:
            try:
                data = backend_for(path).read_range(path, 0, limit + 1, before or None)
            except (ObjectChanged, FileNotFoundError):
                raise
            except Exception:  # an empty object has no byte 0 to range over (416): read it as a stream
                pinned_reads = False
        if data is None:
            chunks, n = [], 0
            with open_read(path) as f:
                while n <= limit and (chunk := f.read(min(SEARCH_CHUNK, limit + 1 - n))):
                    chunks.append(chunk)
                    n += len(chunk)
            data = b"".join(chunks)
    except ObjectChanged:
        raise Rejected(f"{path} changed while it was read") from None
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise Rejected(f"{path}: the {what} is larger than {limit:,} bytes")
    if versioned and not pinned_reads and current_version(path) != before:
        raise Rejected(f"{path} changed while it was read")
    return VersionedBytes(data, before)


def _check_info(source_info: object, path: str) -> dict:
    """The fields of a source's `.executor_info` that reuse reads, each of its JSON type; Rejected if not."""
    if not isinstance(source_info, dict):
        raise Rejected(f"{path}: {INFO_FILE} is not an object")
    for key in ("name", "hash"):
        if not isinstance(source_info.get(key), str):
            raise Rejected(f"{path}: {INFO_FILE} field {key!r} is {_shown(source_info.get(key))}, not a string")
    fingerprint = source_info.get("code_fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise Rejected(f"{path}: {INFO_FILE} field 'code_fingerprint' is {_shown(fingerprint)}, not a string")
    run = source_info.get("run")
    if run is not None and not isinstance(run, dict):
        raise Rejected(f"{path}: {INFO_FILE} field 'run' is {_shown(run)}, not an object")
    run_id = (run or {}).get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise Rejected(f"{path}: {INFO_FILE} field 'run.run_id' is {_shown(run_id)}, not a string")
    return source_info


def probe(source: str, info: dict, cache: CacheFrom) -> Candidate:
    """The source's output of the step `info` describes, checked without reading its files; Rejected if not."""
    rel = info.get("relative_output_path") or f"{info['name']}-{info['hash']}"
    path = join(source, rel)
    try:
        status = _read_limited(join(path, STATUS_FILE), STATUS_LIMIT, "status")
        if status is None:
            raise Rejected(f"no output at {path}")
        if status.data.strip() != b"SUCCESS":
            raise Rejected(f"{path} is {_shown(status.data.strip().decode('utf-8', 'replace'))}, not SUCCESS")
        manifest_read = _read_limited(join(path, MANIFEST_FILE), MANIFEST_LIMIT, "manifest")
        info_read = _read_limited(join(path, INFO_FILE), INFO_LIMIT, INFO_FILE, versioned=False)
    except Rejected:
        raise
    except Exception as exc:
        raise Unreachable(f"{source} cannot be read ({type(exc).__name__}: {exc})") from exc
    if manifest_read is None or info_read is None:
        raise Rejected(f"{path} says SUCCESS but has no {'manifest' if manifest_read is None else INFO_FILE}")
    try:
        manifest = orjson.loads(manifest_read.data)
        source_info = orjson.loads(info_read.data)
    except ValueError as exc:
        raise Rejected(f"{path}: unreadable manifest or info ({exc})") from None
    source_info = _check_info(source_info, path)
    if (source_info["name"], source_info["hash"]) != (info.get("name"), info.get("hash")):
        raise Rejected(
            f"{path} holds {_shown(source_info['name'] + '-' + source_info['hash'])}, "
            f"not {info.get('name')}-{info.get('hash')}"
        )
    theirs, ours = source_info.get("code_fingerprint"), info.get("code_fingerprint")
    if theirs != ours and not cache.code_changed:
        raise Rejected(
            f"{path} was made by other code (fingerprint {str(theirs)[:12]}, this checkout {str(ours)[:12]}); "
            "--cache_code_changed reuses it anyway"
        )
    _check_manifest(manifest, path)
    return Candidate(
        source=source,
        path=path,
        manifest=manifest,
        manifest_version=manifest_read.version,
        status_version=status.version,
        info=source_info,
        manifest_sha256=hashlib.sha256(manifest_read.data).hexdigest(),
    )


def _check_files(candidate: Candidate) -> None:
    """Every manifest file is present with its size and stays inside the source folder (symlinks resolved)."""
    path = candidate.path
    if is_local(path):
        base = os.path.realpath(strip_protocol(path))
        listed = {}
        for entry in candidate.manifest["files"]:
            real = os.path.realpath(os.path.join(strip_protocol(path), entry["path"]))
            if os.path.commonpath([base, real]) != base:
                raise Rejected(f"{entry['path']} in {path} leads outside the step's folder (to {real})")
            if os.path.isfile(real):
                listed[entry["path"]] = os.path.getsize(real)
    else:
        listed = dict(backend_for(path).list_files(path))
    for entry in candidate.manifest["files"]:
        actual = listed.get(entry["path"])
        if actual is None:
            raise Rejected(f"{entry['path']} is listed in the manifest of {path} but missing")
        if actual != entry["size"]:
            raise Rejected(f"{entry['path']} in {path}: the manifest says {entry['size']} bytes, it has {actual}")


def _error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text if len(text) <= 300 else text[:300] + '...'}"


def _hash_stream(src, dst=None) -> tuple[int, str]:
    digest, n = hashlib.sha256(), 0
    while chunk := src.read(COPY_CHUNK):
        digest.update(chunk)
        n += len(chunk)
        if dst is not None:
            dst.write(chunk)
    return n, digest.hexdigest()


def _hash_file(path: str) -> tuple[int, str]:
    with open_read(path) as f:
        return _hash_stream(f)


def _copy_one(source: str, target: str) -> tuple[int, str]:
    """Copies one file and returns the size and sha256 of the bytes that arrived (or were streamed)."""
    if not is_local(source) and protocol_of(source) == protocol_of(target):
        if not backend_for(source).copy(source, target):
            raise Rejected(f"{source} vanished while it was copied")
        return _hash_file(target)
    with open_read(source) as src, open_write(target) as dst:
        return _hash_stream(src, dst)


def _verify_bytes(candidate: Candidate, staging: str | None) -> int:
    """Hashes every file (copying it into `staging` unless None); Rejected on the first mismatch. Bytes read."""
    entries = candidate.manifest["files"]

    def one(entry: dict) -> int:
        src = join(candidate.path, entry["path"])
        try:
            size, sha = _copy_one(src, join(staging, entry["path"])) if staging else _hash_file(src)
        except Rejected:
            raise
        except Exception as exc:
            raise Rejected(f"{src} could not be read ({type(exc).__name__}: {exc})") from exc
        if size != entry["size"] or sha != entry["sha256"]:
            raise Rejected(
                f"{entry['path']} in {candidate.path}: its bytes do not match the manifest "
                f"({size} bytes, sha256 {sha[:12]}; the manifest says {entry['size']} bytes, {entry['sha256'][:12]})"
            )
        return size

    if len(entries) <= 1:
        return sum(one(e) for e in entries)
    with ThreadPoolExecutor(max_workers=min(PARALLELISM, len(entries))) as pool:
        return sum(pool.map(one, entries))


def _check_unchanged(candidate: Candidate) -> None:
    for name, version in ((STATUS_FILE, candidate.status_version), (MANIFEST_FILE, candidate.manifest_version)):
        if current_version(join(candidate.path, name)) != version:
            raise Rejected(f"{candidate.path} changed while it was read ({name} was rewritten)")


def clear_outputs(staging: str) -> None:
    """Removes the step's own files from a staging folder (the executor's files stay)."""
    if is_local(staging):
        base = strip_protocol(staging)
        for name in list_dir(staging):
            if not is_bookkeeping(name):
                delete(os.path.join(base, name), recursive=True)
        return
    for rel, _ in backend_for(staging).list_files(staging):
        if not is_bookkeeping(rel):
            delete(join(staging, rel))


def _holds(path: str, needle: bytes) -> bool:
    """Whether the file `path` contains `needle`, read in chunks (memory bounded whatever its size); a file
    larger than RECORD_LIMIT is not read (False, with a warning)."""
    found_size = size(path)
    if found_size is None:
        return False
    if found_size > RECORD_LIMIT:
        logger.warning("%s: %s bytes, more than a record holds; not searched", path, f"{found_size:,}")
        return False
    tail, n = b"", 0
    with open_read(path) as f:
        while n <= RECORD_LIMIT and (chunk := f.read(SEARCH_CHUNK)):
            n += len(chunk)
            if needle in tail + chunk:
                return True
            tail = chunk[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return False


def source_record(candidate: Candidate) -> str | None:
    """The experiment record under the source that lists this step (the one whose run made it, if several).
    Records are searched in chunks, and larger ones than RECORD_LIMIT not at all: a source's files bound
    neither the memory nor the time this takes."""
    folder = join(candidate.source, "experiments")
    identity = f"{candidate.info.get('name')}-{candidate.info.get('hash')}"
    run_id = (candidate.info.get("run") or {}).get("run_id")
    found = []
    try:
        for name in list_dir(folder)[:500]:
            if is_record_name(name) and _holds(join(folder, name), identity.encode()):
                found.append(join(folder, name))
        if len(found) > 1 and run_id:
            for path in found:
                if _holds(path.removesuffix(".json") + ".runs.jsonl", run_id.encode()):
                    return path
    except Exception as exc:
        logger.warning("could not read the records under %s: %s", folder, exc)
    return found[0] if found else None


def reuse_output(cache: CacheFrom, info: dict, staging: str) -> Reused | None:
    """Publishes nothing itself: fills `staging` with a verified copy (or nothing, by reference) of the first
    source that passes every check, and returns the manifest and origin to publish; None when none does."""
    reasons: list[str] = []
    identity = f"{info.get('name')}-{info.get('hash')}"
    pinned = cache.pinned.get(identity)
    for source in cache.sources:
        t0 = time.monotonic()
        try:
            candidate = probe(source, info, cache)
            if pinned is not None and candidate.manifest_sha256 != pinned:
                raise Rejected(
                    f"{candidate.path}: its manifest is not the one the record used "
                    f"(sha256 {candidate.manifest_sha256[:12]}, recorded {pinned[:12]})"
                )
            _check_files(candidate)
            if cache.mode == "copy":
                clear_outputs(staging)
            versions = file_versions(candidate.path, candidate.manifest) if cache.mode == "reference" else None
            read = _verify_bytes(candidate, staging if cache.mode == "copy" else None)
            _check_unchanged(candidate)
            if versions is not None and file_versions(candidate.path, candidate.manifest) != versions:
                raise Rejected(f"{candidate.path} changed while it was hashed")
        except Exception as exc:
            reason = str(exc) if isinstance(exc, Rejected) else f"the source could not be checked ({_error(exc)})"
            logger.warning("%s: not reused from %s: %s", identity, source, reason)
            reasons.append(reason)
            if cache.mode == "copy" and not isinstance(exc, Unreachable):
                clear_outputs(staging)
            continue
        seconds = time.monotonic() - t0
        origin = {
            "source": source,
            "path": candidate.path,
            "mode": cache.mode,
            "record": source_record(candidate),
            "run_id": (candidate.info.get("run") or {}).get("run_id"),
            "code_fingerprint": candidate.info.get("code_fingerprint"),
            "manifest_sha256": candidate.manifest_sha256,
            "bytes_verified": read,
            "bytes_copied": read if cache.mode == "copy" else 0,
            "seconds": round(seconds, 3),
        }
        logger.info(
            "%s: reused from %s (%s, %d files, %d bytes verified in %.2f s)",
            identity,
            candidate.path,
            cache.mode,
            len(candidate.manifest["files"]),
            read,
            seconds,
        )
        manifest = {"files": candidate.manifest["files"], "total_size": candidate.total_bytes}
        if cache.mode == "reference":
            manifest["reference"] = candidate.path
        return Reused(manifest=manifest, origin=origin, reasons=reasons, versions=versions)
    if pinned is not None:
        raise ReferenceChanged(
            f"{identity}: the external input the record used is gone or changed: {'; '.join(reasons)}"
        )
    if reasons:
        logger.info("%s: no source could be reused; running the step", identity)
    return None


def referenced_path(info: dict | None) -> str | None:
    """Where a step published by reference keeps its files (None for an ordinary output)."""
    origin = (info or {}).get("reused_from")
    if isinstance(origin, dict) and origin.get("mode") == "reference" and isinstance(origin.get("path"), str):
        return origin["path"]
    return None


class ReferenceChanged(RuntimeError):
    """A referenced output's bytes are no longer those it was reused with."""


def check_reference(path: str, manifest: dict) -> None:
    """Hashes the referenced folder `path` against the manifest recorded when it was reused; ReferenceChanged if
    any file differs, is missing or does not stay inside the folder."""
    candidate = Candidate(source=path, path=path, manifest=manifest)
    try:
        _check_manifest(manifest, path)
        _check_files(candidate)
        _verify_bytes(candidate, None)
    except Rejected as exc:
        raise ReferenceChanged(f"the referenced output {path} changed since it was reused: {exc}") from None


def file_versions(folder: str, manifest: dict) -> dict[str, str] | None:
    """Each manifest file's version now ("" when absent): locally the device, inode, size, mtime and ctime of
    the file (through symlinks; every write moves the ctime, and no call sets it back), on GCS the
    generation, on S3 the ETag. None where the storage keeps no versions: the bytes are hashed instead."""
    rels = [e["path"] for e in manifest.get("files", ())]
    if is_local(folder):
        base, found = strip_protocol(folder), {}
        for rel in rels:
            try:
                st = os.stat(os.path.join(base, rel))
            except (FileNotFoundError, NotADirectoryError):
                found[rel] = ""
                continue
            found[rel] = f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}-{st.st_ctime_ns}"
        return found
    try:
        listed = dict(backend_for(folder).list_versions(folder))
    except NotImplementedError:
        return None
    return {rel: listed.get(rel, "") for rel in rels}


@dataclass(frozen=True, kw_only=True)
class Pinned:
    """An input published by reference, as the step was about to read it."""

    folder: str
    """The source folder the step reads."""
    manifest: dict
    """The manifest its bytes were verified against."""
    versions: dict[str, str] | None
    """Each file's version when it was verified (None: the storage keeps none; hashed again after the step)."""


def pin_references(references: list[tuple[str, dict]]) -> list[Pinned]:
    """Before a step reads inputs published by reference, `(folder, manifest)` each: their bytes are the
    recorded ones (hashed again; ReferenceChanged if not), pinned at the versions they have now for
    `check_pinned` after the step. An input verified earlier in this run, whose manifest carries the
    `versions` it was hashed at, is not hashed again while every file still has those versions."""
    pinned = []
    for folder, manifest in references:
        now = file_versions(folder, manifest)
        if now is None or now != manifest.get("versions"):
            check_reference(folder, manifest)
            if file_versions(folder, manifest) != now:
                raise ReferenceChanged(f"the referenced output {folder} changed while it was hashed")
        pinned.append(Pinned(folder=folder, manifest=manifest, versions=now))
    return pinned


def check_pinned(pinned: list[Pinned]) -> None:
    """After the step read them: ReferenceChanged naming the first input file that was rewritten, deleted or
    (on a storage without versions) no longer has its bytes, so that the step is not published as SUCCESS."""
    for p in pinned:
        if p.versions is None:
            try:
                check_reference(p.folder, p.manifest)
            except ReferenceChanged as exc:
                raise ReferenceChanged(f"{exc}; it changed while the step read it") from None
            continue
        now = file_versions(p.folder, p.manifest) or {}
        changed = sorted(rel for rel, version in p.versions.items() if now.get(rel) != version)
        if changed:
            more = f" (and {len(changed) - 1} more of its files)" if len(changed) > 1 else ""
            raise ReferenceChanged(
                f"the referenced input {join(p.folder, changed[0])}{more} changed while the step read it: "
                "what the step made rests on bytes that are not the verified ones"
            )


def warn_missing_sources(cache: CacheFrom) -> list[str]:
    """Warns about (and returns) the sources that hold nothing at all, a mistyped path most likely: such a
    source would otherwise be tried step by step and found to hold no output, in silence."""
    missing = []
    for source in cache.sources:
        try:
            if not exists(source):
                missing.append(source)
        except Exception as exc:
            logger.warning("--cache_from %s cannot be read (%s)", source, _error(exc))
    for source in missing:
        logger.warning("--cache_from %s does not exist: nothing can be reused from it", source)
    return missing


def plan_reuse(decisions: list, plan, cache: CacheFrom) -> set:
    """The steps of `decisions` (those `status.action_for` reuses when reusable) that a source can satisfy: it passes the checks made
    without reading its files (SUCCESS, same identity and code, a sound manifest), or the record pins one
    (refused later if it does not verify). The runner verifies every byte later; the decision to reuse is
    `status.action_for`'s."""
    from marin.execution.records import step_record

    warn_missing_sources(cache)
    todo = list(decisions)
    reusable = set()
    if not todo:
        return reusable

    def look(d) -> tuple[Candidate | None, list[str]]:
        """The first source whose output passes `probe`, and why the others did not."""
        reasons = []
        for source in cache.sources:
            try:
                return probe(source, step_record(d.planned, plan), cache), reasons
            except Rejected as exc:
                reasons.append(str(exc))
            except Exception as exc:
                reasons.append(f"{source}: the source could not be checked ({_error(exc)})")
        return None, reasons

    if all(is_local(s) for s in cache.sources) or len(todo) == 1:
        found = [look(d) for d in todo]
    else:
        with ThreadPoolExecutor(max_workers=min(32, len(todo))) as pool:
            found = list(pool.map(look, todo))
    for d, (candidate, reasons) in zip(todo, found, strict=True):
        if candidate is None and d.planned.identity in cache.pinned:
            reusable.add(d.planned)
            d.reason = f"refused: the record's external input did not verify ({'; '.join(reasons) or 'no source'})"
            continue
        if candidate is None:
            telling = [r for r in reasons if not r.startswith("no output at")]
            if telling:
                d.reason += f"; not reusable: {telling[0]}"
                logger.warning("%s: not reused: %s", d.planned.identity, "; ".join(telling))
            continue
        reusable.add(d.planned)
        how = "to copy" if cache.mode == "copy" else "to verify in place"
        d.reason = f"from {candidate.path} ({candidate.total_bytes:,} bytes {how})"
        d.reuse_from = candidate.path
        d.reuse_bytes = candidate.total_bytes
    return reusable


def read_references(planned_steps: list) -> dict:
    """For steps already published by reference: ExecutorStep -> (the folder they are read from, their manifest)."""
    from marin.execution.status import read_infos

    found = {}
    for p, info in zip(planned_steps, read_infos([p.output_path for p in planned_steps]), strict=True):
        path = referenced_path(info)
        if path is None:
            continue
        manifest_data = read_bytes(join(p.output_path, MANIFEST_FILE))
        manifest = orjson.loads(manifest_data) if manifest_data else {"files": []}
        found[p.step] = (path, manifest)
    return found
