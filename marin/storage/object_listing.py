"""What GCS and S3 share: object paths as (bucket, key), and folder listings built from a paged
`list(path, delimiter) -> (objects, prefixes)` that each store's module implements over its own API."""

from __future__ import annotations

from collections.abc import Callable

ListPages = Callable[[str, str | None], tuple[list[dict], list[str]]]


def split_object_path(path: str, store: str, scheme: str) -> tuple[str, str]:
    """`scheme://bucket/key` -> (bucket, key); a ValueError names the path otherwise."""
    bare = path.split("://", 1)[1] if "://" in path else path
    bucket, _, key = bare.partition("/")
    if not bucket or not key:
        raise ValueError(f"not {store} object path ({scheme}://bucket/key): {path!r}")
    return bucket, key


def _folder_key(path: str) -> str:
    bare = path.rstrip("/").split("://", 1)[-1]
    _, _, key = bare.partition("/")
    return key + "/" if key else ""


def files_below(path: str, list_pages: ListPages) -> list[tuple[str, int]]:
    """(path relative to `path`, size) of every object below the folder `path`."""
    base = _folder_key(path)
    items, _ = list_pages(path, None)
    return [(o["name"][len(base) :], o["size"]) for o in items if not o["name"].endswith("/")]


def versions_below(path: str, list_pages: ListPages) -> list[tuple[str, str]]:
    """(path relative to `path`, version token) of every object below the folder `path`."""
    base = _folder_key(path)
    items, _ = list_pages(path, None)
    return [(o["name"][len(base) :], o["version"]) for o in items if not o["name"].endswith("/")]


def names_under(path: str, list_pages: ListPages) -> list[str]:
    """Names of the objects and sub-folders directly under the folder `path`."""
    base = _folder_key(path)
    items, prefixes = list_pages(path, "/")
    names = {o["name"][len(base) :] for o in items} | {p[len(base) :].rstrip("/") for p in prefixes}
    return sorted(n for n in names if n)
