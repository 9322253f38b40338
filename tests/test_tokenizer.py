"""The train_tokenizer step: a byte-level BPE saved as a transformers folder that Levanter loads."""

from __future__ import annotations

import json
import random

import pytest

from marin.processing.documents import EmptyInputError
from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
from tests.data_docs import doc, english_doc, tree_bytes, write_shard


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok_corpus")
    rng = random.Random(5)
    for s in range(2):
        write_shard(root / f"part-{s:05d}.jsonl.gz", [doc(f"d{s}-{i}", english_doc(rng, 300)) for i in range(20)])
    return root


def test_trained_tokenizer_loads_in_transformers_and_levanter_and_round_trips_any_text(corpus, tmp_path):
    from levanter.compat.hf_checkpoints import load_tokenizer
    from transformers import AutoTokenizer

    out = tmp_path / "tok"
    info = train_tokenizer(
        TrainTokenizerConfig(
            input_path=str(corpus), output_path=str(out), vocab_size=400, extra_special_tokens=("<|pad|>",)
        )
    )
    assert {p.name for p in out.iterdir()} == {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "train_info.json",
    }
    assert info["documents"] == 40 and info["vocab_size"] == 400
    assert json.loads((out / "train_info.json").read_text()) == info

    for tok in (AutoTokenizer.from_pretrained(str(out)), load_tokenizer(str(out))):
        assert len(tok) == 400
        assert tok.bos_token == "<|begin_of_text|>" and tok.eos_token == "<|end_of_text|>"
        assert tok.convert_tokens_to_ids(["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]) == [0, 1, 2]
        text = "The river walked to the garden. Ünïcödé ✓ 漢字 and emoji 🎉, tabs\tand\nnewlines."
        ids = tok(text)["input_ids"]
        assert tok.unk_token_id not in ids
        assert ids[0] == 0 and ids[-1] == 1 and 0 not in ids[1:-1] and 1 not in ids[1:-1]
        assert tok.decode(ids, skip_special_tokens=True) == text
        assert tok(text, add_special_tokens=False)["input_ids"] == ids[1:-1]
        assert len(tok("the garden and the river")["input_ids"]) < len("the garden and the river")


def test_training_twice_gives_identical_files(corpus, tmp_path):
    for name in ("a", "b"):
        train_tokenizer(TrainTokenizerConfig(input_path=str(corpus), output_path=str(tmp_path / name), vocab_size=300))
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")


def test_a_vocab_smaller_than_the_byte_alphabet_fails_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match="vocab_size must exceed 258"):
        TrainTokenizerConfig(input_path=str(tmp_path), output_path=str(tmp_path / "o"), vocab_size=100)


def test_empty_input_fails_clearly(tmp_path):
    write_shard(tmp_path / "in" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match="no documents"):
        train_tokenizer(TrainTokenizerConfig(input_path=str(tmp_path / "in"), output_path=str(tmp_path / "o")))
