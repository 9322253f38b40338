"""Search, filter and sample the documents of a jsonl shard, streaming, with a bound on what one page reads.

A researcher looking at a filtered or deduplicated shard wants the documents that mention a word, the
ones whose metadata says `source=wiki`, or a fair random handful, not the first fifty. All three read
the shard as a stream (gzip and zstd too) from a byte offset and stop at `SCAN_LIMIT` uncompressed bytes
per request: a search that has not found a page of matches by then shows what it found and a link that
continues from where it stopped, and a sample says how much of the shard it was drawn from. The sample is
reservoir sampling with a seed in the query, so a link to a sample shows the same documents to everyone.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from marin.browser.html import esc, flatten, fmt_size

SCAN_LIMIT = 256 << 20
"""Uncompressed bytes one search or sample request reads at most."""
TEXT_FIELDS = ("text", "content", "document")


@dataclass(frozen=True)
class DocQuery:
    """What to show of a jsonl shard; from the file page's query (`?q=fox&where=source=wiki&sample=20`)."""

    text: str = ""
    """Case-insensitive substring of the document's text (the whole line when it has no text field)."""
    where: tuple[tuple[str, str], ...] = ()
    """Fields (dotted: `metadata.lang`) that must equal the given values, compared as text."""
    sample: int = 0
    """Show this many documents drawn at random instead of a page of consecutive lines."""
    seed: int = 0
    """Seed of that draw."""

    @property
    def active(self) -> bool:
        return bool(self.text or self.where or self.sample)

    @staticmethod
    def parse(text: str | None, where: str | None, sample: str | None, seed: str | None) -> DocQuery:
        """Parse the query's strings; bad ones raise ValueError naming the parameter."""
        conditions = []
        for part in (where or "").split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"where: {part.strip()!r} is not FIELD=VALUE")
            key, value = part.split("=", 1)
            conditions.append((key.strip(), value.strip()))
        try:
            n = int(sample) if sample else 0
            s = int(seed) if seed else 0
        except ValueError:
            raise ValueError(f"sample and seed must be whole numbers, got {sample!r} and {seed!r}") from None
        if not 0 <= n <= 1000:
            raise ValueError(f"sample must be between 0 and 1000, got {n}")
        return DocQuery((text or "").strip(), tuple(conditions), n, s)

    def matches(self, raw: bytes, obj: Any) -> bool:
        if self.text:
            body = next((obj[k] for k in TEXT_FIELDS if isinstance(obj, dict) and isinstance(obj.get(k), str)), None)
            haystack = body if body is not None else raw.decode("utf-8", "replace")
            if self.text.lower() not in haystack.lower():
                return False
        if self.where:
            flat = flatten(obj) if isinstance(obj, dict) else {}
            for key, value in self.where:
                have = flat.get(key)
                if have is None or (have if isinstance(have, str) else json.dumps(have)) != value:
                    return False
        return True


@dataclass
class Scan:
    lines: list[tuple[int, Any, str | None]]
    """(byte offset, parsed document, error) of what is shown, in file order."""
    next_offset: int
    """Where a continued search starts."""
    scanned: int
    """Uncompressed bytes read."""
    seen: int
    """Lines read."""
    at_end: bool
    """The whole rest of the file was read."""


def scan(fs, path: str, query: DocQuery, offset: int, n: int, limit: int = SCAN_LIMIT) -> Scan:
    """Search/filter (a page of `n` matches from `offset`) or sample (`query.sample` lines) a jsonl shard."""
    from marin.browser.previews import MAX_LINE, _Lines, _open_stream, compression_of, skip_to

    compression = compression_of(path)
    stream, raw = _open_stream(fs, path, compression)
    rng = random.Random(query.seed)
    found: list[tuple[int, Any, str | None]] = []
    reservoir: list[tuple[int, bytes]] = []
    seen = 0
    try:
        skip_to(stream, offset, compression is not None)
        reader = _Lines(stream)
        pos = offset
        while pos - offset < limit:
            line = reader.readline(MAX_LINE)
            if not line:
                break
            start, pos = pos, pos + len(line)
            if not line.strip():
                continue
            seen += 1
            if query.sample:
                if len(reservoir) < query.sample:
                    reservoir.append((start, line))
                else:
                    k = rng.randrange(seen)
                    if k < query.sample:
                        reservoir[k] = (start, line)
                continue
            if query.text and query.text.lower().encode() not in line.lower() and b"\\" not in line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if query.matches(line, obj):
                found.append((start, obj, None))
                if len(found) >= n:
                    break
        at_end = reader.at_end()
    finally:
        stream.close()
        if raw is not stream:
            raw.close()
    if query.sample:
        for start, line in sorted(reservoir):
            try:
                found.append((start, json.loads(line), None))
            except ValueError as e:
                found.append((start, line[:2000].decode("utf-8", "replace"), f"not valid JSON: {e}"))
    return Scan(found, pos, pos - offset, seen, at_end)


def describe(result: Scan, query: DocQuery) -> str:
    """One line saying what the page shows and how much of the shard it read."""
    read = f"{fmt_size(result.scanned)} ({result.seen:,} lines) read"
    if query.sample:
        whole = "the whole shard" if result.at_end else f"the first {read}"
        return f"{len(result.lines)} documents drawn at random (seed {query.seed}) from {esc(whole)}"
    what = []
    if query.text:
        what.append(f"containing “{esc(query.text)}”")
    what += [f"{esc(k)} = {esc(v)}" for k, v in query.where]
    more = "" if result.at_end else "; more may follow"
    return f"{len(result.lines)} documents {' and '.join(what)}; {esc(read)}{more}"
