"""The S3 backend, through botocore (version = ETag).

`PutObject` takes `If-None-Match: *` (create) and `If-Match: <etag>` (replace) natively, and
`DeleteObject` takes `If-Match`. The client here has botocore's own retries switched off, for the
same reason as on GCS: a conditional put whose answer was lost and that is blindly retried comes back
412 and looks like a lost race although it won. Retries happen here instead, and every conditional
put carries a random `marin-write-id` in its metadata, which settles such an ambiguous outcome.

The version is the ETag, an MD5 of the content for single-part uploads: two writes of identical bytes
have the same version. The executor's conditional objects (leases with owner and heartbeat time,
append-only logs) never repeat their bytes, so this does not weaken them.

An object larger than one part goes up as a multipart upload (parts of at least 5 MiB, S3's minimum,
at most 10,000 of them); it exists only once `CompleteMultipartUpload` succeeded. An unfinished upload
(the writer was killed) is invisible to reads and listings, but S3 keeps its parts, billed, until it
is aborted: give the bucket a lifecycle rule `AbortIncompleteMultipartUpload`. Copies above the copy
part size go as `UploadPartCopy` parts (CopyObject stops at 5 GiB), in parallel.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from marin.storage import streams
from marin.storage.interface import Backend, VersionedBytes
from marin.storage.object_listing import files_below, names_under, split_object_path, versions_below
from marin.storage.retry import backoff_delays, is_transient, with_retries
from marin.storage.streams import ObjectChanged, PartWriter, RangeReader

WRITE_ID_KEY = "marin-write-id"
MIN_PART_BYTES = 5 * 1024 * 1024
"""S3 rejects parts below 5 MiB, except the last one of an upload."""
MAX_PARTS = 10_000
COPY_PARALLELISM = 8

_clients: dict[tuple, object] = {}
_clients_lock = threading.Lock()


def reset_clients() -> None:
    """Forgets the cached clients, so that a changed endpoint (AWS_ENDPOINT_URL) takes effect."""
    with _clients_lock:
        _clients.clear()


def _split(path: str) -> tuple[str, str]:
    return split_object_path(path, "an S3", "s3")


def _client():
    from marin.storage.paths import endpoint_for

    endpoint = endpoint_for("s3")
    token = (endpoint, os.getpid())
    client = _clients.get(token)
    if client is not None:
        return client
    with _clients_lock:
        if token not in _clients:
            import botocore.session
            from botocore.config import Config

            config = Config(
                retries={"total_max_attempts": 1},
                max_pool_connections=64,
                connect_timeout=10,
                read_timeout=300,
                s3={"addressing_style": "path"} if endpoint else None,
            )
            session = botocore.session.get_session()
            _clients[token] = session.create_client("s3", endpoint_url=endpoint, config=config)
        return _clients[token]


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def _is_answer(exc: BaseException, *statuses: int) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(exc, ClientError) and _status(exc) in statuses


def _head(path: str) -> dict | None:
    bucket, key = _split(path)

    def head():
        try:
            return _client().head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _is_answer(exc, 404):
                return None
            raise

    return with_retries(head, what=f"stat {path}")


def _put(path: str, data: bytes, **conditions) -> str | None:
    """Puts one object; with conditions, the new ETag or None when the precondition failed."""
    bucket, key = _split(path)
    write_id = uuid.uuid4().hex
    ambiguous = False
    delays = backoff_delays()
    while True:
        try:
            answer = _client().put_object(
                Bucket=bucket, Key=key, Body=data, Metadata={WRITE_ID_KEY: write_id}, **conditions
            )
            return answer["ETag"]
        except Exception as exc:
            if conditions and _is_answer(exc, 412, 404):
                break
            delay = next(delays, None)
            if not is_transient(exc) or delay is None:
                raise
            ambiguous = True
            time.sleep(delay)
    if ambiguous:
        head = _head(path)
        if head and head.get("Metadata", {}).get(WRITE_ID_KEY) == write_id:
            return head["ETag"]
    return None


def _body(data) -> bytes | bytearray:
    """botocore takes bytes or a bytearray, not a memoryview (a part sliced out of a large write)."""
    return data if isinstance(data, bytes | bytearray) else bytes(data)


class MultipartWriter(PartWriter):
    """Streams an object up: one PutObject when it fits one part, else a multipart upload."""

    def __init__(self, path: str, part_size: int):
        if part_size < MIN_PART_BYTES:
            raise ValueError(
                f"part size {part_size} for {path}: S3 parts must be at least 5 MiB "
                f"(MARIN_STORAGE_PART_BYTES or part_bytes=)"
            )
        super().__init__(path, part_size)
        self._bucket, self._key = _split(path)
        self._upload: str | None = None
        self._write_id = uuid.uuid4().hex
        self._etags: list[dict] = []

    def _put_whole(self, data) -> None:
        _put(self.path, _body(data))

    def _start(self) -> None:
        answer = with_retries(
            lambda: _client().create_multipart_upload(
                Bucket=self._bucket, Key=self._key, Metadata={WRITE_ID_KEY: self._write_id}
            ),
            what=f"start upload of {self.path}",
        )
        self._upload = answer["UploadId"]

    def _send_part(self, number: int, offset: int, data) -> None:
        data = _body(data)
        if number > MAX_PARTS:
            raise ValueError(f"{self.path}: more than {MAX_PARTS} parts; raise MARIN_STORAGE_PART_BYTES")
        answer = with_retries(  # a part sent twice under the same number simply replaces itself
            lambda: _client().upload_part(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload, PartNumber=number, Body=data
            ),
            what=f"upload part {number} of {self.path}",
        )
        self._etags.append({"PartNumber": number, "ETag": answer["ETag"]})

    def _finish(self, number: int, offset: int, data: bytes) -> None:
        self._send_part(number, offset, data)
        ambiguous, delays = False, backoff_delays()
        while True:
            try:
                _client().complete_multipart_upload(
                    Bucket=self._bucket, Key=self._key, UploadId=self._upload, MultipartUpload={"Parts": self._etags}
                )
                return
            except Exception as exc:
                if ambiguous and _is_answer(exc, 404):  # NoSuchUpload: did our lost answer complete it?
                    head = _head(self.path)
                    if head and head.get("Metadata", {}).get(WRITE_ID_KEY) == self._write_id:
                        return
                    raise
                delay = next(delays, None)
                if not is_transient(exc) or delay is None:
                    raise
                ambiguous = True
                time.sleep(delay)

    def _abort(self) -> None:
        if self._upload:
            _client().abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload)


class S3Backend(Backend):
    name = "s3"

    def read(self, path: str) -> bytes | None:
        found = self.read_with_version(path)
        return None if found is None else found.data

    def read_range(self, path: str, start: int, end: int, etag: str | None = None) -> bytes:
        if end <= start:
            return b""
        bucket, key = _split(path)
        conditions = {"IfMatch": etag} if etag else {}

        def get():
            try:
                answer = _client().get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **conditions)
            except Exception as exc:
                if _is_answer(exc, 404):
                    gone = ObjectChanged(f"{path} was deleted while being read") if etag else FileNotFoundError(path)
                    raise gone from None
                if _is_answer(exc, 412):
                    raise ObjectChanged(f"{path} was replaced while being read (ETag {etag})") from None
                raise
            return answer["Body"].read()

        return with_retries(get, what=f"read {path}")

    def write(self, path: str, data: bytes) -> None:
        with self.open_write(path) as f:
            f.write(data)

    def exists(self, path: str) -> bool:
        return _head(path) is not None or bool(self.list_names(path))

    def size(self, path: str) -> int | None:
        head = _head(path)
        return None if head is None else int(head["ContentLength"])

    def list_names(self, path: str) -> list[str]:
        return names_under(path, _list)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        return files_below(path, _list)

    def list_versions(self, path: str) -> list[tuple[str, str]]:
        return versions_below(path, _list)

    def delete(self, path: str, recursive: bool = False) -> None:
        if recursive:
            from marin.storage.paths import join

            below = [join(path, rel) for rel, _ in self.list_files(path)]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(self.delete, below))
        bucket, key = _split(path)
        with_retries(lambda: _client().delete_object(Bucket=bucket, Key=key), what=f"delete {path}")

    def open_read(self, path: str) -> BinaryIO:
        head = _head(path)
        if head is None:
            raise FileNotFoundError(path)
        etag = head["ETag"]
        raw = RangeReader(
            path,
            int(head["ContentLength"]),
            lambda start, end: self.read_range(path, start, end, etag),
            streams.read_bytes_per_request(),
        )
        return streams.buffered_reader(raw)

    def open_write(self, path: str, part_bytes: int | None = None) -> BinaryIO:
        return MultipartWriter(path, streams.part_bytes(part_bytes))

    def copy(self, source: str, target: str) -> bool:
        src_bucket, src_key = _split(source)
        bucket, key = _split(target)
        head = _head(source)
        if head is None:
            return False
        copy_source = {"Bucket": src_bucket, "Key": src_key}
        size, part = int(head["ContentLength"]), max(MIN_PART_BYTES, streams.copy_part_bytes())
        try:
            if size <= min(part, 5 * 1024**3):
                with_retries(
                    lambda: _client().copy_object(Bucket=bucket, Key=key, CopySource=copy_source),
                    what=f"copy {source} to {target}",
                )
            else:
                _copy_in_parts(copy_source, head["ETag"], bucket, key, size, min(part, 5 * 1024**3))
            return True
        except Exception as exc:
            if _is_answer(exc, 404):
                return False
            raise

    # conditional writes -----------------------------------------------------------------------------

    def read_with_version(self, path: str) -> VersionedBytes | None:
        bucket, key = _split(path)

        def get():
            try:
                answer = _client().get_object(Bucket=bucket, Key=key)
            except Exception as exc:
                if _is_answer(exc, 404):
                    return None
                raise
            return VersionedBytes(answer["Body"].read(), answer["ETag"])

        return with_retries(get, what=f"read {path}")

    def current_version(self, path: str) -> str | None:
        head = _head(path)  # the object's metadata only, not its bytes
        return None if head is None else head["ETag"]

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        return _put(path, data, IfNoneMatch="*")

    def replace_if_unchanged(self, path: str, data: bytes, version: str) -> str | None:
        return _put(path, data, IfMatch=version)

    def delete_if_unchanged(self, path: str, version: str) -> bool:
        bucket, key = _split(path)
        ambiguous = False
        delays = backoff_delays()
        while True:
            head = _head(path)
            if head is None:
                return ambiguous
            if head["ETag"] != version:
                return False
            try:
                _client().delete_object(Bucket=bucket, Key=key, IfMatch=version)
                return True
            except Exception as exc:
                if _is_answer(exc, 412):
                    return False
                if _is_answer(exc, 404):
                    return ambiguous
                delay = next(delays, None)
                if not is_transient(exc) or delay is None:
                    raise
                ambiguous = True
                time.sleep(delay)


def _copy_in_parts(copy_source: dict, etag: str, bucket: str, key: str, size: int, part: int) -> None:
    """A server-side copy as a multipart upload of UploadPartCopy parts, each pinned to the source's ETag."""
    client = _client()
    upload = with_retries(
        lambda: client.create_multipart_upload(Bucket=bucket, Key=key), what=f"start copy to s3://{bucket}/{key}"
    )["UploadId"]

    def copy_part(number_start: tuple[int, int]) -> dict:
        number, start = number_start
        end = min(size, start + part) - 1
        answer = with_retries(
            lambda: client.upload_part_copy(
                Bucket=bucket,
                Key=key,
                UploadId=upload,
                PartNumber=number,
                CopySource=copy_source,
                CopySourceRange=f"bytes={start}-{end}",
                CopySourceIfMatch=etag,
            ),
            what=f"copy part {number} to s3://{bucket}/{key}",
        )
        return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

    try:
        numbered = list(enumerate(range(0, size, part), start=1))
        with ThreadPoolExecutor(min(COPY_PARALLELISM, len(numbered))) as pool:
            parts = list(pool.map(copy_part, numbered))
        with_retries(
            lambda: client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
            ),
            what=f"complete copy to s3://{bucket}/{key}",
        )
    except BaseException:
        try:
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        except Exception:
            pass
        raise


def _list(path: str, delimiter: str | None) -> tuple[list[dict], list[str]]:
    bucket, key = _split(path.rstrip("/") + "/")
    kwargs = {"Bucket": bucket, "Prefix": key.rstrip("/") + "/"}
    if delimiter:
        kwargs["Delimiter"] = delimiter
    items: list[dict] = []
    prefixes: list[str] = []
    while True:
        page = with_retries(lambda: _client().list_objects_v2(**kwargs), what=f"list {path}")
        items += [{"name": o["Key"], "size": int(o["Size"]), "version": o["ETag"]} for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        if not page.get("IsTruncated"):
            return items, prefixes
        kwargs["ContinuationToken"] = page["NextContinuationToken"]
