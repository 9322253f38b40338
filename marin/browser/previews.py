"""File previews that never load a large file whole.

- jsonl / jsonl.gz / jsonl.zst: a page of lines starting at a byte offset of the
  *uncompressed* stream. Plain files seek there; compressed ones stream from the start,
  discard up to the offset and stop after the page, so the first page of a 1 GB file costs
  one page of reading. The "next" link carries the offset where this page ended.
- parquet: the footer gives the schema, row count and row groups; a page reads only the
  row groups that overlap it (pyarrow over an fsspec file, so also on gs:// and s3://).
- json: parsed and shown as a collapsible tree up to a size cap, as text beyond it.
- text: a window of bytes at an offset. Images are shown from the raw route.
"""

from __future__ import annotations

import json
from typing import Any

from marin.browser.html import error_box, esc, fmt_num, fmt_size, json_tree, note, table, url_file, url_raw
from marin.storage.layout import EXECUTOR_FILE_PREFIX, INFO_FILE

PAGE_LINES = 50
MAX_LINE = 1 << 20
TEXT_WINDOW = 256 << 10
JSON_TREE_MAX = 8 << 20
CELL_MAX = 400

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}
TEXT_SUFFIXES = (
    ".txt",
    ".log",
    ".md",
    ".py",
    ".yaml",
    ".yml",
    ".toml",
    ".cfg",
    ".ini",
    ".csv",
    ".tsv",
    ".sh",
    ".html",
    ".css",
    ".js",
    ".xml",
    ".rst",
)


def kind_of(name: str) -> str:
    n = name.lower()
    for comp in ("", ".gz", ".zst", ".zstd"):
        if n.endswith((".jsonl" + comp, ".ndjson" + comp)):
            return "jsonl"
    if n.endswith((".parquet", ".pq")):
        return "parquet"
    if n.endswith(".json") or n.rsplit("/", 1)[-1] == INFO_FILE:
        return "json"
    for suf in IMAGE_TYPES:
        if n.endswith(suf):
            return "image"
    if n.endswith(TEXT_SUFFIXES) or n.rsplit("/", 1)[-1].startswith(EXECUTOR_FILE_PREFIX):
        return "text"
    return "binary"


def compression_of(name: str) -> str | None:
    n = name.lower()
    if n.endswith(".gz"):
        return "gzip"
    if n.endswith((".zst", ".zstd")):
        return "zstd"
    return None


def _open_stream(fs, path: str, compression: str | None):
    raw = fs.open(path, "rb", block_size=1 << 20)
    if compression == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_size=1 << 20), raw
    return raw, raw


class _Lines:
    """readline(limit) over any stream of bytes, with our own buffer (fsspec files differ in readline)."""

    def __init__(self, stream):
        self.stream, self.buf, self.eof = stream, b"", False

    def _fill(self) -> bool:
        chunk = self.stream.read(64 << 10)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def readline(self, limit: int) -> bytes:
        while True:
            k = self.buf.find(b"\n", 0, limit)
            if k >= 0 or len(self.buf) >= limit or (self.eof or not self._fill()):
                cut = k + 1 if k >= 0 else min(limit, len(self.buf))
                out, self.buf = self.buf[:cut], self.buf[cut:]
                return out

    def at_end(self) -> bool:
        return not self.buf and (self.eof or not self._fill())


def skip_to(stream, offset: int, compressed: bool) -> None:
    """Move `stream` to uncompressed byte `offset`: a seek, or reading and dropping what is before it."""
    if not offset:
        return
    if not compressed:
        stream.seek(offset)
        return
    left = offset
    while left > 0 and (chunk := stream.read(min(left, 1 << 20))):
        left -= len(chunk)


