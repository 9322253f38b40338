"""A synthetic corpus with planted exact and near copies of known Jaccard similarity (tests and benchmarks).

Documents are sentences of words drawn with their frequencies from the shipped Shakespeare corpus
(so the language and quality filters see English). Every `copy_every`-th document is a copy of an
earlier document (same or earlier shard), in turn: exact, exact re-cased and re-spaced, and near
copies with a fraction of their words replaced, aimed at Jaccard similarities `near` (which dedup
should remove) and `far` (which it should keep). A copy's true Jaccard similarity is measured on
datatrove's shingles (5-grams of simplified words), so the truth does not rely on the target.

Every document is a pure function of (seed, shard, index): shards can be written in any order, in
parallel, and the same arguments give the same bytes.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from functools import cache

import numpy as np

NEAR = (0.95, 0.9, 0.85)
"""Targets of near copies that MinHash with 14 bands of 8 should find (P(match) >= 0.98 at 0.85)."""
FAR = (0.4, 0.2)
"""Targets of planted copies too different to be duplicates (P(match) <= 0.04)."""
KINDS = ("exact", "recased", *(f"near{j}" for j in NEAR), *(f"far{j}" for j in FAR))


@dataclass(frozen=True)
class PlantedCorpus:
    """Shape of a corpus: `shards` x `docs_per_shard` documents of about `words` words."""

    shards: int
    docs_per_shard: int
    words: int = 500
    copy_every: int = 10
    seed: int = 0


@cache
def _vocabulary() -> tuple[np.ndarray, np.ndarray]:
    """Shakespeare's words (lowercase letters) and their frequencies, from the shipped corpus."""
    import re
    import tempfile

    from marin.download.shipped_corpus import ShippedCorpusConfig, write_shakespeare_corpus
    from marin.processing.documents import list_shards, read_documents

    counts: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_shakespeare_corpus(ShippedCorpusConfig(output_path=tmp, num_shards=1))
        for path in list_shards(tmp):
            for doc in read_documents(path):
                counts.update(re.findall(r"[a-z]+", doc["text"].lower()))
    words = sorted(counts)
    freq = np.array([counts[w] for w in words], dtype=np.float64)
    return np.array(words, dtype=object), np.cumsum(freq / freq.sum())


def _draw(rng: np.random.Generator, size: int) -> list[str]:
    words, cdf = _vocabulary()
    return list(words[np.minimum(np.searchsorted(cdf, rng.random(size)), len(words) - 1)])


def _rng(spec: PlantedCorpus, shard: int, index: int, salt: int = 0) -> np.random.Generator:
    return np.random.default_rng([spec.seed, shard, index, salt])


