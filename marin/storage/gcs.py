"""The GCS backend, straight on the JSON API (version = object generation).

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
  the other runner's next heartbeat then fails its precondition and it stops (safe, not live);
- an object larger than one part goes up as a resumable upload: chunks of the part size (a multiple of
  256 KiB), the last one carrying the total size, which finalizes the object. A chunk that fails is
  resent from the offset the session reports as persisted. An unfinished session is invisible and
  expires after a week;
- reads of large objects are ranged GETs of the generation first seen (`generation=`): once the object
  is replaced or deleted they fail with ObjectChanged instead of mixing two versions;
- copies are `rewriteTo` calls, several for a large object (each returns a token to continue with).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import BinaryIO
from urllib.parse import quote

from marin.storage import streams
from marin.storage.interface import Backend, VersionedBytes
from marin.storage.object_listing import files_below, names_under, split_object_path, versions_below
from marin.storage.retry import HTTPStatusError, backoff_delays, is_transient, with_retries
from marin.storage.streams import ObjectChanged, PartWriter, RangeReader

WRITE_ID_KEY = "marin-write-id"
REQUEST_TIMEOUT_S = 300
CHUNK_MULTIPLE = 256 * 1024
"""GCS resumable uploads take chunks in multiples of 256 KiB (all but the last)."""


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
        allow_redirects=False,  # a resumable upload answers 308 for "chunk persisted", not a redirect
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
    """Uploads one object in one request; with a precondition, the new generation or None when it failed."""
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


class ResumableWriter(PartWriter):
    """Streams an object up: one multipart upload when it fits one part, else a resumable session."""

    def __init__(self, path: str, part_size: int):
        if part_size % CHUNK_MULTIPLE:
            raise ValueError(
                f"part size {part_size} for {path}: GCS resumable chunks must be multiples of 256 KiB "
                f"(MARIN_STORAGE_PART_BYTES or part_bytes=)"
            )
        super().__init__(path, part_size)
        self._session: str | None = None
        self._write_id = uuid.uuid4().hex

    def _put_whole(self, data) -> None:
        _upload(self.path, data, None)

    def _start(self) -> None:
        _, _, upload_url = _urls(self.path)
        _, key = _split(self.path)
        body = json.dumps({"name": key, "metadata": {WRITE_ID_KEY: self._write_id}}).encode()
        headers = {
            "Content-Type": "application/json; charset=UTF-8",
            "X-Upload-Content-Type": "application/octet-stream",
        }
        status, answer_headers, answer = with_retries(
            lambda: _request("POST", upload_url, params={"uploadType": "resumable"}, headers=headers, data=body),
            what=f"start upload of {self.path}",
        )
        if status != 200:
            raise FileNotFoundError(f"could not start an upload of {self.path}: HTTP {status} {answer[:200]!r}")
        self._session = answer_headers.get("Location") or answer_headers.get("location")

    def _persisted(self, total: str) -> int | None:
        """Bytes the session holds (None once the object is finalized)."""
        status, headers, _ = with_retries(
            lambda: _request("PUT", self._session, headers={"Content-Range": f"bytes */{total}"}, ok=(200, 201, 308)),
            what=f"query upload of {self.path}",
        )
        if status in (200, 201):
            return None
        if status != 308:
            raise FileNotFoundError(f"upload session of {self.path} is gone (HTTP {status})")
        return _held(headers)

    def _put_chunk(self, offset: int, data: bytes, total: str) -> None:
        """Sends bytes [offset, offset+len) of the object, resuming from what the session persisted.

        GCS may persist less than a chunk it acknowledged with 308 (its Range header says how much):
        the rest is sent again, as after a failed request.
        """
        sent, delays, end, stalls = offset, backoff_delays(), offset + len(data), 0
        view = memoryview(data)
        while True:
            chunk = view[sent - offset :]
            headers = {"Content-Range": f"bytes {sent}-{sent + len(chunk) - 1}/{total}"}
            try:
                status, answer_headers, answer = _request(
                    "PUT", self._session, headers=headers, data=chunk, ok=(200, 201, 308)
                )
            except Exception as exc:
                delay = next(delays, None)
                if not is_transient(exc) or delay is None:
                    raise
                time.sleep(delay)
                held = self._persisted(total)
            else:
                if status in (200, 201):
                    return
                if status != 308:
                    raise FileNotFoundError(f"upload session of {self.path} is gone (HTTP {status}: {answer[:200]!r})")
                held = _held(answer_headers)
            if held is None:
                if total == "*":
                    raise OSError(f"upload session of {self.path} was finalized before its last chunk")
                return
            if held < offset:
                raise OSError(f"upload session of {self.path} lost bytes it had acknowledged ({held} < {offset})")
            if held >= end:
                if total == "*" or self._persisted(total) is None:  # an empty PUT with the total finalizes
                    return
                raise OSError(f"upload of {self.path} holds all {total} bytes but was not finalized")
            stalls = stalls + 1 if held <= sent else 0
            if stalls > 8:
                raise OSError(f"upload of {self.path} makes no progress at byte {held}")
            sent = held

    def _send_part(self, number: int, offset: int, data: bytes) -> None:
        self._put_chunk(offset, data, "*")

    def _finish(self, number: int, offset: int, data: bytes) -> None:
        try:
            self._put_chunk(offset, data, str(offset + len(data)))
        except FileNotFoundError:
            # the session is gone: it is, if our last chunk landed and only its answer was lost
            meta = _metadata(self.path) or {}
            ours = (meta.get("metadata") or {}).get(WRITE_ID_KEY) == self._write_id
            if not (ours and int(meta.get("size", -1)) == offset + len(data)):
                raise

    def _abort(self) -> None:
        if self._session:
            _request("DELETE", self._session, ok=(200, 204, 499))


def _held(headers: dict) -> int:
    """Bytes persisted by a resumable session, from the Range header of its 308 answer."""
    held = headers.get("Range") or headers.get("range")
    return int(held.rsplit("-", 1)[1]) + 1 if held else 0


class GcsBackend(Backend):
    name = "gs"

    def read(self, path: str) -> bytes | None:
        _, media_url, _ = _urls(path)
        status, _, body = with_retries(lambda: _request("GET", media_url), what=f"read {path}")
        return body if status == 200 else None

    def read_range(self, path: str, start: int, end: int, generation: str | None = None) -> bytes:
        if end <= start:
            return b""
        _, media_url, _ = _urls(path)
        headers = {"Range": f"bytes={start}-{end - 1}"}
        params = {"generation": generation} if generation else None
        status, _, body = with_retries(
            lambda: _request("GET", media_url, params=params, headers=headers, ok=(200, 206)), what=f"read {path}"
        )
        if status == 404:
            if generation:
                raise ObjectChanged(f"{path} was replaced or deleted while being read (generation {generation})")
            raise FileNotFoundError(path)
        if status == 412:
            raise ObjectChanged(f"{path} was replaced while being read (generation {generation})")
        return body[start:end] if status == 200 else body

    def write(self, path: str, data: bytes) -> None:
        with self.open_write(path) as f:
            f.write(data)

    def exists(self, path: str) -> bool:
        return _metadata(path) is not None or bool(self.list_names(path))

    def size(self, path: str) -> int | None:
        meta = _metadata(path)
        return None if meta is None else int(meta.get("size", 0))

    def list_names(self, path: str) -> list[str]:
        return names_under(path, _list)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        return files_below(path, _list)

    def list_versions(self, path: str) -> list[tuple[str, str]]:
        return versions_below(path, _list)

    def delete(self, path: str, recursive: bool = False) -> None:
        if recursive:
            from concurrent.futures import ThreadPoolExecutor

            from marin.storage.paths import join

            below = [join(path, rel) for rel, _ in self.list_files(path)]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(self.delete, below))
        meta_url, _, _ = _urls(path)
        with_retries(lambda: _request("DELETE", meta_url, ok=(200, 204)), what=f"delete {path}")

    def open_read(self, path: str) -> BinaryIO:
        meta = _metadata(path)
        if meta is None:
            raise FileNotFoundError(path)
        generation = str(meta["generation"])
        raw = RangeReader(
            path,
            int(meta.get("size", 0)),
            lambda start, end: self.read_range(path, start, end, generation),
            streams.read_bytes_per_request(),
        )
        return streams.buffered_reader(raw)

    def open_write(self, path: str, part_bytes: int | None = None) -> BinaryIO:
        _split(path)
        return ResumableWriter(path, streams.part_bytes(part_bytes))

    def copy(self, source: str, target: str) -> bool:
        src_meta, _, _ = _urls(source)
        dst_bucket, dst_key = _split(target)
        url = f"{src_meta}/rewriteTo/b/{quote(dst_bucket, safe='')}/o/{quote(dst_key, safe='')}"
        # per call, GCS copies at most this much (a multiple of 1 MiB) before handing back a token
        params: dict = {"maxBytesRewrittenPerCall": str(max(1, streams.copy_part_bytes() >> 20) << 20)}
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

    # conditional writes -----------------------------------------------------------------------------

    def read_with_version(self, path: str) -> VersionedBytes | None:
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

    def current_version(self, path: str) -> str | None:
        meta = _metadata(path)  # the object's metadata only, not its bytes
        return None if meta is None else str(meta["generation"])

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        return _upload(path, data, "0")

    def replace_if_unchanged(self, path: str, data: bytes, version: str) -> str | None:
        if version == "0":
            raise ValueError(f"version '0' means absent on GCS; use create_if_absent for {path}")
        return _upload(path, data, version)

    def delete_if_unchanged(self, path: str, version: str) -> bool:
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


def _list(path: str, delimiter: str | None) -> tuple[list[dict], list[str]]:
    """Objects (name, size, generation) and sub-prefixes under the folder `path`, all pages."""
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
