"""Documents on any fsspec path: read the formats labs publish, write Dolma JSON lines reproducibly.

Every data step reads documents and writes the same thing: gzipped JSON lines, one document per line
with `id`, `text`, `source` and `metadata`, sharded as `part-00000.jsonl.gz`, `part-00001.jsonl.gz`, ...

What a step reads (`read_documents`), chosen by the file name (case aside):

- JSON lines: `*.jsonl` and `*.json`, one JSON object per line, plain or compressed: `.gz` / `.gzip`
  (any number of gzip members), `.zst` / `.zstd` (any number of frames), `.bz2` (any number of
  streams), `.xz` (any number of streams).
- Parquet: `*.parquet`, any compression, any number of row groups (FineWeb, FineWeb-Edu,
  Nemotron-CC, DCLM as published on the Hugging Face hub).

Every file of an input folder is read (`list_shards`), or the step fails naming the files it cannot
read: a file is never left out because of its name. The exceptions are hidden files and folders
(any part of the path below the folder starting with `.`: the executor's `.executor_*` files, ledgers,
`.tmp-*` writes in progress) and `BOOKKEEPING`, the files marin's own steps write beside their
documents (`stats.json`, `removed_sample.jsonl.gz`, ...), which are logged as left out.

The text is the field or column `text_key` (default "text"); the id is `id_key` (default "id"). With
`id_key=None` the corpus has no ids (DCLM-baseline) and each document's id is derived from its place:
`<shard>/<row>`, the shard's file name without its format suffix and the 0-based row (Parquet) or
line (JSON lines) in that file, so the same shard in any of the formats gives the same ids and a rerun
gives the same ids again. A `source` string is kept as the document's source; every other field or
column goes into `metadata` (beside an existing `metadata` object, whose keys win), so FineWeb's
`url`, `dump` and `language_score` survive filtering and dedup.

Readers stream: memory is bounded by one line (JSON lines, read in 256 KiB compressed chunks) or one
row group's batch (Parquet), whatever the file's size.

Two kinds of failure, never silent:

- A bad document (a line that is not UTF-8 or JSON, a row whose text is null or not a string, no id)
  is a `BadDocumentError` naming the file and line or row; with `skip_bad=True` it is skipped and
  counted by reason so the step reports it in its stats.
- A bad file (not what its name says, a truncated gzip or zstd stream, a Parquet file without its
  footer, no text column, a text column that is not strings) is a `BadShardError` naming the file.
  `skip_bad` never covers it: a truncated shard would silently lose every document after the cut.

Shards are written gzipped with `mtime=0` and no file name in the header, and the JSON with a fixed key
order, so the same documents give the same bytes.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import itertools
import json
import logging
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import fsspec

from marin.provenance.redaction import redact_value
from marin.storage import read_bytes_many, write_bytes

logger = logging.getLogger(__name__)

DOC_KEYS = ("id", "text", "source", "metadata")
JSONL_NAMES = (".jsonl", ".json")
"""Names of JSON-lines shards, before an optional compression suffix."""
COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
"""Compression suffixes of JSON-lines shards, and what each is."""
PARQUET_NAMES = (".parquet",)
BOOKKEEPING = frozenset(
    {
        "stats.json",
        "removed_sample.jsonl.gz",
        "removed_ids.jsonl",
        "dedup_guard.json",
        "filter_guard.json",
        "contamination.jsonl",
        "provenance.json",
        "corpus_info.json",
        "volatile_files.txt",
    }
)
"""Files that marin's data steps write beside their documents, at the top of their output folder: never read
as documents (a step reading another's output reads only its shards)."""
READ_CHUNK = 1 << 18
"""Compressed bytes read at a time from a JSON-lines shard."""
PARQUET_BATCH_ROWS = 1024
"""Rows converted to documents at a time (pyarrow reads at most one row group's pages for them)."""

_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"PAR1": "Parquet", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}


class BadDocumentError(ValueError):
    """A line or row in an input shard is not a valid document; the message names the file and line or row."""


class BadShardError(ValueError):
    """An input shard cannot be read as what its name says (truncated, another format, no text column);
    the message names the file. Never skipped by `skip_bad`."""


class EmptyInputError(ValueError):
    """The input of a step holds no shard files or no documents at all."""


@dataclass
class ReadReport:
    """What reading one shard met: documents read and bad lines skipped, by reason."""

    documents: int = 0
    skipped: Counter = field(default_factory=Counter)


