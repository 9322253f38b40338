"""The evaluate step: loss and bits-per-byte of one checkpoint on named held-out sets.

Bits-per-byte is what makes models with different tokenizers comparable: the total negative
log-likelihood of a text, in bits, divided by its UTF-8 length. Each held-out document is scored on its
own (no packing with its neighbours): a document of n tokens is cut into windows of `seq_len` tokens that
overlap by one, so every token after the first is predicted exactly once, and the bytes are those of the
predicted tokens (the decoded document, special tokens excluded). So the figure is a property of the
text and the model, not of how documents happened to be packed.

`checkpoint` may be a checkpoint folder or a train step's output; for the latter the latest complete
checkpoint is used, so an evaluation depending `nonblocking()` on a training still in progress scores
whatever that run has committed (and waits up to `wait_for_checkpoint_s` for a first one).

Output: `results.json` (per set: loss in nats per token, bpb, tokens, bytes, documents; their macro
averages; the checkpoint, its step, and the run's parameter count, tokens and FLOPs from its
`train_info.json`) and `results.parquet` (one row per set), and `cost.json`: the forward passes' FLOPs over the
tokens scored, estimated on the devices the step asked for, beside the device-seconds the step took
(marin.training.cost; declared volatile, since its timings vary between identical runs).
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import time
from dataclasses import dataclass

from marin.stepkit.config import StepConfig, input_field, output_field, unversioned, versioned_unless_default
from marin.storage import exists, join, open_read, open_write, write_text
from marin.training.checkpoints import checkpoint_step, list_checkpoints, resolve_checkpoint, train_output_of
from marin.training.config import LlamaModelConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class EvalConfig(StepConfig):
    """Score one checkpoint on named held-out sets."""

    checkpoint: str = input_field("train output or checkpoint")
    """A train step's output (its latest complete checkpoint is used) or one `checkpoints/step-N` folder."""
    datasets: dict[str, str] = input_field("tokenized dataset", holds_any=("train", "validation"))
    """Held-out sets by name: each a tokenize step's output, of which `split` is read."""
    output_path: str = output_field()
    """This step's folder: `results.json`, `results.parquet`."""
    split: str = "validation"
    """Which split folder of each tokenized dataset to score."""
    max_documents: int | None = None
    """Score at most this many documents per set (the first ones); None: all."""
    batch_size: int = versioned_unless_default(16)
    """Windows of `seq_len` tokens per forward pass."""
    wait_for_checkpoint_s: float = unversioned(0.0)
    """If the train output has no complete checkpoint yet, wait up to this long for one."""

    def validate(self) -> None:
        if not self.datasets:
            raise ValueError("evaluate.datasets must name at least one held-out set")
        if self.batch_size <= 0:
            raise ValueError(f"evaluate.batch_size must be > 0, got {self.batch_size}")
        if self.max_documents is not None and self.max_documents <= 0:
            raise ValueError(f"evaluate.max_documents must be > 0 or None, got {self.max_documents}")


def find_checkpoint(checkpoint: str, wait_s: float) -> str:
    """The checkpoint folder `checkpoint` names (a train output: its latest complete one), waiting up to
    `wait_s` for a first one to be committed."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return resolve_checkpoint(checkpoint)
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise
            logger.info("no complete checkpoint under %s yet; waiting", checkpoint)
            time.sleep(min(5.0, max(0.1, deadline - time.monotonic())))


def windows(tokens, seq_len: int):
    """(window, number of valid tokens) pairs covering a document; consecutive windows share one token."""
    step = seq_len - 1
    out = []
    start = 0
    while True:
        chunk = tokens[start : start + seq_len]
        out.append(chunk)
        if start + seq_len >= len(tokens):
            return out
        start += step


def _document_windows(docs, seq_len: int):
    import numpy as np

    rows, masks = [], []
    for doc in docs:
        for chunk in windows(doc, seq_len):
            row = np.zeros(seq_len, dtype=np.int32)
            mask = np.zeros(seq_len, dtype=np.float32)
            row[: len(chunk)] = chunk
            mask[: len(chunk) - 1] = 1.0
            rows.append(row)
            masks.append(mask)
    return np.stack(rows), np.stack(masks)


def _nll_fn(model_config):
    """jit(model, tokens[B, P], mask[B, P]) -> summed negative log-likelihood of the next tokens (nats)."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jax.numpy as jnp
    from levanter.layers.attention import AttentionMask

    @eqx.filter_jit
    def nll(model, tokens, mask):
        Batch = hax.Axis("batch", tokens.shape[0])
        Pos = model_config.Pos.resize(tokens.shape[1])
        named = hax.named(tokens, (Batch, Pos))
        logits = model(named, attn_mask=AttentionMask.causal()).array.astype(jnp.float32)
        logp = jax.nn.log_softmax(logits[:, :-1, :], axis=-1)
        targets = tokens[:, 1:]
        picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
        return -(picked * mask[:, :-1]).sum()

    return nll


def score_documents(model, model_config, docs, batch_size: int) -> tuple[float, int]:
    """Summed NLL (nats) and number of predicted tokens over `docs` (lists of token ids)."""
    import numpy as np

    rows, masks = _document_windows(docs, model_config.seq_len)
    nll = _nll_fn(model_config)
    total = 0.0
    for start in range(0, len(rows), batch_size):
        r, m = rows[start : start + batch_size], masks[start : start + batch_size]
        if len(r) < batch_size:
            pad = batch_size - len(r)
            r = np.concatenate([r, np.zeros((pad, r.shape[1]), r.dtype)])
            m = np.concatenate([m, np.zeros((pad, m.shape[1]), m.dtype)])
        total += float(nll(model, r, m))
    return total, int(masks.sum())


