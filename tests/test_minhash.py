"""Our vectorized MinHash computes datatrove's words, shingles and signatures, bit for bit."""

from __future__ import annotations

import importlib.metadata  # noqa: F401  (datatrove's dependency check needs it imported)
import random

import numpy as np
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
from datatrove.utils.text import simplify_text

from marin.processing.minhash import MinHashConfig, MinHasher, simplify
from tests.data_docs import english_doc

EDGE_TEXTS = [
    "Café naïve résumé 12,5 cannot gonna 10km 3pm ‘tis” — Straße ǅ ﬁ  x\u0301y",
    "ÉCOLE 123 dont isnt im 0km £5 €10 50% 1st 2nd can't won't y'all o'clock e-mail U.S.A. a.m.",
    "one two three four",
    "",
    "Tabs\tand\nnewlines\r\nand  double  spaces, numbers 3.14159 and 1,000,000 and ١٢٣ and emoji 🙂 here.",
    "Привет мир, это тест. 你好世界 καλημέρα κόσμε",
]


def test_words_shingles_and_signatures_equal_datatrove(tmp_path):
    rng = random.Random(11)
    texts = [english_doc(rng, 120) for _ in range(5)] + EDGE_TEXTS
    ours = MinHasher(MinHashConfig(num_buckets=4, hashes_per_bucket=3, seed=5))
    theirs = MinhashDedupSignature(
        output_folder=str(tmp_path), config=MinhashConfig(num_buckets=4, hashes_per_bucket=3, seed=5)
    )
    for text in texts:
        assert simplify(text) == simplify_text(text)
        assert ours.words(simplify(text)) == theirs.word_tokenizer.word_tokenize(simplify_text(text))
        assert ours.shingles(text) == theirs.get_shingles(text).ravel().tolist()

    sigs, has = ours.signatures(texts)
    with_shingles = [i for i, t in enumerate(texts) if theirs.get_shingles(t).size]
    assert has.tolist() == with_shingles
    for row, i in zip(sigs, with_shingles, strict=True):
        assert row.tolist() == np.concatenate(theirs.get_signature(theirs.get_shingles(texts[i]))).tolist()
