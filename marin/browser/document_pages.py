"""Pages over documents: search and sample a shard, and a dedup step's removed documents beside their keepers.

A dedup step records each removed document as one line of `removed_ids.jsonl` (`id`, `reason`,
`duplicate_of`); the documents themselves are in the step's input shards. The duplicates page takes a
page of those lines, finds the texts of both sides in one streaming pass over the input (stopping as soon
as every wanted id is found, and after `SCAN_LIMIT` bytes in any case), and shows each removed document
beside the document it duplicates. The input is read as the step read it: JSON lines or Parquet (only
its text and id columns), with the step's `text_key` and `id_key` from its record, ids derived as
`<shard>/<row>` when the step's `id_key` is None. A document's own view (`?id=`) links both ways: a removed document to
the one it duplicates, a kept document to every document removed as its duplicate.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from urllib.parse import urlencode

from marin.browser import previews
from marin.browser.documents import SCAN_LIMIT, TEXT_FIELDS, DocQuery, describe, scan
from marin.browser.html import error_box, esc, note, page, table, url_file, url_step
from marin.browser.previews import MAX_LINE, _Lines, _open_stream, compression_of
from marin.storage.layout import info_path

REMOVED_FILE = "removed_ids.jsonl"
DOC_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".jsonl.zstd")
PARQUET_SUFFIXES = (".parquet",)


def search_form(root: int, rel: str, query: DocQuery) -> str:
    where = ", ".join(f"{k}={v}" for k, v in query.where)
    return (
        f'<form class="toolbar doc-search" method="get" action="{esc(url_file(root, rel))}">'
        f'<input type="search" name="q" value="{esc(query.text)}" placeholder="Search the text…">'
        f'<input type="text" name="where" value="{esc(where)}" placeholder="field=value, metadata.lang=en">'
        '<button type="submit">search</button>'
        f'<span class="muted">or</span><input type="number" name="n_sample" min="1" max="1000" '
        f'value="{query.sample or 20}" class="num"><input type="hidden" name="seed" value="{query.seed}">'
        '<button type="submit" name="mode" value="sample">random sample</button></form>'
    )


def search_results(fs, root: int, rel: str, full: str, query: DocQuery, offset: int, n: int) -> str:
    result = scan(fs, full, query, offset, n)
    out = f'<div class="note scan-summary">{describe(result, query)}</div>'
    if result.lines:
        out += previews.lines_table(result.lines)
    elif not query.sample:
        out += note("no matching documents in what was read")
    params = {"q": query.text, "where": ", ".join(f"{k}={v}" for k, v in query.where)}
    if query.sample:
        again = {**params, "sample": query.sample, "seed": query.seed + 1}
        out += f'<div class="pager"><a class="btn" href="{esc(url_file(root, rel, **again))}">another sample</a></div>'
    elif not result.at_end:
        more = {k: v for k, v in params.items() if v}
        out += (
            f'<div class="pager"><a class="btn next" href="{esc(url_file(root, rel, offset=result.next_offset, **more))}">'
            f"continue from byte {result.next_offset:,} ▶</a></div>"
        )
    return out


@dataclass(frozen=True)
class _Input:
    """Where a dedup step read its documents, and the keys it read them with (its config's)."""

    folder: str
    text_key: str = "text"
    id_key: str | None = "id"


def _input_of(root, step_rel: str) -> _Input | None:
    """The dedup step's input folder, as a path under this root (records hold the writer's absolute paths),
    with the step's `text_key` and `id_key` (the defaults where its record leaves them out)."""
    try:
        info = json.loads(root.fs.cat_file(info_path(root.join(step_rel))))
    except (OSError, ValueError):
        return None
    config = info.get("config") if isinstance(info, dict) else None
    source = config.get("input_path") if isinstance(config, dict) else None
    prefix = info.get("prefix")
    if not isinstance(source, str):
        return None
    if isinstance(prefix, str) and source.startswith(prefix.rstrip("/") + "/"):
        folder = root.join(source[len(prefix.rstrip("/")) + 1 :])
    elif root.fs.exists(source):
        folder = source
    else:
        return None
    text_key = config.get("text_key", "text")
    id_key = config.get("id_key", "id")
    return _Input(
        folder,
        text_key if isinstance(text_key, str) and text_key else "text",
        id_key if id_key is None or (isinstance(id_key, str) and id_key) else "id",
    )


def _shards(fs, folder: str) -> list[str]:
    """The document shards a step reads in `folder`, as its reader lists them: the `part-*` files when
    there are any, else every JSON-lines or Parquet file below; never hidden files or folders."""
    try:
        found = sorted(p for p in fs.find(folder) if p.endswith(DOC_SUFFIXES + PARQUET_SUFFIXES))
    except FileNotFoundError:
        return []
    base = fs._strip_protocol(folder).rstrip("/")
    found = [p for p in found if "/." not in p[len(base) :]]
    parts = [p for p in found if p.rsplit("/", 1)[-1].startswith("part-")]
    return parts or found


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return next((name[: -len(s)] for s in DOC_SUFFIXES + PARQUET_SUFFIXES if name.endswith(s)), name)


def _find_texts(fs, source: _Input, wanted: set[str]) -> tuple[dict[str, dict], bool]:
    """id -> document for the wanted ids, from the step's input shards (JSON lines or Parquet, read with the
    step's keys; ids derived as `<shard>/<row>` when its `id_key` is None); and whether the byte limit cut
    the search short."""
    found: dict[str, dict] = {}
    budget = SCAN_LIMIT
    for shard in _shards(fs, source.folder):
        if len(found) == len(wanted) or budget <= 0:
            break
        read = _parquet_texts if shard.endswith(PARQUET_SUFFIXES) else _jsonl_texts
        budget = read(fs, shard, source, wanted, found, budget)
    return found, budget <= 0


def _jsonl_texts(fs, shard: str, source: _Input, wanted: set[str], found: dict, budget: int) -> int:
    stem = _stem(shard)
    stream, raw = _open_stream(fs, shard, compression_of(shard))
    try:
        reader = _Lines(stream)
        row = -1
        while budget > 0 and len(found) < len(wanted):
            line = reader.readline(MAX_LINE)
            if not line:
                break
            row += 1
            budget -= len(line)
            if source.id_key is None:
                doc_id = f"{stem}/{row}"
                if doc_id not in wanted:
                    continue
            elif not any(w.encode() in line for w in wanted if w not in found):
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            if source.id_key is not None:
                doc_id = str(doc.get(source.id_key))
            if doc_id in wanted:
                found[doc_id] = _with_text(doc, source.text_key)
    finally:
        stream.close()
        if raw is not stream:
            raw.close()
    return budget


def _parquet_texts(fs, shard: str, source: _Input, wanted: set[str], found: dict, budget: int) -> int:
    """Reads only the text and id columns, a batch at a time; a file that cannot be read is passed over."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stem = _stem(shard)
    try:
        with fs.open(shard, "rb") as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            if source.text_key not in names or (source.id_key is not None and source.id_key not in names):
                return budget
            columns = [source.text_key] + ([source.id_key] if source.id_key is not None else [])
            row = 0
            for batch in pf.iter_batches(batch_size=1024, columns=columns):
                texts = batch.column(0).to_pylist()
                if source.id_key is None:
                    ids = [f"{stem}/{r}" for r in range(row, row + batch.num_rows)]
                else:
                    ids = [None if v is None else str(v) for v in batch.column(1).to_pylist()]
                row += batch.num_rows
                for doc_id, text in zip(ids, texts, strict=True):
                    if doc_id in wanted and isinstance(text, str):
                        found[doc_id] = {"id": doc_id, "text": text}
                budget -= sum(len(t) for t in texts if isinstance(t, str))
                if budget <= 0 or len(found) == len(wanted):
                    break
    except (pa.ArrowException, OSError):
        pass
    return budget


def _with_text(doc: dict, text_key: str) -> dict:
    """The document with its text under `text` when the step read it from another field."""
    if text_key != "text" and isinstance(doc.get(text_key), str):
        return {**doc, "text": doc[text_key]}
    return doc


def _text_of(doc: dict | None) -> str | None:
    if not isinstance(doc, dict):
        return None
    return next((doc[k] for k in TEXT_FIELDS if isinstance(doc.get(k), str)), None)


def _doc_box(root: int, step_rel: str, doc_id: str | None, doc: dict | None, role: str, extra: str = "") -> str:
    if doc_id is None:
        return f'<div class="doc {role}">{note("no id recorded")}</div>'
    link = f"/dups/{root}/{step_rel}?{urlencode({'id': doc_id})}"
    text = _text_of(doc)
    body = f'<pre class="doc-text">{esc(text[:4000])}</pre>' if text is not None else note("not found in the input")
    return (
        f'<div class="doc {role}" id="doc-{esc(doc_id)}"><div class="doc-head"><span class="role">{esc(role)}</span> '
        f'<a href="{esc(link)}"><code>{esc(doc_id)}</code></a>{extra}</div>{body}</div>'
    )


def _removed_lines(fs, path: str, offset: int, n: int, match=None) -> tuple[list[dict], int, bool]:
    lines, nxt, at_end = previews.read_jsonl_page(fs, path, offset, n if match is None else 1 << 30)
    entries = [obj for _, obj, err in lines if err is None and isinstance(obj, dict)]
    if match is not None:
        entries = [e for e in entries if match(e)]
    return entries, nxt, at_end


def _removals_by_source(fs, step_full: str) -> str:
    """A table of the step's removals per source (`sources` in its stats.json), or nothing without one."""
    try:
        stats = json.loads(fs.cat_file(posixpath.join(step_full, "stats.json")))
        sources = stats["sources"]
        rows = [
            [
                esc(name),
                (f"{s['documents']:,}", s["documents"]),
                (f"{s['removed']:,}", s["removed"]),
                (f"{s['removed_fraction']:.1%}", s["removed_fraction"]),
            ]
            for name, s in sorted(sources.items())
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""
    return (
        '<section class="by-source"><h3>Removals per source</h3>'
        + table(["source", "documents", "removed", "removed fraction"], rows, tid="removals-by-source")
        + "</section>"
    )


def duplicates_page(roots, index: int, rel: str, offset: int = 0, n: int = 20, doc_id: str | None = None) -> str:
    root, rel, full = roots.resolve(index, rel)
    crumbs = [("experiments", "/"), (rel, url_step(index, rel)), ("duplicates", None)]
    removed_path = posixpath.join(full, REMOVED_FILE)
    if not root.fs.exists(removed_path):
        body = error_box(f"{rel}: no {REMOVED_FILE} (not a finished dedup step?)")
        return page("duplicates", body, crumbs)
    if doc_id is not None:
        entries, nxt, at_end = _removed_lines(
            root.fs, removed_path, 0, 0, match=lambda e: str(e.get("id")) == doc_id or e.get("duplicate_of") == doc_id
        )
    else:
        entries, nxt, at_end = _removed_lines(root.fs, removed_path, offset, n)
    wanted = {str(e["id"]) for e in entries if e.get("id") is not None}
    wanted |= {str(e["duplicate_of"]) for e in entries if e.get("duplicate_of") is not None}
    if doc_id is not None:
        wanted.add(doc_id)
    source = _input_of(root, rel)
    docs, cut = _find_texts(root.fs, source, wanted) if source else ({}, False)
    out = []
    if source is None:
        out.append(error_box(f"{rel}: the step's input folder is not under this root; texts cannot be shown"))
    if cut:
        out.append(note(f"stopped after reading {SCAN_LIMIT >> 20} MiB of the input; some texts are not shown"))
    if doc_id is not None:
        removed_as = next((e for e in entries if str(e.get("id")) == doc_id), None)
        copies = [e for e in entries if e.get("duplicate_of") == doc_id]
        if removed_as is not None:
            keeper = str(removed_as.get("duplicate_of"))
            why = f" ({esc(removed_as.get('reason'))})"
            removed_box = _doc_box(index, rel, doc_id, docs.get(doc_id), "removed", why)
            out.append(f'<div class="pair">{removed_box}{_doc_box(index, rel, keeper, docs.get(keeper), "kept")}</div>')
        else:
            listing = ", ".join(
                f'<a href="/dups/{index}/{esc(rel)}?{esc(urlencode({"id": str(e.get("id"))}))}"><code>{esc(e.get("id"))}</code></a>'
                for e in copies
            )
            extra = f" · {len(copies)} removed as its duplicates: {listing}" if copies else " · no duplicates removed"
            out.append(_doc_box(index, rel, doc_id, docs.get(doc_id), "kept", extra))
            for e in copies:
                copy_id = str(e.get("id"))
                box = _doc_box(index, rel, copy_id, docs.get(copy_id), "removed", f" ({esc(e.get('reason'))})")
                out.append(f'<div class="pair">{box}</div>')
        title = f"document {doc_id}"
    else:
        if offset == 0:
            out.append(_removals_by_source(root.fs, full))
        for e in entries:
            removed_id = str(e.get("id")) if e.get("id") is not None else None
            keeper = str(e.get("duplicate_of")) if e.get("duplicate_of") is not None else None
            out.append(
                '<div class="pair">'
                + _doc_box(index, rel, removed_id, docs.get(removed_id or ""), "removed", f" ({esc(e.get('reason'))})")
                + _doc_box(index, rel, keeper, docs.get(keeper or ""), "kept")
                + "</div>"
            )
        if not at_end:
            out.append(
                f'<div class="pager"><a class="btn next" href="/dups/{index}/{esc(rel)}?offset={nxt}">next page ▶</a></div>'
            )
        title = "duplicates"
    head = (
        f'<div class="head"><h1>{esc(title)}</h1><div class="muted">removed documents of <code>{esc(rel)}</code> '
        f'beside the documents they duplicate · <a href="{esc(url_file(index, posixpath.join(rel, REMOVED_FILE)))}">'
        f"{REMOVED_FILE}</a></div></div>"
    )
    return page(title, head + "".join(out), crumbs)
