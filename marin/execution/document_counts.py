"""What a data step kept and removed, for the end-of-run summary.

A step that keeps some of its input documents and removes the rest (filter, dedup, quality_filter,
decontaminate) writes `stats.json` at the top of its output with whole numbers `documents`, `kept` and
`removed`. The summary shows them beside the step, so a filter that kept 2 of 200 documents is seen when
the run ends, not when someone opens its folder:

      SUCCESS          3.1s  filtered/web-1a2b3c4d  kept 2 of 200 documents (198 removed)

The executor knows no step in particular: any step whose `stats.json` has those three numbers gets the
note, and a step without one (or with another shape) gets none.
"""

from __future__ import annotations

import json

from marin.storage import join, read_bytes_many

STATS_FILE = "stats.json"


def kept_removed_notes(output_paths: list[str]) -> dict[str, str]:
    """`output path -> "  kept K of N documents (R removed)"` for the steps whose stats.json says so, read at once."""
    if not output_paths:
        return {}
    try:
        raws = read_bytes_many([join(path, STATS_FILE) for path in output_paths])
    except OSError:
        return {}
    notes = {}
    for path, raw in zip(output_paths, raws, strict=True):
        note = _note(raw)
        if note:
            notes[path] = note
    return notes


def _note(raw: bytes | None) -> str | None:
    if raw is None or len(raw) > 1 << 22:
        return None
    try:
        stats = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(stats, dict):
        return None
    documents, kept, removed = (stats.get(k) for k in ("documents", "kept", "removed"))
    if not all(type(v) is int for v in (documents, kept, removed)):
        return None
    return f"  kept {kept:,} of {documents:,} documents ({removed:,} removed)"
