"""Copy a dataset into a step's output folder, from the Hugging Face hub, HTTP(S), buckets or disk.

`source` names where the files are: `hf://datasets/ORG/NAME@REVISION/sub/dir` (huggingface_hub's
fsspec filesystem; the revision is required, so a rerun gets the same bytes; `HF_ENDPOINT` and
`HF_TOKEN` are read when the step runs), `https://host/dir` with explicit `files`, or any fsspec
folder or file (`gs://`, `s3://`, `file://`, a local path) narrowed by `glob`. Files keep their path
relative to `source` and are copied in parallel through `marin.stepkit.sharding.run_shards` (a Ray task per
file, spread over the nodes, when Ray is there; `workers` threads otherwise), each streamed through
`marin.storage.open_write` while its sha256 is computed, so it appears only when complete (and, when
`expected_sha256` names it, only when the hash matches: a mismatch fails the step with the file's name). A rerun skips files
already in place, so an interrupted download resumes per file. `provenance.json` lists the source
(relative to the output folder when both are on the same storage, so the bytes do not depend on the
prefix), the revision, and every file's size and sha256, sorted by path.

An HTTP(S) source may carry credentials as user-info (`https://user:PASS@host/dir`): the step uses them, but
nothing it writes or logs holds them (`provenance.json` and the step's records name `https://host/dir`).
Without user-info, credentials for the host are read from `~/.netrc` (or the file `NETRC` names), as curl
does; that is what a rerun from the record, which holds the URL without them, relies on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass

import fsspec  # noqa: TID251 (reads the source only; see docs/design.md, "Steps write through marin.storage")

from marin.processing.documents import write_json
from marin.provenance.redaction import strip_userinfo
from marin.stepkit.config import StepConfig, input_field, output_field, unversioned
from marin.stepkit.sharding import ShardResources, run_shards
from marin.storage import exists, join, open_read, open_write, portable_path

logger = logging.getLogger(__name__)

CHUNK = 8 << 20


class ChecksumMismatchError(ValueError):
    """A downloaded file's sha256 differs from `expected_sha256`; the message names the file."""


@dataclass(frozen=True, kw_only=True)
class DownloadConfig(StepConfig):
    """Copy the files of `source` into `output_path`."""

    source: str = input_field("download source", unchecked_schemes=("http", "https", "hf"))
    """hf://datasets/ORG/NAME@REVISION/..., https://..., gs://, s3://, file:// or a local path (folder or file)."""
    output_path: str = output_field()
    """Folder to copy into; files keep their path relative to source."""
    glob: str = "**"
    """Pattern, relative to a folder source, of the files to copy (not for http(s))."""
    files: tuple[str, ...] = ()
    """Explicit file paths relative to source (required for an http(s) folder); overrides glob."""
    revision: str | None = None
    """Revision for an hf:// source that has no @REVISION in it."""
    expected_sha256: dict[str, str] | None = None
    """Relative path -> expected sha256 hex; a mismatch fails the step naming the file."""
    workers: int = unversioned(4)
    """Files copied at once (threads) when Ray is absent; the output does not depend on it."""
    shard_resources: ShardResources = unversioned(ShardResources())
    """What each file's copy asks of a Ray cluster when the step runs on one."""

    def validate(self) -> None:
        if not self.source:
            raise ValueError("DownloadConfig.source is empty")
        if self.workers < 1:
            raise ValueError(f"DownloadConfig.workers must be >= 1, got {self.workers}")


def _hf_source(config: DownloadConfig) -> tuple[fsspec.AbstractFileSystem, str, str]:
    """(filesystem, resolved root, revision) for an hf:// source; the revision is mandatory."""
    from huggingface_hub import HfFileSystem

    path = config.source[len("hf://") :].rstrip("/")
    match = re.match(r"^(datasets|models|spaces)/([^/@]+/[^/@]+)(?:@([^/]+))?(/.*)?$", path)
    if not match:
        raise ValueError(f"DownloadConfig.source: expected hf://datasets/ORG/NAME@REVISION/..., got {config.source}")
    kind, repo, revision, rest = match.groups()
    if revision and config.revision and revision != config.revision:
        raise ValueError(f"DownloadConfig: source revision {revision!r} differs from revision {config.revision!r}")
    revision = revision or config.revision
    if not revision:
        raise ValueError(
            f"DownloadConfig.revision: hf:// sources need a revision (hf://{kind}/{repo}@REVISION/...), got {config.source}"
        )
    endpoint = os.environ.get("HF_ENDPOINT") or None
    fs = HfFileSystem(endpoint=endpoint, token=os.environ.get("HF_TOKEN") or False, skip_instance_cache=True)
    return fs, f"{kind}/{repo}@{revision}{rest or ''}", revision


