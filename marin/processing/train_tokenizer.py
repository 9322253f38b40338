"""Train a byte-level BPE tokenizer on a document folder and save it where Levanter can load it.

The tokenizer is Hugging Face `tokenizers`' BPE over GPT-2-style byte-level pre-tokenization (every
byte is in the initial alphabet, so no text is out of vocabulary), wrapped in transformers'
`PreTrainedTokenizerFast` with its bos/eos tokens and saved with `save_pretrained`: the folder
(`tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`) is what
`AutoTokenizer.from_pretrained` and Levanter's `tokenizer=` expect. Training has no randomness (BPE
merges are picked by count, ties by pair order) and documents are fed in shard order, so the same
input gives the same files. `train_info.json` records what it was trained on.

A post-processor puts bos before and eos after every encoded text, as Llama-style tokenizers do.
Levanter's BatchTokenizer sees that and leaves the text alone; without it, Levanter would frame each
document as `bos + " " + text + " " + eos`, so the first word would be tokenized with a space in
front of it and a stray space token would come before eos.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from marin.processing.documents import (
    EmptyInputError,
    ReadReport,
    check_keys,
    list_shards,
    step_documents,
    write_json,
)
from marin.stepkit.config import StepConfig, input_field, output_field, versioned_unless_default
from marin.storage import join, put_folder

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TrainTokenizerConfig(StepConfig):
    """Train a byte-level BPE on the documents under `input_path`."""

    input_path: str = input_field("documents")
    """Folder of document shards, Parquet or JSON lines (.jsonl, .jsonl.gz, .jsonl.zst), on any fsspec path."""
    output_path: str = output_field()
    """Folder to save the tokenizer into (a transformers tokenizer folder)."""
    vocab_size: int = 1024
    """Vocabulary size, special tokens and the 256 byte symbols included."""
    min_frequency: int = 2
    """A pair must occur this often to be merged."""
    bos_token: str = "<|begin_of_text|>"
    """Beginning-of-sequence token (the tokenizer's post-processor puts it before every text)."""
    eos_token: str = "<|end_of_text|>"
    """End-of-sequence token (the tokenizer's post-processor puts it after every text)."""
    extra_special_tokens: tuple[str, ...] = ()
    """More special tokens to reserve, after bos and eos."""
    max_documents: int | None = None
    """Train on at most this many documents (in shard order); None: all."""
    skip_bad_documents: bool = versioned_unless_default(False)
    """Skip and count lines that are not valid documents instead of failing on the first."""
    text_key: str = versioned_unless_default("text")
    """Field (JSON lines) or column (Parquet) holding each document's text."""
    id_key: str | None = versioned_unless_default("id")
    """Field or column holding each document's id; None: the corpus has none, ids are `<shard>/<row>`."""

    def validate(self) -> None:
        check_keys("TrainTokenizerConfig", self.text_key, self.id_key)
        reserved = 256 + 2 + len(self.extra_special_tokens)
        if self.vocab_size <= reserved:
            raise ValueError(
                f"TrainTokenizerConfig.vocab_size must exceed {reserved} (bytes + specials), got {self.vocab_size}"
            )
        if self.bos_token == self.eos_token:
            raise ValueError(f"TrainTokenizerConfig: bos_token and eos_token must differ, both are {self.bos_token!r}")


def train_tokenizer(config: TrainTokenizerConfig) -> dict:
    """Train, save with `save_pretrained(output_path)`, and return (and write) `train_info.json`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    shards = list_shards(config.input_path)
    report = ReadReport()
    counts = {"documents": 0, "characters": 0}

    def texts() -> Iterator[str]:
        for path in shards:
            for doc in step_documents(config, path, report):
                if config.max_documents is not None and counts["documents"] >= config.max_documents:
                    return
                counts["documents"] += 1
                counts["characters"] += len(doc["text"])
                yield doc["text"]

    specials = [config.bos_token, config.eos_token, *config.extra_special_tokens]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    logger.info("training a %d-token byte-level BPE on %s", config.vocab_size, config.input_path)
    tok.train_from_iterator(texts(), trainer=trainer)
    if counts["documents"] == 0:
        raise EmptyInputError(f"train_tokenizer: no documents in input path {config.input_path}")
    bos, eos = config.bos_token, config.eos_token
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {bos}:1 $B:1 {eos}:1",
        special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))],
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=config.bos_token,
        eos_token=config.eos_token,
        additional_special_tokens=list(config.extra_special_tokens) or None,
        model_input_names=["input_ids", "attention_mask"],
    )
    _save_pretrained(wrapped, config.output_path)
    info = {
        "documents": counts["documents"],
        "characters": counts["characters"],
        "vocab_size": len(wrapped),
        "requested_vocab_size": config.vocab_size,
        "special_tokens": specials,
        "skipped_bad_documents": dict(sorted(report.skipped.items())),
    }
    write_json(join(config.output_path, "train_info.json"), info)
    logger.info("saved tokenizer (%d tokens) to %s", len(wrapped), config.output_path)
    return info


def _save_pretrained(tokenizer, output_path: str) -> None:
    """save_pretrained writes into a local folder: a temporary one, whose files are then published into
    `output_path` one by one through marin.storage (atomic, with the umask's modes, on any storage)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        put_folder(tmp, output_path)
