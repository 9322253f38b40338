"""S3 objects through botocore: conditional writes (version = ETag) and fast plain ops.

`PutObject` takes `If-None-Match: *` (create) and `If-Match: <etag>` (replace) natively, and
`DeleteObject` takes `If-Match`. The client here has botocore's own retries switched off, for the
same reason as on GCS: a conditional put whose answer was lost and that is blindly retried comes back
412 and looks like a lost race although it won. Retries happen here instead, and every conditional
put carries a random `marin-write-id` in its metadata, which settles such an ambiguous outcome.

The version is the ETag, an MD5 of the content for single-part uploads: two writes of identical bytes
have the same version. The executor's conditional objects (leases with owner and heartbeat time,
append-only logs) never repeat their bytes, so this does not weaken them.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

from marin.storage.conditional import VersionedBytes
from marin.storage.object_listing import files_below, names_under, split_object_path, versions_below
from marin.storage.retry import backoff_delays, is_transient, with_retries

WRITE_ID_KEY = "marin-write-id"

_clients: dict[tuple, object] = {}
_clients_lock = threading.Lock()


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
                read_timeout=60,
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


def read_with_version(path: str) -> VersionedBytes | None:
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


def create_if_absent(path: str, data: bytes) -> str | None:
    return _put(path, data, IfNoneMatch="*")


def replace_if_unchanged(path: str, data: bytes, version: str) -> str | None:
    return _put(path, data, IfMatch=version)


def delete_if_unchanged(path: str, version: str) -> bool:
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


def read_object(path: str) -> bytes | None:
    found = read_with_version(path)
    return None if found is None else found.data


def write_object(path: str, data: bytes) -> None:
    _put(path, data)


def object_exists(path: str) -> bool:
    return _head(path) is not None


def delete_object(path: str) -> None:
    bucket, key = _split(path)
    with_retries(lambda: _client().delete_object(Bucket=bucket, Key=key), what=f"delete {path}")


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


def list_files(path: str) -> list[tuple[str, int]]:
    """(path relative to `path`, size) of every object below the folder `path`."""
    return files_below(path, _list)


def list_versions(path: str) -> list[tuple[str, str]]:
    """(path relative to `path`, ETag) of every object below the folder `path`."""
    return versions_below(path, _list)


def list_names(path: str) -> list[str]:
    """Names of the objects and sub-folders directly under the folder `path`."""
    return names_under(path, _list)


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of an object."""
    bucket, key = _split(path)

    def get():
        answer = _client().get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        return answer["Body"].read()

    return with_retries(get, what=f"read {path}")


COPY_PART_BYTES = 1 << 30
"""S3 copies an object of up to 5 GiB in one `CopyObject`; larger ones go in parts of this size."""


def copy_object(source: str, target: str) -> bool:
    """Server-side copy (the bytes never pass through this host); False when `source` does not exist."""
    src_bucket, src_key = _split(source)
    bucket, key = _split(target)
    head = _head(source)
    if head is None:
        return False
    copy_source = {"Bucket": src_bucket, "Key": src_key}
    try:
        if int(head["ContentLength"]) <= 5 * 1024**3:
            with_retries(
                lambda: _client().copy_object(Bucket=bucket, Key=key, CopySource=copy_source),
                what=f"copy {source} to {target}",
            )
            return True
        _copy_in_parts(copy_source, bucket, key, int(head["ContentLength"]))
        return True
    except Exception as exc:
        if _is_answer(exc, 404):
            return False
        raise


def _copy_in_parts(copy_source: dict, bucket: str, key: str, size: int) -> None:
    client = _client()
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    try:
        for number, start in enumerate(range(0, size, COPY_PART_BYTES), start=1):
            end = min(size, start + COPY_PART_BYTES) - 1
            answer = with_retries(
                lambda n=number, s=start, e=end: client.upload_part_copy(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload,
                    PartNumber=n,
                    CopySource=copy_source,
                    CopySourceRange=f"bytes={s}-{e}",
                ),
                what=f"copy part {number} to s3://{bucket}/{key}",
            )
            parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]})
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    except BaseException:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        raise
