"""Long documents are processed in bounded pieces: MinHash signs a long text segment by segment (the same
signature as the whole text), the exact key collapses whitespace without a list of words, and the reader
joins a long line once. Time and memory at 5 MB and 50 MB are measured in benchmarks/data_bench.py."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import asdict

import numpy as np

from marin.processing import minhash
from marin.processing.dedup_stages import exact_key
from marin.processing.documents import read_documents
from tests.data_docs import english_doc


def test_a_long_text_is_signed_in_bounded_segments_with_the_whole_texts_signature(monkeypatch):
    rng = random.Random(3)
    texts = [english_doc(rng, 3000), "Too short.", english_doc(rng, 40), english_doc(rng, 2000)]
    hasher = minhash.MinHasher(minhash.MinHashConfig())
    whole = hasher._short_signatures([hasher.shingles(t) for t in texts])

    monkeypatch.setattr(minhash, "SEGMENT_CHARS", 1000)
    monkeypatch.setattr(minhash, "BATCH_SHINGLES", 64)
    seen = []
    permuted = hasher._permuted
    monkeypatch.setattr(hasher, "_permuted", lambda flat: seen.append(len(flat)) or permuted(flat))
    monkeypatch.setattr(hasher, "shingles", lambda t: (_ for _ in ()).throw(AssertionError("a long text unsegmented")))
    segmented, has = hasher.signatures([texts[0], texts[3]])
    assert np.array_equal(segmented, whole[[0, 2]]) and has.tolist() == [0, 1]
    assert seen and max(seen) <= 64


def test_the_exact_key_collapses_every_kind_of_whitespace_as_split_does(monkeypatch):
    import hashlib
    import unicodedata

    from marin.processing import dedup_stages

    monkeypatch.setattr(dedup_stages, "EXACT_SEGMENT_CHARS", 3)
    text = "A\u2003 b\t\n\x1c c\u00a0D \u3000e\u0085 " * 50 + "  ﬁn  "
    norm = " ".join(unicodedata.normalize("NFKC", text).lower().split())
    digest = hashlib.blake2b(norm.encode(), digest_size=16).digest()
    assert exact_key(text) == (int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big"))


def test_a_5_mb_single_line_document_reads_whole(tmp_path):
    text = english_doc(random.Random(4), 900_000).replace("\n", " ")
    assert len(text) > 5_000_000
    path = tmp_path / "part-00000.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps({"id": "long", "text": text}).encode() + b"\n", compresslevel=1))
    (doc,) = read_documents(str(path))
    assert doc["text"] == text


def test_segments_keep_every_word_of_simplify_across_their_cuts():
    rng = random.Random(6)
    pieces = ["x\x1c", "\u0301é", "12,5", "Hello,", "--", "naïve", "İstanbul", "\t\n", "ok"]
    text = " ".join(rng.choice(pieces + english_doc(rng, 3).split()) for _ in range(4000))
    hasher = minhash.MinHasher(minhash.MinHashConfig())
    whole = hasher.words(minhash.simplify(text))
    pieced = [w for seg in minhash.segments(text, 50) for w in hasher.words(minhash.simplify(seg))]
    assert len(list(minhash.segments(text, 50))) > 100 and pieced == whole


def _gopher(max_words: int, min_words: int):
    from datatrove.pipeline.filters import GopherQualityFilter

    from marin.processing.filter import GopherQualityConfig

    config = GopherQualityConfig(max_doc_words=max_words, min_doc_words=min_words)
    return config, GopherQualityFilter(**asdict(config))


def test_the_long_document_count_decides_only_what_datatroves_gopher_filter_decides():
    from datatrove.data import Document

    from marin.processing.filter import _more_words_than_allowed

    rng = random.Random(8)
    pieces = ['"', "...", "--", "can't", "e.g.", "U.S.A.", "«ok»", "(x)", "!!", "naïve", "'s", "#", "…", "12,5"]
    spaces = [" ", "\n", "\t", "\u2003", "\u00a0", " \n\n "]
    decided = []
    for trial in range(200):
        words = [rng.choice(pieces + ["the", "and", "word"]) for _ in range(rng.randint(20, 90))]
        text = "".join(w + rng.choice(spaces) for w in words)
        config, flt = _gopher(max_words=40 + trial % 20, min_words=rng.choice([None, 5, 60]))
        ours = _more_words_than_allowed(text, config)
        if ours:
            assert flt.filter(Document(text=text, id=str(trial))) == (False, "gopher_long_doc"), text
        decided.append(ours)
    assert 20 < sum(decided) < 180


def test_a_long_document_is_filtered_without_a_list_of_its_words(tmp_path):
    import tracemalloc

    from marin.processing.filter import FilterConfig, FilterShard, filter_shard

    text = english_doc(random.Random(5), 400_000).replace("\n", " ")
    path = tmp_path / "in" / "part-00000.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(json.dumps({"id": "long", "text": text}).encode() + b"\n", compresslevel=1))
    config = FilterConfig(input_path=str(path.parent), output_path=str(tmp_path / "out"), removed_sample_size=0)
    tracemalloc.start()
    try:
        stats = filter_shard(config, FilterShard(0, str(path)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert stats["removed"] == {"gopher_quality/gopher_long_doc": 1}
    assert peak < 8 * len(text), f"peak {peak / 1e6:.0f} MB for {len(text) / 1e6:.1f} MB of text"
