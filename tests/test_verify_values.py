"""`marin verify` reads values where files differ: the same tensor chunked for 1 or 4 devices is identical,
a tensor off by rounding is close (its largest difference named), one off by more differs; JSON numbers
and parquet columns alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from marin.tools.verify_values import compare_values


def write_zarr(folder: Path, array: np.ndarray, chunks: list[int]) -> None:
    import tensorstore as ts

    spec = {
        "driver": "zarr",
        "kvstore": {"driver": "file", "path": str(folder)},
        "metadata": {"shape": list(array.shape), "chunks": chunks, "dtype": "<f4", "compressor": {"id": "zstd"}},
        "create": True,
    }
    ts.open(spec).result().write(array).result()


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def compare(a: Path, b: Path, **tolerance):
    fa, fb = files_of(a), files_of(b)
    return compare_values(str(a), str(b), fa | fb, fa, fb, **tolerance)


def test_a_tensor_chunked_per_device_is_identical_and_rounding_is_close_with_its_largest_difference(tmp_path):
    weight = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    write_zarr(tmp_path / "one/model/w", weight, [8, 16])
    write_zarr(tmp_path / "four/model/w", weight, [8, 4])
    assert files_of(tmp_path / "one") != files_of(tmp_path / "four")
    same = compare(tmp_path / "one", tmp_path / "four")
    assert same.identical == ["model/w"] and not same.close and not same.differs

    nudged = weight.copy()
    nudged[3, 5] += 1e-5
    write_zarr(tmp_path / "near/model/w", nudged, [8, 4])
    near = compare(tmp_path / "one", tmp_path / "near")
    assert list(near.close) == ["model/w"] and abs(near.close["model/w"] - 1e-5) < 1e-6 and not near.differs
    exact = compare(tmp_path / "one", tmp_path / "near", rtol=0.0, atol=0.0)
    assert exact.differs and exact.differs[0].startswith("model/w: ||A-B|| / ||B|| = ")

    write_zarr(tmp_path / "far/model/w", weight * 1.01, [8, 4])
    far = compare(tmp_path / "one", tmp_path / "far")
    assert far.differs and "model/w" in far.differs[0] and not far.close

    write_zarr(tmp_path / "shape/model/w", weight[:4], [4, 16])
    assert "model/w: <f4[8, 16] vs <f4[4, 16]" in compare(tmp_path / "one", tmp_path / "shape").differs[0]


def test_json_and_parquet_are_compared_by_their_numbers(tmp_path):
    for side, loss, name in (("a", 4.613569713506489, "shakespeare"), ("b", 4.613569663537062, "shakespeare")):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({"macro_loss": loss, "sets": [name]}))
        pq.write_table(pa.table({"set": [name], "loss": [loss]}), folder / "results.parquet")
    judged = compare(tmp_path / "a", tmp_path / "b")
    assert set(judged.close) == {"results.json:macro_loss", "results.parquet:loss"} and not judged.differs
    assert "results.json:sets[0]" in judged.identical and "results.parquet:set" in judged.identical

    (tmp_path / "b/results.json").write_text(json.dumps({"macro_loss": 4.7, "sets": ["hamlet"]}))
    differs = compare(tmp_path / "a", tmp_path / "b").differs
    assert differs == [
        "results.json:macro_loss: 4.613569713506489 vs 4.7",
        "results.json:sets[0]: 'shakespeare' vs 'hamlet'",
    ]
