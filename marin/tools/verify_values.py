"""Comparing files by the values they hold where their bytes may differ: runs on other device layouts.

A Levanter checkpoint is a tree of zarr arrays written by tensorstore, one chunk file per device shard:
the same parameters saved from 1 and from 4 devices are `weight/0.0` on one side and `weight/0.0` to
`weight/0.3` on the other, so their files differ while their tensors are equal. And a run trained on
another layout reorders floating-point sums, so its tensors, its losses and the evaluation of it agree
with the original's to about 1e-5 relative, not bit for bit. So `marin verify` reads, among the files
that differ, every zarr array (a folder with `.zarray` or `zarr.json`), every `.safetensors` file, every
`.json` file and every `.parquet` table on both sides (through marin.storage, so on any prefix) and
judges each value:

- identical: the same dtype, shape and bits (NaN equals NaN), or the same JSON;
- close: the same dtype and shape, and `||A - B|| <= atol + rtol * ||B||` (2-norms over the tensor:
  Adam moves an element near zero, a rare token's embedding, as far as a large one, so elementwise
  bounds would fail where the tensor as a whole agrees to 1e-5); JSON numbers and scalar metrics by
  `|a - b| <= max(rtol * max(|a|, |b|), atol)`; the largest absolute difference of each is reported;
- differs: anything else (a shape, a dtype, a value on one side only, a difference out of tolerance).

docs/training.md gives the measured figures behind the default tolerance.
"""

from __future__ import annotations

import json
import math
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marin.storage import join, read_bytes, read_bytes_many

if TYPE_CHECKING:
    import numpy as np

DEFAULT_RTOL = 1e-4
"""Relative tolerance of `close` (docs/training.md: the tutorial on 4 devices is within 1.3e-5 of 1 device)."""
DEFAULT_ATOL = 1e-6
"""Absolute tolerance of `close`, for values at or near zero."""

_ZARR_METADATA = (".zarray", "zarr.json")


@dataclass
class ValueVerdict:
    """What the values behind a set of differing files say."""

    identical: list[str] = field(default_factory=list)
    """Values equal bit for bit (their files differ in layout only)."""
    close: dict[str, float] = field(default_factory=dict)
    """Values within tolerance, with their largest absolute difference."""
    differs: list[str] = field(default_factory=list)
    """Why each value that is not close differs."""
    files: set[str] = field(default_factory=set)
    """The differing files these values account for (a file whose values differ is not, so that its bytes
    are named too; a zarr array's chunk files are, whatever their values)."""


class _Unreadable(Exception):
    pass


def value_groups(paths: set[str], all_paths: set[str]) -> dict[str, tuple[str, set[str]]]:
    """The differing `paths` that hold values: {name: (kind, its differing files)}, where a name is a zarr
    array folder (its metadata file is among `all_paths`) or a `.safetensors`, `.json` or `.parquet` file."""
    groups: dict[str, tuple[str, set[str]]] = {}
    for path in paths:
        folder = posixpath.dirname(path)
        if any(posixpath.join(folder, meta) in all_paths for meta in _ZARR_METADATA):
            groups.setdefault(folder, ("zarr", set()))[1].add(path)
        elif path.endswith((".safetensors", ".json", ".parquet")):
            groups[path] = (path.rsplit(".", 1)[1], {path})
    return groups


def compare_values(
    output_a: str,
    output_b: str,
    paths: set[str],
    files_a: set[str],
    files_b: set[str],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> ValueVerdict:
    """Judge the values behind the differing `paths` of two step outputs (relative paths; `files_a` and
    `files_b` are every file of each side's manifest)."""
    verdict = ValueVerdict()
    for name, (kind, members) in sorted(value_groups(paths, files_a | files_b).items()):
        differed = len(verdict.differs)
        try:
            if kind == "zarr" and (shapes := _zarr_shapes(output_a, output_b, name, files_a, files_b)):
                raise _Unreadable(shapes)  # told apart by their metadata: no chunk is read
            values_a = _READERS[kind](output_a, name, files_a)
            values_b = _READERS[kind](output_b, name, files_b)
        except _Unreadable as exc:
            values_a, values_b = {}, {}
            verdict.differs.append(f"{name}: {exc}")
        for key in sorted(set(values_a) | set(values_b)):
            label = f"{name}:{key}" if key else name
            if key not in values_a or key not in values_b:
                verdict.differs.append(f"{label}: only in {'A' if key in values_a else 'B'}")
                continue
            judged = _judge(values_a[key], values_b[key], rtol, atol)
            if judged is None:
                verdict.identical.append(label)
            elif isinstance(judged, str):
                verdict.differs.append(f"{label}: {judged}")
            else:
                verdict.close[label] = judged
        if kind == "zarr" or len(verdict.differs) == differed:
            verdict.files |= members  # a differing file of its own is also named by its bytes
    return verdict


def _judge(a: Any, b: Any, rtol: float, atol: float) -> None | float | str:
    """None when identical, the largest difference when close, why when they differ."""
    import numpy as np

    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        if a == b and type(a) is type(b):
            return None
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
        if numbers and math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
            return abs(a - b)
        return f"{a!r} vs {b!r}"
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    floating = a.dtype.kind in "fc"
    if np.array_equal(a, b, equal_nan=floating):
        return None
    if not floating:
        return f"{int(np.count_nonzero(a != b))} of {a.size} elements differ"
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)):
        return "NaN in different places"
    diff = np.nan_to_num(a64 - b64)
    norm_diff, norm_b = float(np.linalg.norm(diff)), float(np.linalg.norm(np.nan_to_num(b64)))
    if norm_diff <= atol + rtol * norm_b:
        return float(np.abs(diff).max())
    return (
        f"||A-B|| / ||B|| = {norm_diff / norm_b if norm_b else math.inf:.3g} > rtol {rtol:g} "
        f"(max |A-B| {float(np.abs(diff).max()):.3g})"
    )


