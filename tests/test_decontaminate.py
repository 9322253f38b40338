"""The decontamination step: 13-gram overlap of training documents with evaluation sets, removed or marked,
with a report of what overlapped with what, on a small corpus with planted evaluation passages."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from marin.processing.decontaminate import DecontaminateConfig, decontaminate
from marin.processing.documents import EmptyInputError
from tests.data_docs import doc, english_doc, read_shard, tree_bytes, write_shard


def _passage(text: str, start: int, words: int) -> str:
    """`words` consecutive words of `text`, shouted and re-punctuated: the same n-grams once normalised."""
    picked = text.split()[start : start + words]
    return ", ".join(w.strip(".").upper() for w in picked) + "?!"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("decont")
    rng = random.Random(7)
    shards = [[doc(f"t{s}-{i}", english_doc(rng, 120)) for i in range(10)] for s in range(3)]
    for s, docs in enumerate(shards):
        write_shard(root / "train" / f"part-{s:05d}.jsonl.gz", docs)
    by_id = {d["id"]: d["text"] for docs in shards for d in docs}
    write_shard(
        root / "qa" / "part-00000.jsonl.gz",
        [
            doc("q-copied", _passage(by_id["t1-3"], 10, 20)),  # 20 words: 8 shared 13-grams
            doc("q-twice", _passage(by_id["t2-7"], 30, 14) + " unrelated tail words here"),  # 2 shared
            doc("q-twelve", _passage(by_id["t0-0"], 5, 12)),  # 12 words: no 13-gram at all
            doc("q-fresh", english_doc(random.Random(99), 40)),
        ],
    )
    write_shard(root / "qb" / "part-00000.jsonl.gz", [doc("b-0", _passage(by_id["t2-7"], 40, 15))])  # 3 shared
    return root


def _config(root, out, **kw) -> DecontaminateConfig:
    return DecontaminateConfig(
        input_path=str(root / "train"),
        eval_sets={"qa": str(root / "qa"), "qb": str(root / "qb")},
        output_path=str(out),
        **kw,
    )


def _all(out) -> list[dict]:
    return [d for s in range(3) for d in read_shard(out / f"part-{s:05d}.jsonl.gz")]


def test_remove_mode_drops_overlapping_documents_and_reports_each_pair_with_its_ngram_count(corpus, tmp_path):
    stats = decontaminate(_config(corpus, tmp_path / "one"))
    report = [json.loads(line) for line in (tmp_path / "one" / "contamination.jsonl").read_text().splitlines()]
    assert [(r["id"], r["eval_set"], r["eval_id"], r["ngrams"]) for r in report] == [
        ("t1-3", "qa", "q-copied", 8),
        ("t2-7", "qb", "b-0", 3),
        ("t2-7", "qa", "q-twice", 2),
    ]
    assert report[0]["input"] == "part-00001.jsonl.gz" and len(report[0]["example"].split()) == 13
    assert {d["id"] for d in _all(tmp_path / "one")} == {f"t{s}-{i}" for s in range(3) for i in range(10)} - {
        "t1-3",
        "t2-7",
    }
    assert stats["documents"] == 30 and stats["contaminated"] == stats["removed"] == 2 and stats["kept"] == 28
    assert stats["overlapping_pairs"] == 3
    assert stats["eval_sets"]["qa"] == {
        "documents": 4,
        "too_short": 1,
        "ngrams": stats["eval_sets"]["qa"]["ngrams"],
        "contaminated_training_documents": 2,
    }
    assert stats["eval_sets"]["qb"]["contaminated_training_documents"] == 1
    assert not (tmp_path / "one" / ".work").exists()

    decontaminate(dataclasses.replace(_config(corpus, tmp_path / "two"), workers=2))
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")


def test_mark_mode_keeps_every_document_and_labels_the_overlapping_ones(corpus, tmp_path):
    stats = decontaminate(_config(corpus, tmp_path / "m", mode="mark", attribute="decont"))
    docs = {d["id"]: d for d in _all(tmp_path / "m")}
    assert len(docs) == 30 and stats["removed"] == 0 and stats["kept"] == 30
    assert docs["t1-3"]["metadata"]["decont"] == {"qa": 8}
    assert docs["t2-7"]["metadata"]["decont"] == {"qa": 2, "qb": 3}
    assert sum("decont" in d["metadata"] for d in docs.values()) == 2


def test_a_higher_minimum_and_a_shorter_ngram_change_what_counts(corpus, tmp_path):
    assert decontaminate(_config(corpus, tmp_path / "min3", min_overlapping_ngrams=3))["contaminated"] == 2
    stats = decontaminate(_config(corpus, tmp_path / "min9", min_overlapping_ngrams=9))
    assert stats["contaminated"] == 0 and (tmp_path / "min9" / "contamination.jsonl").read_bytes() == b""
    stats = decontaminate(_config(corpus, tmp_path / "n12", n_grams=12))
    assert stats["eval_sets"]["qa"]["too_short"] == 0
    assert "t0-0" in {json.loads(x)["id"] for x in (tmp_path / "n12" / "contamination.jsonl").read_text().splitlines()}


def test_bad_configs_and_empty_eval_sets_fail_naming_the_field(corpus, tmp_path):
    with pytest.raises(ValueError, match="DecontaminateConfig.mode"):
        _config(corpus, tmp_path / "x", mode="drop")
    with pytest.raises(ValueError, match="DecontaminateConfig.eval_sets"):
        DecontaminateConfig(input_path="in", eval_sets={}, output_path="o")
    with pytest.raises(ValueError, match="DecontaminateConfig.n_grams"):
        _config(corpus, tmp_path / "x", n_grams=0)
    write_shard(tmp_path / "empty" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match=r"eval_sets\['none'\]"):
        decontaminate(
            DecontaminateConfig(
                input_path=str(corpus / "train"),
                eval_sets={"none": str(tmp_path / "empty")},
                output_path=str(tmp_path / "e"),
            )
        )


def test_words_are_datatrove_s_word_tokenize_of_the_simplified_text(corpus):
    """The step tokenizes each space-separated piece once (a memo); the words must be datatrove's own."""
    from datatrove.utils.text import simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    from marin.processing.decontaminate import _memo_words
    from tests.data_docs import read_shard

    tokenizer = load_word_tokenizer("eng")
    words = _memo_words(tokenizer, max_memo=50)
    texts = [d["text"] for p in sorted((corpus / "train").iterdir()) for d in read_shard(p)]
    texts += [
        "I cannot go, gonna wanna don't it's 3.5% — naïve café e-mail U.S.A. hello@x.com :) 😀 ...",
        "",
        "   ",
        "a\u00a0b\u2003c\td\n\ne",
    ]
    for text in texts:
        assert words(simplify_text(text)) == tokenizer.word_tokenize(simplify_text(text))
