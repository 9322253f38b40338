"""Local inputs fingerprinted when a step runs, so that `marin plan` says when one changed since.

A step's hash names each plain input by its path (docs/design.md, "Identity"): the bytes behind the path
are not hashed, since that would mean reading a whole corpus to plan. So a corpus rewritten in place keeps
its steps' hashes, and they stay skipped as succeeded. To make that visible rather than silent, a step that
runs records, in its `.executor_info` under `input_fingerprints`, what each local input (a plain path on
this machine's file system, declared with `input_field`) was when the step started:

    "input_fingerprints": {"/data/web": {"kind": "folder", "files": 12, "bytes": 48213, "newest_mtime_ns": ...,
                                         "digest": "<sha256 of every file's relative path, size and mtime>"}}

(a file: its size and modification time). `marin plan` (and `--dry_run`) fingerprints them again for every
step that succeeded and prints a warning for each input that changed:

    WARNING: input changed since filtered/web-1a2b3c4d ran: /data/web (files 12 -> 13, bytes 48,213 -> 50,001);
    it is kept, as its hash names the path, not the bytes: delete its output folder to run it again

The step is not rerun by itself: the same hash must keep naming the same bytes. Sizes and modification
times are what `make` and `rsync` compare; a rewrite that keeps both (a copy with preserved times) is not
seen. Hidden files and folders inside an input folder are left out, as data steps never read them. Inputs
on a bucket (gs://, s3://) or a remote scheme are identified by their name only: write a new path for new
data (a version or a date in it).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
from collections.abc import Sequence
from typing import Any

from marin.storage import is_local, strip_protocol

KEY = "input_fingerprints"
"""The `.executor_info` field holding them."""


def fingerprint(path: str) -> dict | None:
    """What a local file or folder is now (None: absent or not local)."""
    if not is_local(path):
        return None
    local = strip_protocol(path)
    try:
        st = os.stat(local)
    except OSError:
        return None
    if not os.path.isdir(local):
        return {"kind": "file", "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    digest, files, size, newest = hashlib.sha256(), 0, 0, 0
    entries = []
    for dirpath, dirnames, filenames in os.walk(local):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            try:
                fst = os.stat(full)
            except OSError:
                continue
            entries.append((os.path.relpath(full, local), fst.st_size, fst.st_mtime_ns))
    for rel, nbytes, mtime in sorted(entries):
        digest.update(f"{rel}\0{nbytes}\0{mtime}\n".encode("utf-8", "surrogateescape"))
        files, size, newest = files + 1, size + nbytes, max(newest, mtime)
    return {"kind": "folder", "files": files, "bytes": size, "newest_mtime_ns": newest, "digest": digest.hexdigest()}


def input_fingerprints(config: Any) -> dict[str, dict]:
    """The fingerprint of every local plain input of an instantiated step config, by path."""
    from marin.execution.input_check import plain_inputs

    out = {}
    for _, _, path in plain_inputs(config):
        if path not in out and (found := fingerprint(path)) is not None:
            out[path] = found
    return out


def with_input_fingerprints(info, config: Any):
    """`info` (a StepInfo) with its config's local inputs fingerprinted now (unchanged when it has none)."""
    found = input_fingerprints(config)
    if not found:
        return info
    return dataclasses.replace(info, extra={**info.extra, KEY: found})


def describe_change(before: dict, now: dict | None) -> str:
    """What changed between two fingerprints of one input, in words."""
    if now is None:
        return "it is gone"
    if before.get("kind") != now.get("kind"):
        return f"a {before.get('kind')} then, a {now.get('kind')} now"
    parts = [
        f"{key} {_number(before.get(key))} -> {_number(now[key])}"
        for key in ("files", "bytes")
        if key in now and before.get(key) != now[key]
    ]
    mtime_key = "mtime_ns" if now["kind"] == "file" else "newest_mtime_ns"
    if before.get(mtime_key) != now.get(mtime_key):
        parts.append(f"modified {_when(now.get(mtime_key))}")
    return ", ".join(parts) or "its files' names or times changed"


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _when(mtime_ns: Any) -> str:
    if not isinstance(mtime_ns, int):
        return "at another time"
    return datetime.datetime.fromtimestamp(mtime_ns / 1e9, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def changed_input_lines(decisions: Sequence[Any]) -> list[str]:
    """For `marin plan`: one warning per local input that changed since a succeeded step recorded it."""
    from marin.execution.status import read_infos
    from marin.storage.layout import State

    done = [d.planned for d in decisions if d.state == State.SUCCESS]
    lines = []
    for planned, info in zip(done, read_infos([p.output_path for p in done]), strict=True):
        recorded = (info or {}).get(KEY)
        if not isinstance(recorded, dict):
            continue
        for path, before in sorted(recorded.items()):
            now = fingerprint(path)
            if not isinstance(before, dict) or now == before:
                continue
            lines.append(
                f"WARNING: input changed since {planned.relative_output_path} ran: {path} "
                f"({describe_change(before, now)}); it is kept, as its hash names the path, not the bytes: "
                "delete its output folder to run it again"
            )
    return lines
