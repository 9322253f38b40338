"""Tensorstore reaches S3 (and the GCS emulator) as the rest of marin does.

Levanter reads its token caches and writes its checkpoints with tensorstore, through the kvstore spec
jax builds for a path (`get_tensorstore_spec`). For S3 that is wrong twice in jax 0.7.2: the path is
normalised to `s3:/bucket/key` and the regex that restores `scheme://` accepts letters only, so every
`s3://` path becomes a *local* path (the tokenize step wrote `tokenized/.../train/input_ids/offsets` to
the bucket and the train step looked for it on the disk); and a correct S3 spec carries no endpoint,
so tensorstore asks AWS whatever endpoint marin's own clients and fsspec use (`AWS_ENDPOINT_URL_S3` /
`AWS_ENDPOINT_URL`, or fsspec's `s3` config `endpoint_url`: MinIO, Ceph, moto).

`use_storage_endpoints()` wraps jax's function (both its spellings, the one Levanter's cache reader and
checkpointer call included): an `s3://` path is built as jax builds a `gs://` one, then given an S3
kvstore at the endpoint marin resolves (`marin.storage.paths.endpoint_for`) and the region of the
environment (AWS_REGION, AWS_DEFAULT_REGION). Credentials are tensorstore's default chain, which reads
the same AWS_* variables and ~/.aws files as botocore. For GCS, tensorstore follows
TENSORSTORE_GCS_HTTP_URL, set here from STORAGE_EMULATOR_HOST (or fsspec's gcs endpoint) when unset.
"""

from __future__ import annotations

import os
import threading

_installed = threading.Lock()
_done = False


def s3_kvstore(bucket: str, path: str) -> dict:
    """The tensorstore S3 kvstore spec for `s3://bucket/path` at marin's endpoint and region."""
    from marin.storage.paths import endpoint_for

    spec: dict = {"driver": "s3", "bucket": bucket, "path": path}
    endpoint = endpoint_for("s3")
    if endpoint:
        spec["endpoint"] = endpoint
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        spec["aws_region"] = region
    return spec


def use_storage_endpoints() -> None:
    """Makes jax's (hence Levanter's) tensorstore specs reach marin's S3 and GCS endpoints (idempotent)."""
    global _done
    from marin.storage.paths import endpoint_for

    gcs = endpoint_for("gs")
    if gcs and not os.environ.get("TENSORSTORE_GCS_HTTP_URL"):
        os.environ["TENSORSTORE_GCS_HTTP_URL"] = gcs
    with _installed:
        if _done:
            return
        import functools

        from jax.experimental.array_serialization import serialization, tensorstore_impl

        original = tensorstore_impl.get_tensorstore_spec

        @functools.wraps(original)
        def get_tensorstore_spec(ckpt_path, *args, **kwargs):
            path = str(ckpt_path)
            if not path.startswith("s3://"):
                return original(ckpt_path, *args, **kwargs)
            spec = original("gs://" + path[len("s3://") :], *args, **kwargs)
            _gcs_to_s3(spec)
            return spec

        tensorstore_impl.get_tensorstore_spec = get_tensorstore_spec
        serialization.get_tensorstore_spec = functools.partial(get_tensorstore_spec, driver="zarr", ocdbt=False)
        _done = True


def _gcs_to_s3(spec: dict) -> None:
    """Replaces, in place, the gcs kvstore (at any depth: ocdbt nests it as `base`) by marin's S3 kvstore."""
    for key, value in list(spec.items()):
        if isinstance(value, dict):
            if value.get("driver") == "gcs":
                spec[key] = s3_kvstore(value["bucket"], value["path"])
            else:
                _gcs_to_s3(value)