def shard_name(index: int) -> str:
    return f"part-{index:05d}.jsonl.gz"


def shard_format(path: str) -> tuple[str, str | None] | None:
    """("jsonl" or "parquet", compression or None) of a document shard, from its name (case aside);
    None when the name is not one of a format marin reads."""
    suffix = _format_suffix(path.rsplit("/", 1)[-1]).lower()
    if not suffix:
        return None
    if suffix.endswith(PARQUET_NAMES):
        return "parquet", None
    return "jsonl", next((kind for end, kind in COMPRESSIONS.items() if suffix.endswith(end)), None)


def _format_suffix(name: str) -> str:
    """The format suffix of a shard's file name as written (`.jsonl.zst`, `.JSONL`, `.parquet`)."""
    lower = name.lower()
    if lower.endswith(PARQUET_NAMES):
        return name[-len(".parquet") :]
    cut = 0
    for suffix in COMPRESSIONS:
        if lower.endswith(suffix):
            cut = len(suffix)
            break
    base = lower[: len(lower) - cut]
    for suffix in JSONL_NAMES:
        if base.endswith(suffix):
            return name[-(cut + len(suffix)) :]
    return ""


def shard_stem(path: str) -> str:
    """The shard's file name without its format suffix: `part-00003.jsonl.zst` -> `part-00003`."""
    name = path.rsplit("/", 1)[-1]
    suffix = _format_suffix(name)
    return name[: -len(suffix)] if suffix else name


FORMATS_READ = ".parquet, .jsonl or .json (plain, or compressed .gz, .gzip, .zst, .zstd, .bz2, .xz)"


def list_shards(input_path: str) -> list[str]:
    """Sorted full paths of the document shards under `input_path` (a folder, or one file): every file below it.

    Hidden files and folders (a path part starting with `.`) and marin's own `BOOKKEEPING` files at the top
    of the folder are left out (logged); any other file whose name is not a format marin reads is a
    `BadShardError` naming it, before anything is read: a file is read, or the step fails.
    """
    fs, root = fsspec.core.url_to_fs(input_path)
    if fs.isfile(root):
        if shard_format(root) is None:
            raise BadShardError(f"{input_path}: not a document shard (a format marin reads is {FORMATS_READ})")
        return [_unstrip(fs, root, input_path)]
    if not fs.isdir(root):
        raise EmptyInputError(f"input path does not exist: {input_path}")
    base = root.rstrip("/") + "/"
    shards, unreadable, hidden, bookkeeping = [], [], 0, []
    for path in sorted(fs.find(root)):
        rel = path[len(base) :] if path.startswith(base) else path.rsplit("/", 1)[-1]
        if any(part.startswith(".") for part in rel.split("/")):
            hidden += 1
        elif rel in BOOKKEEPING:
            bookkeeping.append(rel)
        elif shard_format(rel) is None:
            unreadable.append(rel)
        else:
            shards.append(path)
    if unreadable:
        listed = ", ".join(unreadable[:10]) + (f" and {len(unreadable) - 10} more" if len(unreadable) > 10 else "")
        raise BadShardError(
            f"input folder {input_path} holds {len(unreadable)} file(s) that are not document shards: {listed}. "
            f"Every file of an input folder is read, and a document shard is {FORMATS_READ}. Move these out, or "
            "point input_path at a folder or file holding only documents (a download step's `glob` picks files)."
        )
    if not shards:
        raise EmptyInputError(f"no document shards ({FORMATS_READ}) under input path {input_path}")
    if hidden or bookkeeping:
        logger.info(
            "%s: reading %d shard(s); left out %d hidden file(s)%s",
            input_path,
            len(shards),
            hidden,
            f" and marin's bookkeeping {', '.join(bookkeeping)}" if bookkeeping else "",
        )
    return [_unstrip(fs, p, input_path) for p in shards]


def _unstrip(fs, stripped: str, original: str) -> str:
    """fsspec strips the protocol; put it back so workers can reopen the path."""
    if "://" in original and not original.startswith("file://"):
        return fs.unstrip_protocol(stripped)
    return stripped


