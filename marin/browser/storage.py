"""The browser's only door to storage: roots, and paths that cannot leave them.

Every URL the browser serves names a root by its index and a path relative to it
(`/step/0/hello/data-0f3c2a1b`). `Roots.resolve` is the single function that turns
that pair into a filesystem path, and it refuses (``Forbidden``) before any byte is
read when the relative path could point elsewhere: `..` or `.` components, absolute
paths, backslashes, empty components, a scheme (`gs://other-bucket`), characters that
still decode (double-encoded `%252e`), control characters, or, on a local root, a
symlink whose target lies outside the root. Roots are any fsspec URL (a local folder,
`gs://bucket/prefix`, `s3://bucket/prefix`); nothing here writes.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

logger = logging.getLogger(__name__)

_SCHEME = re.compile(r"^([A-Za-z]:|[A-Za-z][A-Za-z0-9+.\-]*:(/|$))")


class Forbidden(Exception):
    """A path that is not under the requested root (or not a well-formed relative path)."""


@dataclass(frozen=True)
class Root:
    """One storage root the browser serves."""

    url: str
    """The root as the user gave it (`local_store`, `gs://bucket/lab`)."""
    fs: Any
    """The fsspec filesystem for it."""
    path: str
    """The root's path on `fs` (no protocol, no trailing slash; resolved through symlinks when local)."""

    @property
    def is_local(self) -> bool:
        return _is_local(self.fs)

    def join(self, rel: str) -> str:
        return f"{self.path}/{rel}" if rel else self.path

    def display(self, rel: str) -> str:
        """The URL a researcher would type for `rel` under this root."""
        base = self.url.rstrip("/")
        return f"{base}/{rel}" if rel else base


def _is_local(fs) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def check_relative(rel: str) -> str:
    """Return `rel` normalised (no trailing slash) or raise Forbidden naming why."""
    if rel is None:
        raise Forbidden("no path")
    if unquote(rel) != rel:
        raise Forbidden("percent-encoded characters in path")
    if any(ord(c) < 32 or c == "\x7f" for c in rel):
        raise Forbidden("control character in path")
    if "\\" in rel:
        raise Forbidden("backslash in path")
    if rel.startswith("/") or rel.startswith("~"):
        raise Forbidden("absolute path")
    if "://" in rel or _SCHEME.match(rel):
        raise Forbidden("another protocol or bucket")
    rel = rel.rstrip("/") if rel != "/" else rel
    if rel == "":
        return ""
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            raise Forbidden("'.', '..' or empty path component")
    return rel


class Roots:
    """The list of roots given on the command line, each opened once."""

    def __init__(self, urls: list[str], storage_options: dict[str, dict] | None = None):
        if not urls:
            raise ValueError("roots: give at least one folder or bucket to browse")
        import fsspec

        storage_options = storage_options or {}
        self.roots: list[Root] = []
        for url in urls:
            protocol = url.split("://", 1)[0] if "://" in url else "file"
            fs, path = fsspec.core.url_to_fs(url, **storage_options.get(protocol, {}))
            if _is_local(fs):
                path = os.path.realpath(path)
                if not os.path.isdir(path):
                    raise ValueError(f"root {url!r}: not a folder")
            path = path.rstrip("/") or "/"
            self.roots.append(Root(url=url, fs=fs, path=path))

    def __len__(self) -> int:
        return len(self.roots)

    def __iter__(self):
        return iter(self.roots)

    def get(self, index: int) -> Root:
        if not 0 <= index < len(self.roots):
            raise Forbidden(f"no root number {index}")
        return self.roots[index]

    def resolve(self, index: int, rel: str) -> tuple[Root, str, str]:
        """(root, normalised relative path, full path on root.fs), or Forbidden before any read."""
        root = self.get(index)
        rel = check_relative(rel)
        full = root.join(rel)
        if root.is_local:
            real = os.path.realpath(full)
            if real != root.path and not real.startswith(root.path.rstrip("/") + "/"):
                raise Forbidden("symlink out of the root")
        return root, rel, full

    def label(self, index: int) -> str:
        """A short name for the root (its lab): the fewest trailing path components that tell it from the others."""
        parts = [self._parts(r) for r in self.roots]
        mine = parts[index]
        for n in range(1, len(mine) + 1):
            tail = mine[-n:]
            if sum(1 for p in parts if p[-n:] == tail) == 1:
                return "/".join(tail)
        return self.get(index).url

    @staticmethod
    def _parts(root: Root) -> list[str]:
        where = root.url.split("://", 1)[1] if "://" in root.url else root.path
        return [p for p in where.split("/") if p] or [root.url]

    def locate(self, path: str) -> tuple[int, str] | None:
        """(root index, relative path) of a full path or URL under one of the roots, else None."""
        path = path.rstrip("/")
        for index, root in enumerate(self.roots):
            base = root.path if root.is_local and "://" not in path else root.url.rstrip("/")
            if root.is_local and "://" not in path:
                path_here = os.path.realpath(path) if os.path.exists(path) else path
            else:
                path_here = path
            if path_here == base:
                return index, ""
            if path_here.startswith(base + "/"):
                return index, path_here[len(base) + 1 :]
        return None

    def relative_of(self, index: int, full: str) -> str:
        """The inverse of `resolve` for paths that come from listing `root.fs`."""
        root = self.get(index)
        full = root.fs._strip_protocol(full).rstrip("/")
        if full == root.path:
            return ""
        prefix = root.path.rstrip("/") + "/"
        if not full.startswith(prefix):
            raise Forbidden(f"{full} is not under {root.path}")
        return full[len(prefix) :]


def read_bytes(fs, path: str, limit: int | None = None) -> bytes:
    """The first `limit` bytes of a file (the whole file when limit is None)."""
    if limit is None:
        return fs.cat_file(path)
    return fs.cat_file(path, start=0, end=limit)


def read_tail(fs, path: str, size: int, nbytes: int) -> tuple[bytes, int]:
    """The last `nbytes` of a file of known `size`, and the offset they start at."""
    start = max(0, size - nbytes)
    if size == 0:
        return b"", 0
    return fs.cat_file(path, start=start, end=size), start


def read_many(fs, paths: list[str]) -> dict[str, bytes | Exception]:
    """Read small files in one batch (concurrent on object stores); missing files map to an exception."""
    if not paths:
        return {}
    if _is_local(fs):
        out: dict[str, bytes | Exception] = {}
        for p in paths:
            try:
                with open(p, "rb") as f:
                    out[p] = f.read()
            except OSError as e:
                out[p] = e
        return out
    got = fs.cat(paths, on_error="return")
    if not isinstance(got, dict):
        got = {paths[0]: got}
    return {fs._strip_protocol(k): v for k, v in got.items()}


def list_dir(fs, path: str) -> list[dict]:
    """`fs.ls(path, detail=True)` without the cache (folders change under a running experiment)."""
    try:
        fs.invalidate_cache(path)
    except Exception:  # noqa: BLE001 - not every filesystem caches
        pass
    return fs.ls(path, detail=True)
