"""GCS objects through the JSON API: conditional writes (version = generation) and fast plain ops.

gcsfs has no conditional replace and retries failed requests itself (1 s and more between tries), which
is both slow under faults and unsafe for conditional writes: a create whose answer is lost, retried,
comes back 412 and looks like a lost race although it won. So these calls go straight to the JSON API
on gcsfs's own aiohttp session (same credentials, same emulator endpoint) and retry only here:

- every conditional upload is a multipart upload with `ifGenerationMatch` (0 = create) and carries a
  random `marin-write-id` in its metadata. When an attempt failed without an answer and a later one
  gets 412, the object's metadata says whether the earlier attempt in fact won;
- a precondition failure is an answer, never retried;
- `delete_if_unchanged` reads the generation first, then deletes with `ifGenerationMatch`. Real GCS
  enforces that precondition; fake-gcs-server ignores preconditions on deletes, so there a delete can
  race with a concurrent replace between the read and the delete. The lease protocol tolerates that:
  the other runner's next heartbeat then fails its precondition and it stops (safe, not live).
"""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import quote

from marin.storage.conditional import VersionedBytes
from marin.storage.object_listing import files_below, names_under, split_object_path, versions_below
from marin.storage.retry import HTTPStatusError, backoff_delays, is_transient, with_retries

WRITE_ID_KEY = "marin-write-id"
REQUEST_TIMEOUT_S = 60


def _split(path: str) -> tuple[str, str]:
    return split_object_path(path, "a GCS", "gs")


def _fs():
    from marin.storage.paths import filesystem

    return filesystem("gs://")


def _urls(path: str) -> tuple[str, str, str]:
    """(metadata URL, media URL, upload URL) of an object."""
    fs = _fs()
    bucket, key = _split(path)
    loc = fs._location.rstrip("/")
    meta = f"{loc}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
    media = f"{loc}/download/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}?alt=media"
    upload = f"{loc}/upload/storage/v1/b/{quote(bucket, safe='')}/o"
    return meta, media, upload


async def _send(fs, method: str, url: str, params, headers, data):
    import aiohttp

    await fs._set_session()
    async with fs.session.request(
        method,
        url,
        params=params,
        headers=fs._get_headers(headers),
        data=data,
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
    ) as r:
        body = await r.read()
        return r.status, dict(r.headers), body


def _request(method: str, url: str, params=None, headers=None, data=None, ok=(200,)) -> tuple[int, dict, bytes]:
    """One HTTP request, no retry; a transient status raises HTTPStatusError, others are returned."""
    from fsspec.asyn import sync

    fs = _fs()
    status, out_headers, body = sync(fs.loop, _send, fs, method, url, params, headers, data)
    if status in ok or status in (404, 412):
        return status, out_headers, body
    raise HTTPStatusError(status, f"{method} {url}: {body[:300].decode('utf-8', 'replace')}")


def _metadata(path: str) -> dict | None:
    meta_url, _, _ = _urls(path)
    status, _, body = with_retries(lambda: _request("GET", meta_url), what=f"stat {path}")
    return json.loads(body) if status == 200 else None