def _read_documents(path: str, tokenizer, max_documents: int | None):
    from levanter.data.text import TextLmDatasetFormat, load_lm_dataset_cache

    cache = load_lm_dataset_cache(path, TextLmDatasetFormat(), tokenizer)
    n = len(cache) if max_documents is None else min(len(cache), max_documents)
    return [row["input_ids"] for row in cache.get_batch_sync(list(range(n)))]


def evaluate(config: EvalConfig) -> dict:
    """Score the checkpoint on every set; write `results.json` and `results.parquet`; return the results."""
    from marin.training.cost import CostSettings
    from marin.training.levanter_process import prepare_levanter_process

    started = time.monotonic()
    cost_settings = CostSettings.from_env()  # a malformed MARIN_MFU fails here, before any scoring
    prepare_levanter_process()
    for name, path in config.datasets.items():
        cache = posixpath.join(path, config.split)
        if not exists(posixpath.join(cache, "shard_ledger.json")):
            raise FileNotFoundError(f"evaluate.datasets[{name!r}]: {cache} is not a finished tokenized cache")
    checkpoint = find_checkpoint(config.checkpoint, config.wait_for_checkpoint_s)
    train_output = train_output_of(checkpoint)
    info_path = posixpath.join(train_output, "train_info.json")
    if not exists(info_path):
        raise FileNotFoundError(f"evaluate.checkpoint: {info_path} is missing (not a marin train output?)")
    with open_read(info_path, "r") as f:
        info = json.load(f)
    step = checkpoint_step(checkpoint)
    logger.info("evaluating %s (step %d) on %s", checkpoint, step, sorted(config.datasets))

    from levanter.compat.hf_checkpoints import load_tokenizer
    from tqdm import tqdm

    from marin.training.model_io import device_mesh, levanter_llama, load_model

    model_config = LlamaModelConfig(**info["model"])
    tokenizer = load_tokenizer(info["tokenizer"])
    per_set = {}
    with device_mesh():
        model = load_model(checkpoint, model_config, info["tokenizer"])
        lev_config = levanter_llama(model_config, info["tokenizer"])
        for name, path in tqdm(sorted(config.datasets.items()), desc="held-out sets"):
            docs = _read_documents(posixpath.join(path, config.split), tokenizer, config.max_documents)
            nats, n_tokens = score_documents(model, lev_config, docs, config.batch_size)
            n_bytes = sum(len(tokenizer.decode(d[1:], skip_special_tokens=True).encode("utf-8")) for d in docs)
            per_set[name] = {
                "loss": nats / max(n_tokens, 1),
                "bpb": nats / max(n_bytes, 1) / math.log(2),
                "nll_nats": nats,
                "tokens": n_tokens,
                "bytes": n_bytes,
                "documents": len(docs),
            }
            logger.info(
                "%s: loss %.4f, bpb %.4f over %d documents",
                name,
                per_set[name]["loss"],
                per_set[name]["bpb"],
                len(docs),
            )
    from marin.storage.paths import portable_path

    results = {
        "checkpoint": portable_path(checkpoint, config.output_path),
        "step": step,
        "train_output": portable_path(train_output, config.output_path),
        "train_complete": bool(info.get("complete")) and step == info.get("final_step"),
        "parameter_count": info["parameter_count"],
        "tokens": (step + 1) * info["train_batch_size"] * model_config.seq_len,
        "split": config.split,
        "datasets": per_set,
        "macro_loss": sum(r["loss"] for r in per_set.values()) / len(per_set),
        "macro_bpb": sum(r["bpb"] for r in per_set.values()) / len(per_set),
    }
    results["flops"] = 6 * results["parameter_count"] * results["tokens"]
    _write_results(config.output_path, results)
    _write_cost(config, model_config, len(tokenizer), per_set, time.monotonic() - started, cost_settings)
    return results


def _write_cost(
    config: EvalConfig, model: LlamaModelConfig, vocab_size: int, per_set: dict, wall_s: float, settings
) -> None:
    from marin.stepkit.context import running_step_resources
    from marin.storage import write_volatile_list
    from marin.training.cost import COST_FILE, cost_record, evaluation_flops, write_cost_record

    work = evaluation_flops(model, vocab_size, sum(r["tokens"] for r in per_set.values()))
    record = cost_record(
        kind="evaluate", work=work, resources=running_step_resources(), wall_seconds=wall_s, settings=settings
    )
    write_volatile_list(config.output_path, [COST_FILE])
    write_cost_record(config.output_path, record)


def _write_results(out: str, results: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"dataset": name, "step": results["step"], "checkpoint": results["checkpoint"], **values}
        for name, values in sorted(results["datasets"].items())
    ]
    with open_write(join(out, "results.parquet")) as f:
        pq.write_table(pa.Table.from_pylist(rows), f)
    write_text(join(out, "results.json"), json.dumps(results, indent=2, sort_keys=True) + "\n")


__all__ = ["EvalConfig", "evaluate", "list_checkpoints"]