def read_documents(
    path: str,
    *,
    skip_bad: bool = False,
    report: ReadReport | None = None,
    text_key: str = "text",
    id_key: str | None = "id",
) -> Iterator[dict]:
    """Yield the documents of one shard in file order; see the module docstring for formats, keys and errors."""
    report = report if report is not None else ReadReport()
    kind = shard_format(path)
    if kind is None:
        raise BadShardError(f"{path}: not a document shard (a format marin reads is {FORMATS_READ})")
    if kind[0] == "parquet":
        rows = _parquet_rows(path, text_key, id_key)
        where = "row"
    else:
        rows = _jsonl_rows(path, text_key, id_key, kind[1])
        where = "line"
    for item in rows:
        if type(item) is _Batch:
            report.documents += item.count
            yield from item.documents
            continue
        position, reason, doc = item
        if reason is not None:
            if not skip_bad:
                raise BadDocumentError(
                    f"{path}:{position}: {reason} (set skip_bad_documents=True to skip and count)"
                    if where == "line"
                    else f"{path}: row {position}: {reason} (set skip_bad_documents=True to skip and count)"
                )
            logger.warning("skipping %s %s %d: %s", path, where, position, reason)
            report.skipped[reason.split(":")[0]] += 1
            continue
        report.documents += 1
        yield doc


# ---------------------------------------------------------------- JSON lines


def _jsonl_rows(
    path: str, text_key: str, id_key: str | None, compression: str | None
) -> Iterator[tuple[int, str | None, dict | None]]:
    """(1-based line number, bad reason or None, document) for every non-blank line.

    A `.json` file whose first line is not a JSON object is one JSON document (an array, or an object over
    several lines), not JSON lines: a BadShardError, which `skip_bad` does not cover."""
    stem = shard_stem(path)
    suffix = _format_suffix(path.rsplit("/", 1)[-1]).lower()
    json_named = suffix.startswith(".json") and not suffix.startswith(".jsonl")
    first = True
    for lineno, raw in enumerate(_lines(path, compression), start=1):
        if not raw.strip():
            continue
        reason, doc = _parse(raw, text_key, id_key, stem, lineno - 1)
        if first and json_named and reason is not None and reason.startswith("bad_json"):
            raise BadShardError(
                f"{path}: not JSON lines (its first line is not a JSON object: {reason}); a .json shard must hold "
                "one document per line"
            )
        first = False
        yield lineno, reason, doc


def _lines(path: str, compression: str | None) -> Iterator[bytes]:
    """The lines of a JSON-lines shard, decompressed as its name says, streaming; a bad stream is a BadShardError."""
    with fsspec.open(path, "rb") as f:
        head = f.read(6)
        if compression is None:
            for magic, what in _MAGIC.items():
                if head.startswith(magic):
                    raise BadShardError(f"{path}: named as plain JSON lines but holds {what} data")
        chunks = _chunks(f, head)
        if compression == "gzip":
            chunks = _gunzip(path, chunks)
        elif compression == "zstd":
            chunks = _unzstd(path, chunks)
        elif compression == "bz2":
            import bz2

            chunks = _members(path, chunks, bz2.BZ2Decompressor, OSError, "bz2", "stream")
        elif compression == "xz":
            import lzma

            chunks = _members(path, chunks, lzma.LZMADecompressor, lzma.LZMAError, "xz", "stream")
        yield from _split_lines(chunks)