def read_jsonl_page(fs, path: str, offset: int, n: int) -> tuple[list[tuple[int, Any, str | None]], int, bool]:
    """([(byte offset, parsed value or raw text, error or None)], next offset, at end of file)."""
    compression = compression_of(path)
    stream, raw = _open_stream(fs, path, compression)
    try:
        skip_to(stream, offset, compression is not None)
        reader = _Lines(stream)
        pos = offset
        lines: list[tuple[int, Any, str | None]] = []
        while len(lines) < n:
            line = reader.readline(MAX_LINE)
            if not line:
                break
            start = pos
            pos += len(line)
            if len(line) == MAX_LINE and not line.endswith(b"\n"):
                while True:
                    more = reader.readline(MAX_LINE)
                    pos += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                text = line[:2000].decode("utf-8", "replace")
                lines.append((start, text, f"line longer than {fmt_size(MAX_LINE)}, not shown whole"))
                continue
            if not line.strip():
                continue
            try:
                lines.append((start, json.loads(line), None))
            except UnicodeDecodeError:
                lines.append((start, line[:2000].decode("utf-8", "replace"), "not valid UTF-8"))
            except ValueError as e:
                lines.append((start, line[:2000].decode("utf-8", "replace"), f"not valid JSON: {e}"))
        return lines, pos, reader.at_end()
    finally:
        stream.close()
        if raw is not stream:
            raw.close()


def _cell(v: Any) -> str:
    if isinstance(v, str):
        if len(v) > CELL_MAX:
            return f'<details class="cell"><summary>{esc(v[:CELL_MAX])}…</summary><div class="full">{esc(v)}</div></details>'
        return f'<span class="txt">{esc(v)}</span>'
    if isinstance(v, dict | list):
        return json_tree(v, open_depth=0)
    if isinstance(v, int | float) and not isinstance(v, bool):
        return fmt_num(v)
    return esc(json.dumps(v))


def lines_table(lines: list[tuple[int, Any, str | None]]) -> str:
    """A page of jsonl lines as a table: the byte offset, then a column per key (the first 10 keys seen)."""
    keys: list[str] = []
    for _, obj, err in lines:
        if err is None and isinstance(obj, dict):
            for k in obj:
                if k not in keys:
                    keys.append(k)
    keys = keys[:10]
    rows = []
    for start, obj, err in lines:
        if err is not None:
            rows.append(
                [str(start), f'<span class="bad">{esc(err)}</span>: <code>{esc(str(obj)[:300])}</code>']
                + [""] * (len(keys) - 1)
            )
        elif isinstance(obj, dict):
            rows.append(
                [str(start)] + [_cell(obj.get(k)) if k in obj else '<span class="muted">—</span>' for k in keys]
            )
        else:
            rows.append([str(start), _cell(obj)] + [""] * (len(keys) - 1))
    headers = ["offset"] + (keys or ["value"])
    rows = [r[: len(headers)] + [""] * (len(headers) - len(r)) for r in rows]
    return table(headers, rows, cls="data jsonl", sortable=False)


def jsonl_preview(fs, root: int, rel: str, full: str, offset: int, n: int) -> str:
    lines, nxt, at_end = read_jsonl_page(fs, full, offset, n)
    if not lines:
        return note("no lines at this offset (end of file)") + _pager(root, rel, offset, nxt, True)
    return (
        _pager(root, rel, offset, nxt, at_end, shown=len(lines))
        + lines_table(lines)
        + _pager(root, rel, offset, nxt, at_end)
    )


def _pager(root: int, rel: str, offset: int, nxt: int, at_end: bool, shown: int | None = None) -> str:
    parts = ['<div class="pager">']
    if offset:
        parts.append(f'<a class="btn" href="{esc(url_file(root, rel))}">⏮ first page</a>')
    if not at_end:
        parts.append(f'<a class="btn next" href="{esc(url_file(root, rel, offset=nxt))}">next page ▶</a>')
    if shown is not None:
        parts.append(f'<span class="muted">{shown} lines from byte {offset:,} (uncompressed)</span>')
    parts.append("</div>")
    return "".join(parts)