def original_words(spec: PlantedCorpus, shard: int, index: int) -> list[str]:
    rng = _rng(spec, shard, index)
    return _draw(rng, int(rng.integers(spec.words // 2, spec.words * 3 // 2 + 1)))


def _sentences(words: list[str]) -> str:
    """Sentences of 12 words: capitalized, ending with a full stop."""
    out = []
    for i in range(0, len(words), 12):
        part = words[i : i + 12]
        out.append(" ".join([part[0].capitalize(), *part[1:]]) + ".")
    return " ".join(out)


def _replaced(spec: PlantedCorpus, words: list[str], target: float, shard: int, index: int) -> list[str]:
    """Words with k of them replaced, k chosen so that 5-gram Jaccard ~ target."""
    rng = _rng(spec, shard, index, salt=1)
    shingles = max(1, len(words) - 4)
    k = max(1, round(shingles * (1 - target) / (5 * (1 + target))))
    out = list(words)
    for pos in rng.choice(len(words), size=min(k, len(words)), replace=False):
        new = out[pos]
        while new == out[pos]:
            (new,) = _draw(rng, 1)
        out[pos] = new
    return out


def document(spec: PlantedCorpus, shard: int, index: int) -> tuple[dict, dict | None]:
    """Document `index` of `shard` and, for a planted copy, its truth (id, of, kind)."""
    doc_id = f"s{shard}-d{index}"
    if index % spec.copy_every != spec.copy_every - 1:
        return {"id": doc_id, "text": _sentences(original_words(spec, shard, index))}, None
    number = (shard * spec.docs_per_shard + index) // spec.copy_every
    kind = KINDS[number % len(KINDS)]
    rng = _rng(spec, shard, index, salt=2)
    src_shard = int(rng.integers(0, shard + 1))
    src_index = int(rng.integers(0, index if src_shard == shard else spec.docs_per_shard))
    while src_index % spec.copy_every == spec.copy_every - 1:  # copy originals only
        src_index -= 1
    words = original_words(spec, src_shard, src_index)
    if kind == "exact":
        text = _sentences(words)
    elif kind == "recased":
        text = "  " + _sentences(words).upper().replace(" ", " \n ") + "\n"
    else:
        text = _sentences(_replaced(spec, words, float(kind[4:]), shard, index))
    truth = {"id": doc_id, "of": f"s{src_shard}-d{src_index}", "kind": kind}
    return {"id": doc_id, "text": text}, truth


def write_shard(spec: PlantedCorpus, root: str, shard: int) -> list[dict]:
    """Writes `root/part-<shard>.jsonl.gz`; returns the truth of its planted copies (with Jaccard)."""
    from marin.processing.documents import DocumentStream
    from marin.processing.minhash import MinHashConfig, MinHasher
    from marin.storage import open_write

    hasher = MinHasher(MinHashConfig())
    truths = []
    with open_write(os.path.join(root, f"part-{shard:05d}.jsonl.gz")) as raw:
        stream = DocumentStream(raw)
        for index in range(spec.docs_per_shard):
            doc, truth = document(spec, shard, index)
            stream.write({**doc, "source": "planted", "metadata": {}})
            if truth is not None:
                src_shard, src_index = (int(x[1:]) for x in truth["of"].split("-"))
                a = set(hasher.shingles(doc["text"]))
                b = set(hasher.shingles(_sentences(original_words(spec, src_shard, src_index))))
                truth["jaccard"] = round(len(a & b) / max(1, len(a | b)), 4)
                truths.append(truth)
        stream.close()
    return truths


def write_corpus(spec: PlantedCorpus, root: str) -> list[dict]:
    """Every shard, in order; returns the truth of all planted copies."""
    truths = []
    for shard in range(spec.shards):
        truths += write_shard(spec, root, shard)
    return truths


def score(truths: list[dict], removed: set[str], min_jaccard: float = 0.8) -> dict:
    """Recall and precision of `removed` ids against the planted copies.

    Positives are the copies with Jaccard >= min_jaccard (exact ones included). A group is an original
    with its positive copies: removing any |group| - 1 of its members is right, whichever is kept. A
    removed document outside every group (a unique document, or a far copy) is a false positive.
    """
    groups: dict[str, set[str]] = {}
    for t in truths:
        if t["kind"] in ("exact", "recased") or t["jaccard"] >= min_jaccard:
            groups.setdefault(t["of"], {t["of"]}).add(t["id"])
    member = {d: g for g, ds in groups.items() for d in ds}
    hit = Counter(member[d] for d in removed if d in member)
    expected = sum(len(ds) - 1 for ds in groups.values())
    found = sum(min(n, len(groups[g]) - 1) for g, n in hit.items())
    wrong = sum(1 for d in removed if d not in member) + sum(max(0, n - len(groups[g]) + 1) for g, n in hit.items())
    return {
        "positives": expected,
        "removed": len(removed),
        "recall": found / expected if expected else 1.0,
        "precision": (len(removed) - wrong) / len(removed) if removed else 1.0,
    }


def dump_truth(truths: list[dict], path: str) -> None:
    with open(path, "w") as f:
        json.dump(truths, f)
