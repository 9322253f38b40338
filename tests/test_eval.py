"""The evaluate step on real checkpoints: bits-per-byte against a direct computation, runs in progress."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation.evaluate import EvalConfig, evaluate, windows
from tests.training_fixtures import build_tokenized, corpus, reference_run


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "training"


def direct_nats(model, token_ids: list[int]) -> float:
    """-log p(document) under the model: one causal forward over the whole (short) document."""
    import haliax as hax
    import jax
    from levanter.layers.attention import AttentionMask

    pos = hax.Axis("position", len(token_ids))
    logits = model(hax.named(np.asarray(token_ids, dtype=np.int32), (pos,)), attn_mask=AttentionMask.causal())
    logp = jax.nn.log_softmax(np.asarray(logits.array, dtype=np.float64)[:-1], axis=-1)
    return float(-sum(logp[i, t] for i, t in enumerate(token_ids[1:])))


def test_bits_per_byte_agrees_with_a_direct_computation_on_a_few_documents(root, tmp_path):
    from levanter.compat.hf_checkpoints import load_tokenizer

    from marin.training.config import LlamaModelConfig
    from marin.training.model_io import device_mesh, load_model

    run = reference_run(root)
    data = corpus(root / "corpus")
    tokenizer = load_tokenizer(str(data["tokenizer"]))
    texts = ["To be, or not to be: that is the question.", "Exeunt all but Hamlet.", "O Romeo, Romeo! — ¿dónde estás?"]
    docs = [tokenizer(t)["input_ids"] for t in texts]
    assert all(d[0] == tokenizer.bos_token_id and d[-1] == tokenizer.eos_token_id for d in docs)
    assert all(len(d) <= 64 for d in docs), "each document fits one window, so a plain forward is the reference"
    held_out = build_tokenized(tmp_path / "held_out", data["tokenizer"], texts, texts)

    results = evaluate(
        EvalConfig(checkpoint=str(run), datasets={"lines": str(held_out)}, output_path=str(tmp_path / "e"))
    )

    info = json.loads((run / "train_info.json").read_text())
    with device_mesh():
        model = load_model(info["final_checkpoint"], LlamaModelConfig(**info["model"]), info["tokenizer"])
        nats = sum(direct_nats(model, d) for d in docs)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    got = results["datasets"]["lines"]
    assert got["bytes"] == n_bytes and got["documents"] == 3
    assert got["tokens"] == sum(len(d) - 1 for d in docs)
    assert got["bpb"] == pytest.approx(nats / n_bytes / math.log(2), rel=1e-5)
    assert got["loss"] == pytest.approx(nats / got["tokens"], rel=1e-5)
    assert results["step"] == 39 and results["train_complete"]
    on_disk = json.loads((tmp_path / "e" / "results.json").read_text())
    assert on_disk["datasets"]["lines"]["bpb"] == got["bpb"]


def test_evaluates_the_latest_complete_checkpoint_of_a_run_still_in_progress(root, tmp_path):
    import pyarrow.parquet as pq

    run = reference_run(root)
    data = corpus(root / "corpus")
    running = tmp_path / "running"
    for step in (4, 8, 39):
        shutil.copytree(run / f"checkpoints/step-{step}", running / f"checkpoints/step-{step}")
    (running / "checkpoints/step-39/metadata.json").unlink()  # still being written: not yet a checkpoint
    info = json.loads((run / "train_info.json").read_text())
    (running / "train_info.json").write_text(json.dumps({**info, "complete": False}))

    out = tmp_path / "eval"
    results = evaluate(
        EvalConfig(
            checkpoint=str(running),
            datasets={"plays_a": str(data["plays_a"]), "plays_b": str(data["plays_b"])},
            output_path=str(out),
            max_documents=8,
        )
    )
    assert results["step"] == 8 and results["checkpoint"].endswith("running/checkpoints/step-8")
    assert not results["train_complete"]
    assert results["tokens"] == 9 * 8 * 64 and results["flops"] == 6 * info["parameter_count"] * 9 * 8 * 64
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert [row["dataset"] for row in table] == ["plays_a", "plays_b"]
    assert all(row["step"] == 8 and row["documents"] == 8 and 0 < row["bpb"] < row["loss"] * 2 for row in table)
    assert results["macro_bpb"] == pytest.approx(np.mean([row["bpb"] for row in table]))


def test_a_train_output_without_any_complete_checkpoint_is_an_error_naming_it(tmp_path):
    (tmp_path / "run/checkpoints/step-4").mkdir(parents=True)
    data = tmp_path / "data/validation"
    data.mkdir(parents=True)
    (data / "shard_ledger.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"no complete checkpoint .* under .*/run/checkpoints"):
        evaluate(EvalConfig(checkpoint=str(tmp_path / "run"), datasets={"d": str(tmp_path / "data")}, output_path="x"))


def test_windows_predict_every_token_after_the_first_exactly_once():
    for n in (1, 2, 5, 63, 64, 65, 127, 128, 300):
        tokens = list(range(n))
        chunks = windows(tokens, 64)
        predicted = [t for chunk in chunks for t in chunk[1:]]
        assert predicted == tokens[1:], n
        assert all(len(c) <= 64 for c in chunks)
