"""Dolma-style documents on any fsspec path: read them strictly, write them byte-for-byte reproducibly.

Every data step reads and writes the same thing: gzipped JSON lines, one document per line with
`id`, `text`, `source` and `metadata`, sharded as `part-00000.jsonl.gz`, `part-00001.jsonl.gz`, ...
A bad line (not UTF-8, not JSON, no string `text`) is never dropped silently: by default it is a
`BadDocumentError` naming the file and line; with `skip_bad=True` it is skipped and counted by reason
so the step can report it in its stats. Shards are gzipped with `mtime=0` and no file name in the
header, and the JSON is written with a fixed key order, so the same documents give the same bytes.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import fsspec

from marin.storage import read_bytes_many, write_bytes

logger = logging.getLogger(__name__)

DOC_KEYS = ("id", "text", "source", "metadata")
SHARD_SUFFIXES = (".jsonl.gz", ".jsonl", ".json.gz", ".jsonl.zst")


class BadDocumentError(ValueError):
    """A line in an input shard is not a valid document; the message names the file and line."""


class EmptyInputError(ValueError):
    """The input of a step holds no shard files or no documents at all."""


@dataclass
class ReadReport:
    """What reading one shard met: documents read and bad lines skipped, by reason."""

    documents: int = 0
    skipped: Counter = field(default_factory=Counter)


def shard_name(index: int) -> str:
    return f"part-{index:05d}.jsonl.gz"


def list_shards(input_path: str, pattern: str | None = None) -> list[str]:
    """Sorted full paths of the document shards under `input_path` (a folder, or one file).

    Without a `pattern`, a folder's `part-*` shards are taken when there are any (what marin steps
    write, leaving out sidecars such as `removed_sample.jsonl.gz`); otherwise every jsonl file below.
    Hidden files and folders (`.work/`, `.tmp-*`) are never shards.
    """
    fs, root = fsspec.core.url_to_fs(input_path)
    if fs.isfile(root):
        return [_unstrip(fs, root, input_path)]
    if not fs.isdir(root):
        raise EmptyInputError(f"input path does not exist: {input_path}")
    shards = []
    for glob in [pattern] if pattern else ["**/part-*", "**"]:
        found = fs.glob(f"{root.rstrip('/')}/{glob}")
        shards = sorted(p for p in found if p.endswith(SHARD_SUFFIXES) and "/." not in p[len(root) :] and fs.isfile(p))
        if shards:
            break
    if not shards:
        raise EmptyInputError(f"no document shards (*.jsonl.gz, *.jsonl) under input path {input_path}")
    return [_unstrip(fs, p, input_path) for p in shards]


def _unstrip(fs, stripped: str, original: str) -> str:
    """fsspec strips the protocol; put it back so workers can reopen the path."""
    if "://" in original and not original.startswith("file://"):
        return fs.unstrip_protocol(stripped)
    return stripped


def _open_lines(path: str) -> Iterator[bytes]:
    compression = "zstd" if path.endswith(".zst") else ("gzip" if path.endswith(".gz") else None)
    with fsspec.open(path, "rb", compression=compression) as f:
        yield from f


def read_documents(path: str, *, skip_bad: bool = False, report: ReadReport | None = None) -> Iterator[dict]:
    """Yield the documents of one shard in file order; see the module docstring for bad lines."""
    report = report if report is not None else ReadReport()
    for lineno, raw in enumerate(_open_lines(path), start=1):
        if not raw.strip():
            continue
        reason, doc = _parse(raw)
        if reason is not None:
            if not skip_bad:
                raise BadDocumentError(f"{path}:{lineno}: {reason} (set skip_bad_documents=True to skip and count)")
            logger.warning("skipping %s:%d: %s", path, lineno, reason)
            report.skipped[reason.split(":")[0]] += 1
            continue
        report.documents += 1
        yield doc


def _parse(raw: bytes) -> tuple[str | None, dict | None]:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8: line is not valid UTF-8", None
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as e:
        return f"bad_json: {e.msg}", None
    if not isinstance(doc, dict):
        return "bad_json: line is not a JSON object", None
    if "text" not in doc:
        return "missing_text: document has no 'text' field", None
    if not isinstance(doc["text"], str):
        return "missing_text: 'text' is not a string", None
    if "id" not in doc:
        return "missing_id: document has no 'id' field", None
    doc["id"] = str(doc["id"])
    doc.setdefault("source", "")
    doc.setdefault("metadata", {})
    return None, doc


def encode_documents(docs: Iterable[dict]) -> bytes:
    """The gzipped JSON-lines bytes of `docs` (mtime=0, fixed key order: same docs, same bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz:
        for doc in docs:
            ordered = {k: doc[k] for k in DOC_KEYS if k in doc}
            ordered.update({k: v for k, v in doc.items() if k not in ordered})
            gz.write(json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            gz.write(b"\n")
    return buf.getvalue()


def write_json(path: str, obj) -> None:
    """Sorted, indented JSON published atomically (marin.storage.write_bytes)."""
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def read_json_many(paths: list[str]) -> list:
    """The JSON documents at `paths`, read concurrently (one round trip's latency for a bucket's many
    small per-shard files, not one per file); a missing one is a FileNotFoundError naming it."""
    out = []
    for path, raw in zip(paths, read_bytes_many(paths), strict=True):
        if raw is None:
            raise FileNotFoundError(f"{path} is missing")
        out.append(json.loads(raw))
    return out


class DocumentStream:
    """Documents appended to an open binary file as gzipped JSON lines, byte-identical to `encode_documents`.

    For outputs too large to build in memory: `with open_write(path) as raw: stream = DocumentStream(raw)`.
    """

    def __init__(self, raw):
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
        self.count = 0

    def write(self, doc: dict) -> None:
        ordered = {k: doc[k] for k in DOC_KEYS if k in doc}
        ordered.update({k: v for k, v in doc.items() if k not in ordered})
        self._gz.write(json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        self.count += 1

    def close(self) -> None:
        self._gz.close()
