"""Loading a trained model from a checkpoint, and exporting it as a Hugging Face checkpoint.

Shared by the train step (which exports its final checkpoint to `hf/step-<N>/`) and the evaluation step
(which reads any complete checkpoint). A train output records its model in `train_info.json`, so anything
downstream rebuilds the exact Levanter `LlamaConfig` from there. Imports Levanter lazily.
"""

from __future__ import annotations

import json
import logging
import posixpath
import tempfile

from marin.storage import open_read
from marin.training.config import LlamaModelConfig

logger = logging.getLogger(__name__)


def levanter_llama(model: LlamaModelConfig, tokenizer: str, reference_checkpoint: str | None = None):
    """Levanter's `LlamaConfig` for `model`; the tokenizer is always local (no hub lookup)."""
    from levanter.layers.rotary import DefaultRotaryEmbeddingsConfig
    from levanter.models.llama import LlamaConfig

    return LlamaConfig(
        seq_len=model.seq_len,
        hidden_dim=model.hidden_dim,
        intermediate_dim=model.intermediate_dim,
        num_layers=model.num_layers,
        num_heads=model.num_heads,
        num_kv_heads=model.num_kv_heads,
        tie_word_embeddings=model.tie_word_embeddings,
        rope=DefaultRotaryEmbeddingsConfig(theta=model.rope_theta),
        tokenizer=tokenizer,
        reference_checkpoint=reference_checkpoint or tokenizer,
    )


def write_reference_config(model: LlamaModelConfig, tokenizer: str, vocab_size: int, folder: str) -> str:
    """An HF `config.json` for the model in `folder`: Levanter's HF export reads one instead of the hub's."""
    hf_config = levanter_llama(model, tokenizer, folder).to_hf_config(vocab_size)
    hf_config.architectures = ["LlamaForCausalLM"]
    hf_config.save_pretrained(folder)
    return folder


def read_train_info(train_output: str) -> dict:
    with open_read(posixpath.join(train_output, "train_info.json"), "r") as f:
        return json.load(f)


def device_mesh():
    """Levanter's default single-slice mesh over the visible devices (a context manager); in a gang, over this
    host's devices only (what one host loads alone must be addressable by it)."""
    import jax
    from levanter.distributed import RayConfig

    if jax.process_count() > 1:
        from marin.training.distributed import host_local_mesh

        return host_local_mesh()
    from levanter.trainer import TrainerConfig

    return TrainerConfig(require_accelerator=False, ray=RayConfig(auto_start_cluster=False)).use_device_mesh()


def load_model(checkpoint: str, model: LlamaModelConfig, tokenizer: str):
    """The model (parameters only) of a Levanter checkpoint folder. Call inside `device_mesh()`."""
    import equinox as eqx
    import jax
    from haliax import Axis
    from levanter.checkpoint import load_checkpoint
    from levanter.compat.hf_checkpoints import load_tokenizer

    vocab = Axis("vocab", len(load_tokenizer(tokenizer)))
    config = levanter_llama(model, tokenizer)
    shape = eqx.filter_eval_shape(config.build, vocab, key=jax.random.PRNGKey(0))
    serialization_log = logging.getLogger("levanter.tensorstore_serialization")
    serialization_log.addFilter(_none_leaves)
    try:
        return load_checkpoint(shape, checkpoint, subpath="model", discover_latest=False)
    finally:
        serialization_log.removeFilter(_none_leaves)


def _none_leaves(record: logging.LogRecord) -> bool:
    """Drops Levanter's "Unknown leaf type <class 'NoneType'>" warning: a None leaf is an absent optional
    part of the model (a bias the config turns off), which has nothing to load; one warning per such leaf
    filled evaluation logs. Every other record passes."""
    return "Unknown leaf type <class 'NoneType'>" not in record.getMessage()


def export_hf(checkpoint: str, model: LlamaModelConfig, tokenizer: str, destination: str) -> str:
    """Write the checkpoint's model as a Hugging Face checkpoint (safetensors, config, tokenizer)."""
    from levanter.compat.hf_checkpoints import load_tokenizer

    tok = load_tokenizer(tokenizer)
    with device_mesh(), tempfile.TemporaryDirectory(prefix="marin-hf-reference-") as reference:
        lev_model = load_model(checkpoint, model, tokenizer)
        write_reference_config(model, tokenizer, len(tok), reference)
        converter = levanter_llama(model, tokenizer, reference).hf_checkpoint_converter()
        converter = converter.replaced(tokenizer=tok)
        converter.save_pretrained(lev_model, destination, save_reference_code=False)
    logger.info("exported %s as a Hugging Face checkpoint to %s", checkpoint, destination)
    return destination
