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


AGREEMENT_TEXTS = [
    "The river walked to the garden.",
    "",
    "   ",
    " leading and trailing spaces ",
    "line one\nline two\n\n",
    "Ünïcödé ✓ 漢字 and emoji 🎉\ttab",
    "a literal <|begin_of_text|> inside the text",
]


def test_levanter_transformers_and_the_tokenize_step_give_the_same_ids_with_bos_and_eos_once(corpus, tmp_path):
    """The tokenizer's own post-processor frames every text, so nobody adds bos/eos (or spaces) a second time."""
    from levanter.compat.hf_checkpoints import load_tokenizer
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig, preprocessor_for_format
    from transformers import AutoTokenizer

    from marin.processing.tokenize import TokenizeConfig, tokenize

    tok = str(tmp_path / "tok")
    train_tokenizer(TrainTokenizerConfig(input_path=str(corpus), output_path=tok, vocab_size=300))
    texts = AGREEMENT_TEXTS + [d["text"] for d in _corpus_docs(corpus)[:5]]

    hf = AutoTokenizer.from_pretrained(tok)
    transformers_ids = [hf(t)["input_ids"] for t in texts]

    batch_tokenizer = preprocessor_for_format(
        TextLmDatasetFormat(), load_tokenizer(tok), enforce_bos=True, enforce_eos=True
    )
    assert not batch_tokenizer._need_to_add_bos and not batch_tokenizer._need_to_add_eos
    levanter_ids = [list(r["input_ids"]) for r in batch_tokenizer([{"text": t} for t in texts])]

    write_shard(tmp_path / "docs" / "part-00000.jsonl.gz", [doc(f"a{i}", t) for i, t in enumerate(texts)])
    out = str(tmp_path / "tokenized")
    tokenize(TokenizeConfig(input_path=str(tmp_path / "docs"), tokenizer=tok, output_path=out, validation_fraction=0.0))
    cache = UrlSingleDatasetLMConfig(
        cache_dir=out, tokenizer=tok, format=TextLmDatasetFormat(), train_urls=[], validation_urls=[]
    ).build_or_load_cache("train", monitors=False)
    step_ids = [list(r["input_ids"]) for r in cache.get_batch_sync(list(range(len(texts))))]

    assert transformers_ids == levanter_ids == step_ids
    bos, eos = hf.bos_token_id, hf.eos_token_id
    for text, ids in zip(texts, step_ids, strict=True):
        assert ids[0] == bos and ids[-1] == eos
        assert hf.decode(ids, skip_special_tokens=True) == text.replace("<|begin_of_text|>", "")
        if "<|" not in text:
            assert ids.count(bos) == 1 and ids.count(eos) == 1
    assert step_ids[1] == [bos, eos]
    assert step_ids[6].count(bos) == 2  # a literal special-token string in the text is that token, everywhere


def _corpus_docs(corpus) -> list[dict]:
    from tests.data_docs import read_shard

    return [d for p in sorted(corpus.iterdir()) for d in read_shard(p)]