def source_filesystem(config: DownloadConfig) -> tuple[fsspec.AbstractFileSystem, str, str | None]:
    """(filesystem, root, revision) of `config.source`; cheap, so each file's task makes its own."""
    if config.source.startswith(("http://", "https://")):
        return (
            fsspec.filesystem("http", client_kwargs={"trust_env": True}, skip_instance_cache=True),
            config.source,
            None,
        )
    if config.source.startswith("hf://"):
        return _hf_source(config)
    fs, root = fsspec.core.url_to_fs(config.source)
    return fs, root, None


def list_source_files(config: DownloadConfig) -> tuple[fsspec.AbstractFileSystem, list[tuple[str, str]], str | None]:
    """(filesystem, [(relative path, source path)] sorted, revision) of what the step will copy."""
    fs, root, revision = source_filesystem(config)
    if config.source.startswith(("http://", "https://")):
        if config.files:
            return fs, [(f, f"{config.source.rstrip('/')}/{f}") for f in sorted(config.files)], None
        return fs, [(config.source.rstrip("/").rsplit("/", 1)[-1], config.source)], None
    root = root.rstrip("/")
    if config.files:
        pairs = [(f, f"{root}/{f}") for f in sorted(config.files)]
    elif fs.isfile(root):
        pairs = [(root.rsplit("/", 1)[-1], root)]
    else:
        if not fs.isdir(root):
            raise FileNotFoundError(f"download: source does not exist: {strip_userinfo(config.source)}")
        found = fs.glob(f"{root}/{config.glob}", detail=True)
        pairs = sorted((p[len(root) + 1 :], p) for p, info in found.items() if info.get("type") == "file")
    if not pairs:
        raise FileNotFoundError(f"download: no files match {config.glob!r} under {strip_userinfo(config.source)}")
    return fs, pairs, revision


@dataclass(frozen=True)
class SourceFile:
    """One file to copy: its path relative to the source, its full source path, its expected sha256."""

    rel: str
    src: str
    expected_sha256: str | None

    def __repr__(self) -> str:
        return f"SourceFile(rel={self.rel!r}, src={strip_userinfo(self.src)!r})"


def copy_file(config: DownloadConfig, file: SourceFile) -> dict:
    """Copy one file into the output folder (skipped when already in place); returns its provenance entry."""
    fs, _, _ = source_filesystem(config)
    return _copy_one(fs, file.src, join(config.output_path, file.rel), file.rel, file.expected_sha256)


def _copy_one(fs, src: str, dest: str, rel: str, expected: str | None) -> dict:
    if exists(dest):
        digest, size = hashlib.sha256(), 0
        with open_read(dest) as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
        sha = digest.hexdigest()
        if expected and sha != expected:
            raise ChecksumMismatchError(f"download: {rel}: existing file has sha256 {sha}, expected {expected}")
        return {"path": rel, "size": size, "sha256": sha, "resumed": True}
    digest, size = hashlib.sha256(), 0
    # published only when the block ends without error: a mismatch or a failed read leaves nothing at dest
    with _opened(fs, src, rel) as fi, open_write(dest) as fo:
        while chunk := fi.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            fo.write(chunk)
        sha = digest.hexdigest()
        if expected and sha != expected:
            raise ChecksumMismatchError(
                f"download: {rel}: sha256 {sha} does not match expected {expected} (from {strip_userinfo(src)})"
            )
    logger.info("downloaded %s (%d bytes)", rel, size)
    return {"path": rel, "size": size, "sha256": sha, "resumed": False}


def _opened(fs, src: str, rel: str):
    """`fs.open(src)`; an HTTP server's refusal (401, 403: fsspec reports a FileNotFoundError) says so."""
    try:
        return fs.open(src, "rb")
    except FileNotFoundError as exc:
        status = getattr(exc.__cause__, "status", None)
        if status in (401, 403):
            raise PermissionError(
                f"download: {rel}: {strip_userinfo(src)} answered HTTP {status}: give the host's credentials in "
                "~/.netrc (or the file NETRC names), or as the source URL's user-info"
            ) from exc
        raise


def download(config: DownloadConfig) -> dict:
    """Run the download step; returns the provenance also written to provenance.json."""
    _, pairs, revision = list_source_files(config)
    expected = dict(config.expected_sha256 or {})
    unknown = sorted(set(expected) - {rel for rel, _ in pairs})
    if unknown:
        raise ValueError(f"DownloadConfig.expected_sha256 names files the source does not have: {', '.join(unknown)}")
    logger.info("downloading %d files from %s into %s", len(pairs), strip_userinfo(config.source), config.output_path)
    results = run_shards(
        copy_file,
        config,
        [SourceFile(rel, src, expected.get(rel)) for rel, src in pairs],
        desc="download",
        workers=config.workers,
        resources=config.shard_resources,
        local="thread",
    )
    resumed = sum(r.pop("resumed") for r in results)
    if resumed:
        logger.info("download: %d of %d files were already in place", resumed, len(results))
    provenance = {
        "source": portable_path(strip_userinfo(config.source), config.output_path),
        "revision": revision,
        "files": results,
        "total_size": sum(r["size"] for r in results),
    }
    write_json(join(config.output_path, "provenance.json"), provenance)
    return provenance