def parquet_preview(fs, root: int, rel: str, full: str, offset: int, n: int) -> str:
    import pyarrow.parquet as pq

    with fs.open(full, "rb") as f:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        schema = pf.schema_arrow
        total = md.num_rows
        schema_rows = [
            [esc(fld.name), f"<code>{esc(fld.type)}</code>", "yes" if fld.nullable else "no"] for fld in schema
        ]
        head = (
            f'<div class="cards"><div class="card"><b>{total:,}</b> rows</div>'
            f'<div class="card"><b>{md.num_row_groups}</b> row groups</div>'
            f'<div class="card"><b>{len(schema)}</b> columns</div>'
            f'<div class="card">created by <code>{esc(md.created_by)}</code></div></div>'
            '<details class="section" open><summary>Schema</summary>'
            + table(["column", "type", "nullable"], schema_rows, cls="data")
            + "</details>"
        )
        offset = max(0, min(offset, max(total - 1, 0)))
        rows_html: list[list[str]] = []
        group_start, wanted = 0, []
        for g in range(md.num_row_groups):
            g_rows = md.row_group(g).num_rows
            if group_start + g_rows > offset and group_start < offset + n:
                wanted.append((g, group_start))
            group_start += g_rows
        for g, g_start in wanted:
            tbl = pf.read_row_group(g)
            lo = max(0, offset - g_start)
            hi = min(tbl.num_rows, offset + n - g_start)
            for i, rec in enumerate(tbl.slice(lo, hi - lo).to_pylist()):
                rows_html.append([str(g_start + lo + i)] + [_cell(rec.get(c)) for c in schema.names])
    pager = ['<div class="pager">']
    if offset > 0:
        pager.append(f'<a class="btn" href="{esc(url_file(root, rel, offset=max(0, offset - n)))}">◀ previous</a>')
    if offset + n < total:
        pager.append(f'<a class="btn next" href="{esc(url_file(root, rel, offset=offset + n))}">next page ▶</a>')
    shown_to = offset + len(rows_html)
    pager.append(f'<span class="muted">rows {offset:,}–{max(shown_to - 1, offset):,} of {total:,}</span></div>')
    pager_html = "".join(pager)
    return head + pager_html + table(["row"] + schema.names, rows_html, cls="data", sortable=False) + pager_html


def json_preview(fs, full: str, size: int) -> str:
    if size > JSON_TREE_MAX:
        return note(f"{fmt_size(size)}: too large for a tree, showing the start as text") + text_preview(
            fs, full, size, 0
        )
    data = fs.cat_file(full)
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        return error_box(f"not valid JSON: {e}") + text_preview(fs, full, size, 0)
    return (
        '<div class="toolbar"><button class="btn" data-tree="open">expand all</button>'
        '<button class="btn" data-tree="close">collapse all</button></div>'
        f'<div class="json">{json_tree(value, open_depth=2)}</div>'
    )


def text_preview(fs, full: str, size: int, offset: int, root: int | None = None, rel: str | None = None) -> str:
    offset = max(0, min(offset, size))
    data = fs.cat_file(full, start=offset, end=min(size, offset + TEXT_WINDOW)) if size else b""
    text = data.decode("utf-8", "replace")
    out = f'<pre class="text">{esc(text)}</pre>'
    if root is not None and offset + TEXT_WINDOW < size:
        out += (
            f'<div class="pager"><a class="btn next" href="{esc(url_file(root, rel, offset=offset + TEXT_WINDOW))}">'
            f'next {fmt_size(TEXT_WINDOW)} ▶</a><span class="muted">bytes {offset:,}–{offset + len(data):,} of {size:,}</span></div>'
        )
    return out


def image_preview(root: int, rel: str) -> str:
    return f'<div class="image"><img src="{esc(url_raw(root, rel))}" alt="{esc(rel)}"></div>'


def binary_preview(fs, full: str, size: int) -> str:
    data = fs.cat_file(full, start=0, end=min(size, 256)) if size else b""
    hexdump = "\n".join(
        f"{i:08x}  {data[i : i + 16].hex(' '):<47}  {''.join(chr(b) if 32 <= b < 127 else '.' for b in data[i : i + 16])}"
        for i in range(0, len(data), 16)
    )
    return (
        note(f"binary file, {fmt_size(size)}; the first {len(data)} bytes:") + f'<pre class="text">{esc(hexdump)}</pre>'
    )