def _chunks(f, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while chunk := f.read(READ_CHUNK):
        yield chunk


def _gunzip(path: str, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Decompress gzip members one after another; the stream must end at the end of a member."""
    return _members(path, chunks, lambda: zlib.decompressobj(wbits=31), zlib.error, "gzip", "member")


def _unzstd(path: str, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Decompress zstd frames one after another; the stream must end at the end of a frame."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    return _members(path, chunks, dctx.decompressobj, zstandard.ZstdError, "zstd", "frame")


def _members(path: str, chunks: Iterator[bytes], decoder, error: type, kind: str, unit: str) -> Iterator[bytes]:
    """Decompressed bytes of concatenated members (gzip) or frames (zstd), each with a fresh `decoder()`;
    a stream that is not `kind`, or ends inside a member, is a BadShardError naming the file."""
    d = decoder()
    seen = False
    for chunk in chunks:
        data = chunk
        while data:
            seen = True
            try:
                out = d.decompress(data)
            except error as e:
                raise BadShardError(f"{path}: not a valid {kind} stream ({e})") from None
            if out:
                yield out
            if d.eof:
                data = d.unused_data
                d = decoder()
                seen = bool(data)
            else:
                data = b""
    if seen and not d.eof:
        raise BadShardError(f"{path}: truncated {kind} stream (it ends inside a {unit})")


def _split_lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Lines (without their newline) of a byte stream; a long line is joined once, in linear time."""
    pending: list[bytes] = []
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending.append(chunk[start:end])
                yield b"".join(pending)
                pending = []
            else:
                yield chunk[start:end]
            start = end + 1
        if start < len(chunk):
            pending.append(chunk[start:])
    if pending:
        yield b"".join(pending)


def _parse(raw: bytes, text_key: str, id_key: str | None, stem: str, row: int) -> tuple[str | None, dict | None]:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8: line is not valid UTF-8", None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return f"bad_json: {e.msg}", None
    if not isinstance(obj, dict):
        return "bad_json: line is not a JSON object", None
    return _document(obj, text_key, id_key, stem, row)


def _document(obj: dict, text_key: str, id_key: str | None, stem: str, row: int) -> tuple[str | None, dict | None]:
    """The Dolma document of one record: text, id, source and everything else in metadata."""
    text = obj.pop(text_key, None) if text_key in obj else _MISSING
    if text is _MISSING:
        return f"missing_text: document has no {text_key!r} field", None
    if not isinstance(text, str):
        return f"missing_text: {text_key!r} is not a string", None
    if id_key is None:
        doc_id = f"{stem}/{row}"
    else:
        doc_id = obj.pop(id_key, None)
        if doc_id is None:
            return f"missing_id: document has no {id_key!r} field (set id_key=None to derive ids)", None
        doc_id = str(doc_id)
    source = obj.pop("source", "")
    metadata = obj.pop("metadata", None)
    if not isinstance(metadata, dict):
        metadata = {} if metadata is None else {"metadata": metadata}
    if not isinstance(source, str):
        metadata.setdefault("source", source)
        source = ""
    for key in sorted(obj):
        metadata.setdefault(key, obj[key])
    return None, {"id": doc_id, "text": text, "source": source, "metadata": metadata}


_MISSING = object()


# ---------------------------------------------------------------- Parquet


class _Batch(NamedTuple):
    """A Parquet batch's documents when none of its rows can be bad."""

    count: int
    documents: Iterator[dict]


def _parquet_rows(
    path: str, text_key: str, id_key: str | None
) -> Iterator[_Batch | tuple[int, str | None, dict | None]]:
    """One batch at a time: its `_Batch` when no row of it can be bad, else (0-based row, bad reason or
    None, document) for each of its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stem = shard_stem(path)
    fs, local = fsspec.core.url_to_fs(path)
    # a local file is opened by pyarrow itself (native reads); a bucket's through fsspec
    with contextlib.nullcontext(local) if _is_local(fs) else fs.open(local, "rb") as f:
        try:
            pf = pq.ParquetFile(f)
        except (pa.ArrowException, OSError) as e:
            raise BadShardError(f"{path}: not a readable Parquet file ({e})") from None
        schema = pf.schema_arrow
        names = schema.names
        if text_key not in names:
            raise BadShardError(f"{path}: no text column {text_key!r} (columns: {', '.join(names)}); set text_key")
        text_type = schema.field(text_key).type
        if not (pa.types.is_string(text_type) or pa.types.is_large_string(text_type)):
            raise BadShardError(f"{path}: text column {text_key!r} is {text_type}, not a string column")
        if id_key is not None and id_key not in names:
            raise BadShardError(
                f"{path}: no id column {id_key!r} (columns: {', '.join(names)}); set id_key, or id_key=None to derive ids"
            )
        source_type = schema.field("source").type if "source" in names else None
        plain = "metadata" not in names and (source_type is None or pa.types.is_string(source_type))
        extras = sorted(n for n in names if n not in (text_key, id_key, "source"))
        row = 0
        try:
            for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                names = batch.schema.names
                columns = {name: _pylist(batch.column(i)) for i, name in enumerate(names)}
                if plain and _no_nulls(batch, names, text_key, id_key):
                    yield _plain_batch(columns, row, batch.num_rows, text_key, id_key, stem, extras)
                else:
                    yield from _general_rows(columns, row, batch.num_rows, text_key, id_key, stem)
                row += batch.num_rows
        except (pa.ArrowException, OSError) as e:
            raise BadShardError(f"{path}: unreadable Parquet data in the rows from {row} ({e})") from None


def _is_local(fs) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _no_nulls(batch, names: list[str], text_key: str, id_key: str | None) -> bool:
    """Whether the batch's text and id columns hold no null (then no row of it is a bad document)."""
    if batch.column(names.index(text_key)).null_count:
        return False
    return id_key is None or not batch.column(names.index(id_key)).null_count


def _plain_batch(columns: dict, first: int, n: int, text_key: str, id_key: str | None, stem: str, extras: list[str]):
    """The documents of a batch without a `metadata` column (string `source`, if any) and without null
    texts or ids: the same documents `_document` builds from each row, built column by column in one
    generator (a FineWeb shard's documents come from here). Lazily, so each document is freed once its
    reader is done with it rather than surviving, with the rest of its batch, into the collector's older
    generations."""
    texts = columns[text_key]
    if id_key is None:
        ids = [f"{stem}/{r}" for r in range(first, first + n)]
    else:
        ids = columns[id_key]
        if ids and type(ids[0]) is not str:
            ids = [str(v) for v in ids]
    sources = columns.get("source")
    if sources is None:
        sources = itertools.repeat("", n)
    elif None in sources:
        sources = [s or "" for s in sources]
    if not extras:
        docs = ({"id": i, "text": t, "source": s, "metadata": {}} for i, t, s in zip(ids, texts, sources, strict=True))
    elif len(extras) == 1:
        name = extras[0]
        values = columns[name]
        docs = (
            {"id": i, "text": t, "source": s, "metadata": {name: v}}
            for i, t, s, v in zip(ids, texts, sources, values, strict=True)
        )
    else:
        rows = zip(*(columns[e] for e in extras), strict=True)
        docs = (
            {"id": i, "text": t, "source": s, "metadata": dict(zip(extras, v, strict=True))}
            for i, t, s, v in zip(ids, texts, sources, rows, strict=True)
        )
    return _Batch(n, docs)


def _general_rows(columns: dict, first: int, n: int, text_key: str, id_key: str | None, stem: str):
    for i in range(n):
        obj = {name: values[i] for name, values in columns.items()}
        if obj.get(text_key) is None:
            yield first + i, f"missing_text: {text_key!r} is null", None
        else:
            yield (first + i, *_document(obj, text_key, id_key, stem, first + i))


def _pylist(column) -> list:
    """A column's values as JSON-able Python values (times and decimals as strings, bytes as base64)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_temporal(t) or pa.types.is_decimal(t):
        return pc.cast(column, pa.string()).to_pylist()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in column.to_pylist()]
    values = column.to_pylist()
    if pa.types.is_nested(t):
        return [_jsonable(v) for v in values]
    return values


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# ---------------------------------------------------------------- writing


def encode_documents(docs: Iterable[dict]) -> bytes:
    """The gzipped JSON-lines bytes of `docs` (mtime=0, fixed key order: same docs, same bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz:
        for doc in docs:
            gz.write(_line(doc))
    return buf.getvalue()


def _line(doc: dict) -> bytes:
    ordered = {k: doc[k] for k in DOC_KEYS if k in doc}
    ordered.update({k: v for k, v in doc.items() if k not in ordered})
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def write_json(path: str, obj) -> None:
    """Sorted, indented JSON published atomically (marin.storage.write_bytes), its strings redacted
    (`marin.provenance.redaction`: stats and provenance files are published with the outputs)."""
    write_bytes(path, (json.dumps(redact_value(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())


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
        self._gz.write(_line(doc))
        self.count += 1

    def close(self) -> None:
        self._gz.close()


def step_documents(config, path: str, report: ReadReport | None = None) -> Iterator[dict]:
    """`read_documents` of one shard with a step config's `skip_bad_documents`, `text_key` and `id_key`."""
    return read_documents(
        path, skip_bad=config.skip_bad_documents, report=report, text_key=config.text_key, id_key=config.id_key
    )


def check_keys(owner: str, text_key: str, id_key: str | None) -> None:
    """Fail naming the config when its document keys cannot name a field."""
    if not isinstance(text_key, str) or not text_key:
        raise ValueError(f"{owner}.text_key must be a non-empty field name, got {text_key!r}")
    if id_key is not None and (not isinstance(id_key, str) or not id_key):
        raise ValueError(f"{owner}.id_key must be a non-empty field name or None, got {id_key!r}")
    if id_key == text_key:
        raise ValueError(f"{owner}: text_key and id_key are both {text_key!r}; they name different fields")