def _zarr_shapes(output_a: str, output_b: str, folder: str, files_a: set[str], files_b: set[str]) -> str | None:
    """How two zarr arrays' shapes or dtypes differ, from their metadata files alone; None if they agree."""
    described = []
    for output, files in ((output_a, files_a), (output_b, files_b)):
        meta = next((posixpath.join(folder, m) for m in _ZARR_METADATA if posixpath.join(folder, m) in files), None)
        data = read_bytes(join(output, meta)) if meta else None
        if data is None:
            return None  # reading the array says why
        try:
            info = json.loads(data)
        except ValueError:
            return None
        described.append((info.get("dtype", info.get("data_type")), info.get("shape")))
    (dtype_a, shape_a), (dtype_b, shape_b) = described
    if (dtype_a, shape_a) == (dtype_b, shape_b):
        return None
    return f"{dtype_a}{shape_a} vs {dtype_b}{shape_b}"


def _read_zarr(output: str, folder: str, files: set[str]) -> dict[str, np.ndarray]:
    """A zarr array of a step output, read through marin.storage and decoded by tensorstore in memory."""
    import tensorstore as ts

    members = sorted(p for p in files if posixpath.dirname(p) == folder)
    if not any(posixpath.basename(p) in _ZARR_METADATA for p in members):
        raise _Unreadable("no zarr array on one side")
    datas = read_bytes_many([join(output, p) for p in members])
    context = ts.Context()
    store = ts.KvStore.open({"driver": "memory"}, context=context).result()
    for path, data in zip(members, datas, strict=True):
        if data is None:
            raise _Unreadable(f"{path} is unreadable in {output}")
        store[posixpath.basename(path)] = data
    driver = "zarr" if any(p.endswith(".zarray") for p in members) else "zarr3"
    try:
        array = ts.open({"driver": driver, "kvstore": {"driver": "memory"}, "open": True}, context=context).result()
        return {"": array.read().result()}
    except ValueError as exc:
        raise _Unreadable(f"not a readable zarr array: {exc}") from None


def _read_file(output: str, path: str, files: set[str]) -> bytes:
    if path not in files:
        raise _Unreadable("only on one side")
    data = read_bytes(join(output, path))
    if data is None:
        raise _Unreadable(f"unreadable in {output}")
    return data


def _read_safetensors(output: str, path: str, files: set[str]) -> dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        return load(_read_file(output, path, files))
    except _Unreadable:
        raise
    except Exception as exc:  # safetensors raises its own SafetensorError for a corrupt header
        raise _Unreadable(f"not a readable safetensors file: {exc}") from None


def _read_json(output: str, path: str, files: set[str]) -> dict[str, Any]:
    try:
        value = json.loads(_read_file(output, path, files))
    except ValueError as exc:
        raise _Unreadable(f"not JSON: {exc}") from None
    flat: dict[str, Any] = {}
    _flatten(value, "", flat)
    return flat


def _flatten(value: Any, where: str, flat: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{where}.{key}" if where else str(key), flat)
    elif isinstance(value, list):
        flat[f"{where}#len"] = len(value)
        for i, item in enumerate(value):
            _flatten(item, f"{where}[{i}]", flat)
    else:
        flat[where] = value


def _read_parquet(output: str, path: str, files: set[str]) -> dict[str, Any]:
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(_read_file(output, path, files)))
    except _Unreadable:
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends
        raise _Unreadable(f"not a readable parquet table: {exc}") from None
    columns: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
            columns[name] = np.asarray(column.to_numpy(zero_copy_only=False))
        else:
            columns[name] = json.dumps(column.to_pylist(), sort_keys=True, default=str)
    return columns


_READERS = {"zarr": _read_zarr, "safetensors": _read_safetensors, "json": _read_json, "parquet": _read_parquet}