def _multipart(key: str, data: bytes, metadata: dict) -> tuple[bytes, str]:
    boundary = f"marin-{uuid.uuid4().hex}"
    head = json.dumps({"name": key, "metadata": metadata}).encode()
    body = b"".join(
        [
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            head,
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    return body, f'multipart/related; boundary="{boundary}"'


def _upload(path: str, data: bytes, if_generation_match: str | None) -> str | None:
    """Uploads one object; with a precondition, the new generation or None when it failed."""
    _, _, upload_url = _urls(path)
    _, key = _split(path)
    write_id = uuid.uuid4().hex
    body, content_type = _multipart(key, data, {WRITE_ID_KEY: write_id})
    params = {"uploadType": "multipart"}
    if if_generation_match is not None:
        params["ifGenerationMatch"] = if_generation_match
    ambiguous = False
    delays = backoff_delays()
    while True:
        try:
            status, _, answer = _request(
                "POST", upload_url, params=params, headers={"Content-Type": content_type}, data=body
            )
        except Exception as exc:
            delay = next(delays, None)
            if not is_transient(exc) or delay is None:
                raise
            ambiguous = True
            time.sleep(delay)
            continue
        if status == 200:
            return str(json.loads(answer)["generation"])
        if status == 404 and if_generation_match is None:
            raise FileNotFoundError(f"bucket of {path} does not exist")
        # 412 (or 404: a replace of a deleted object): the precondition failed, unless our own earlier
        # attempt, whose answer was lost, is what changed the generation.
        if ambiguous:
            meta = _metadata(path)
            if meta and (meta.get("metadata") or {}).get(WRITE_ID_KEY) == write_id:
                return str(meta["generation"])
        return None


def read_with_version(path: str) -> VersionedBytes | None:
    _, media_url, _ = _urls(path)
    status, headers, body = with_retries(lambda: _request("GET", media_url), what=f"read {path}")
    if status != 200:
        return None
    generation = headers.get("X-Goog-Generation") or headers.get("x-goog-generation")
    if generation is None:
        meta = _metadata(path)
        if meta is None:
            return None
        generation = meta["generation"]
    return VersionedBytes(body, str(generation))


def create_if_absent(path: str, data: bytes) -> str | None:
    return _upload(path, data, "0")


def replace_if_unchanged(path: str, data: bytes, version: str) -> str | None:
    if version == "0":
        raise ValueError(f"version '0' means absent on GCS; use create_if_absent for {path}")
    return _upload(path, data, version)


def delete_if_unchanged(path: str, version: str) -> bool:
    meta_url, _, _ = _urls(path)
    ambiguous = False
    delays = backoff_delays()
    while True:
        meta = _metadata(path)
        if meta is None:
            return ambiguous
        if str(meta["generation"]) != version:
            return False
        try:
            status, _, _ = _request("DELETE", meta_url, params={"ifGenerationMatch": version}, ok=(200, 204))
        except Exception as exc:
            delay = next(delays, None)
            if not is_transient(exc) or delay is None:
                raise
            ambiguous = True
            time.sleep(delay)
            continue
        if status in (200, 204):
            return True
        return ambiguous and status == 404


def read_object(path: str) -> bytes | None:
    """Plain read in one request; None when absent."""
    _, media_url, _ = _urls(path)
    status, _, body = with_retries(lambda: _request("GET", media_url), what=f"read {path}")
    return body if status == 200 else None


def write_object(path: str, data: bytes) -> None:
    """Plain overwrite in one multipart upload (idempotent, so retried freely)."""
    _upload(path, data, None)


def object_exists(path: str) -> bool:
    return _metadata(path) is not None


def delete_object(path: str) -> None:
    """Deletes one object; a missing one is fine."""
    meta_url, _, _ = _urls(path)
    with_retries(lambda: _request("DELETE", meta_url, ok=(200, 204)), what=f"delete {path}")


def _list(path: str, delimiter: str | None) -> tuple[list[dict], list[str]]:
    """Objects (name, size) and sub-prefixes under the folder `path`, all pages."""
    fs = _fs()
    bucket, key = _split(path.rstrip("/") + "/")
    url = f"{fs._location.rstrip('/')}/storage/v1/b/{quote(bucket, safe='')}/o"
    params = {"prefix": key.rstrip("/") + "/"}
    if delimiter:
        params["delimiter"] = delimiter
    items: list[dict] = []
    prefixes: list[str] = []
    while True:
        status, _, body = with_retries(lambda: _request("GET", url, params=dict(params)), what=f"list {path}")
        if status != 200:
            return items, prefixes
        page = json.loads(body)
        items += [
            {"name": o["name"], "size": int(o.get("size", 0)), "version": str(o.get("generation"))}
            for o in page.get("items", [])
        ]
        prefixes += page.get("prefixes", [])
        if not page.get("nextPageToken"):
            return items, prefixes
        params["pageToken"] = page["nextPageToken"]


def list_files(path: str) -> list[tuple[str, int]]:
    """(path relative to `path`, size) of every object below the folder `path`."""
    return files_below(path, _list)


def list_versions(path: str) -> list[tuple[str, str]]:
    """(path relative to `path`, generation) of every object below the folder `path`."""
    return versions_below(path, _list)


def list_names(path: str) -> list[str]:
    """Names of the objects and sub-folders directly under the folder `path`."""
    return names_under(path, _list)


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of an object."""
    _, media_url, _ = _urls(path)
    headers = {"Range": f"bytes={start}-{end - 1}"}
    status, _, body = with_retries(
        lambda: _request("GET", media_url, headers=headers, ok=(200, 206)), what=f"read {path}"
    )
    if status == 404:
        raise FileNotFoundError(path)
    return body[start:end] if status == 200 else body


def copy_object(source: str, target: str) -> bool:
    """Server-side copy (the bytes never pass through this host); False when `source` does not exist.

    `rewriteTo` may need several calls for a large object (each returns a token to continue with).
    """
    src_meta, _, _ = _urls(source)
    dst_bucket, dst_key = _split(target)
    url = f"{src_meta}/rewriteTo/b/{quote(dst_bucket, safe='')}/o/{quote(dst_key, safe='')}"
    params: dict = {}
    while True:
        status, _, body = with_retries(
            lambda p=dict(params): _request(
                "POST", url, params=p, headers={"Content-Type": "application/json"}, data=b"{}"
            ),
            what=f"copy {source} to {target}",
        )
        if status == 404:
            return False
        answer = json.loads(body)
        if answer.get("done", True):
            return True
        params["rewriteToken"] = answer["rewriteToken"]
