"""MinHash signatures with datatrove's semantics, computed a batch of documents at a time with numpy.

datatrove's `MinhashDedupSignature` spends most of its time in Python per word: it simplifies the
text (`simplify_text`), splits it into words with spaCy's English tokenizer (one `Doc` per document),
joins every n-gram of words and hashes it with xxh64, then maps the hashes through `num_buckets x
hashes_per_bucket` permutations `(h * a + b) mod (2^61 - 1)` of one document at a time. Here:

- the text is simplified exactly as `simplify_text` does, except that the diacritics step (NFD, drop
  combining marks) is skipped for ASCII text, where it changes nothing, and done with `str.translate`
  otherwise;
- words are the whitespace-separated chunks of the simplified text, each run through spaCy's
  tokenizer once and cached (spaCy tokenizes each whitespace-separated chunk on its own, so this is
  the same word list: tests compare it with datatrove's on real text);
- the n-gram strings and their xxh64 hashes are datatrove's, so shingles are bit-identical;
- the permutations run over the shingles of a whole batch of documents at once, and the per-document
  minimum is one `np.minimum.reduceat`: the same `a`, `b` (drawn from `RandomState(seed)`) and the
  same uint64 arithmetic, so a document's signature equals datatrove's `get_signature`.

A document with fewer than `n_grams` words has no signature and never matches, as in datatrove.
`band_digests` reduces each band (`hashes_per_bucket` values) to a 128-bit xxh3 digest: two
documents share a bucket when all the band's values are equal, and a digest collision between
different bands has probability ~2^-128.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain

import numpy as np
import xxhash

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
BATCH_SHINGLES = 1 << 12
"""Shingles per numpy batch (whole documents; one longer document is a batch of its own): with 112
hashes the (shingles x hashes) matrix is 3.5 MB, which stays in cache."""
WORD_CACHE_LIMIT = 1 << 20
"""Distinct whitespace chunks whose spaCy tokenization is kept; the cache is cleared past this."""
SEGMENT_CHARS = 1 << 20
"""A longer text is simplified and signed one segment (`segments`) at a time, carrying the last n-1
words over: memory bounded by a segment's words and shingles, the same signature as the whole text."""


@dataclass(frozen=True, kw_only=True)
class MinHashConfig:
    """datatrove MinhashConfig: with b buckets of r hashes, pairs above ~(1/b)^(1/r) Jaccard match."""

    n_grams: int = 5
    """Word n-gram size of the shingles."""
    num_buckets: int = 14
    """Number of LSH bands (b)."""
    hashes_per_bucket: int = 8
    """Hashes per band (r)."""
    seed: int = 1
    """Seed of the hash permutations."""


@cache
def _combining_marks() -> dict[int, None]:
    """str.translate table deleting every code point of category Mn (what simplify_text drops after NFD)."""
    return {cp: None for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Mn"}


@cache
def _spacy_english():
    import spacy

    return spacy.blank("en")


@cache
def _whole_word_test(nlp):
    """A test true for ASCII letter chunks that spaCy keeps as one token: no special case, prefix, suffix
    or infix applies (checked with the tokenizer's own rules and regexes), so it need not run."""
    tokenizer = nlp.tokenizer
    rules = tokenizer.rules or {}
    prefix, suffix = tokenizer.prefix_search, tokenizer.suffix_search
    infix = tokenizer.infix_finditer

    def whole(chunk: str) -> bool:
        return (
            chunk.isascii()
            and chunk.isalpha()
            and chunk not in rules
            and prefix(chunk) is None
            and suffix(chunk) is None
            and next(infix(chunk), None) is None
        )

    return whole


def simplify(text: str) -> str:
    """datatrove's `simplify_text` with its default TextNormConfig, same output."""
    from datatrove.utils.text import NUMBERS_PATTERN, PUNCTUATION_TRANS, WHITESPACE_PATTERN

    text = NUMBERS_PATTERN.sub("0", text.lower()).translate(PUNCTUATION_TRANS)
    text = WHITESPACE_PATTERN.sub(" ", text.strip())
    if not text.isascii():
        text = unicodedata.normalize("NFD", text).translate(_combining_marks())
    return text.strip()


def segments(text: str, size: int):
    """`text` in pieces of about `size` characters, each cut at a space between two alphanumeric characters.

    The words of `simplify` of the pieces, in order, are the words of `simplify` of the whole text: such
    a space stays a word boundary through every step of `simplify` (lowercasing, numbers, punctuation to
    spaces, whitespace runs, dropped combining marks), and no step reaches across it. A text without
    such a space is one piece."""
    start = 0
    while start < len(text):
        stop = text.find(" ", start + size)
        while 0 < stop < len(text) - 1 and not (text[stop - 1].isalnum() and text[stop + 1].isalnum()):
            stop = text.find(" ", stop + 1)
        stop = len(text) if stop < 0 or stop >= len(text) - 1 else stop
        yield text[start:stop]
        start = stop + 1


class MinHasher:
    """Signatures and band digests of documents for one MinHashConfig (one per process, reused)."""

    def __init__(self, config: MinHashConfig):
        self.config = config
        self.num_hashes = config.num_buckets * config.hashes_per_bucket
        gen = np.random.RandomState(config.seed)
        self.a = gen.randint(1, MERSENNE_PRIME, dtype=np.uint64, size=(1, self.num_hashes))
        self.b = gen.randint(0, MERSENNE_PRIME, dtype=np.uint64, size=(1, self.num_hashes))
        self._words: dict[str, tuple[str, ...]] = {}
        self._buffers: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def words(self, simplified: str) -> list[str]:
        """spaCy English tokens of simplified text (datatrove's word_tokenize), cached per chunk."""
        chunks = simplified.split(" ") if simplified else []
        cached = self._words
        missing = [c for c in set(chunks) if c not in cached]
        if missing:
            if len(cached) + len(missing) > WORD_CACHE_LIMIT:
                cached.clear()
            nlp = _spacy_english()
            whole = _whole_word_test(nlp)
            with nlp.memory_zone():
                for chunk in missing:
                    if whole(chunk):
                        cached[chunk] = (chunk,)
                    else:
                        cached[chunk] = tuple(s for s in (t.text.strip() for t in nlp.tokenizer(chunk)) if s)
        return list(chain.from_iterable(map(cached.__getitem__, chunks)))

    def shingles(self, text: str) -> list[int]:
        """xxh64 of every word n-gram joined by spaces (datatrove's get_shingles), in order."""
        words = self.words(simplify(text))
        n = self.config.n_grams
        h = xxhash.xxh64_intdigest
        return [h(" ".join(words[i : i + n])) for i in range(len(words) - n + 1)]

    def signatures(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(signatures uint64 [docs with shingles, num_hashes], indices into texts of those docs)."""
        long = {i: self._long_signature(t) for i, t in enumerate(texts) if len(t) > SEGMENT_CHARS}
        per_doc = [[] if i in long else self.shingles(t) for i, t in enumerate(texts)]
        short = self._short_signatures(per_doc)
        has = np.array([i for i in range(len(texts)) if per_doc[i] or long.get(i) is not None], dtype=np.int64)
        if not long:
            return short, has
        sigs = np.empty((len(has), self.num_hashes), dtype=np.uint64)
        from_short = 0
        for row, i in enumerate(has.tolist()):
            if i in long:
                sigs[row] = long[i]
            else:
                sigs[row] = short[from_short]
                from_short += 1
        return sigs, has

    def _long_signature(self, text: str) -> np.ndarray | None:
        """The signature of one long text, a segment at a time (see SEGMENT_CHARS and `segments`)."""
        n = self.config.n_grams
        h = xxhash.xxh64_intdigest
        sig: np.ndarray | None = None
        carry: list[str] = []
        for segment in segments(text, SEGMENT_CHARS):
            words = carry + self.words(simplify(segment))
            for lo in range(0, max(0, len(words) - n + 1), BATCH_SHINGLES):
                hi = min(lo + BATCH_SHINGLES, len(words) - n + 1)
                flat = np.fromiter(
                    (h(" ".join(words[i : i + n])) for i in range(lo, hi)), dtype=np.uint64, count=hi - lo
                ).reshape(-1, 1)
                part = self._permuted(flat).min(axis=0)
                sig = part if sig is None else np.minimum(sig, part)
            carry = words[len(words) - (n - 1) :] if n > 1 else []
        return sig

    def _short_signatures(self, per_doc: list[list[int]]) -> np.ndarray:
        has = np.array([i for i, s in enumerate(per_doc) if s], dtype=np.int64)
        sigs = np.empty((len(has), self.num_hashes), dtype=np.uint64)
        start = 0
        while start < len(has):
            stop, total = start, 0
            while stop < len(has) and (total == 0 or total + len(per_doc[has[stop]]) <= BATCH_SHINGLES):
                total += len(per_doc[has[stop]])
                stop += 1
            lengths = [len(per_doc[i]) for i in has[start:stop]]
            flat = np.fromiter(
                chain.from_iterable(per_doc[i] for i in has[start:stop]), dtype=np.uint64, count=total
            ).reshape(-1, 1)
            phv = self._permuted(flat)
            offsets = np.concatenate(([0], np.cumsum(lengths[:-1]))).astype(np.int64)
            sigs[start:stop] = np.minimum.reduceat(phv, offsets, axis=0)
            start = stop
        return sigs

    def _permuted(self, shingles: np.ndarray) -> np.ndarray:
        """datatrove's `(h * a + b) % (2^61 - 1)` in uint64 (wrapping), the modulo done by shifts, in reused
        buffers small enough to stay in cache (4-5x faster than fresh arrays of 64k rows here)."""
        n = len(shingles)
        if self._buffers is None or len(self._buffers[0]) < n:
            shape = (max(n, BATCH_SHINGLES), self.num_hashes)
            self._buffers = (np.empty(shape, np.uint64), np.empty(shape, np.uint64), np.empty(shape, bool))
        y, high, wrap = (buf[:n] for buf in self._buffers)
        np.multiply(shingles, self.a, out=y)
        y += self.b
        np.right_shift(y, np.uint64(61), out=high)
        y &= MERSENNE_PRIME
        y += high
        np.greater_equal(y, MERSENNE_PRIME, out=wrap)
        np.subtract(y, MERSENNE_PRIME, out=y, where=wrap)
        return y

    def band_digests(self, sigs: np.ndarray) -> np.ndarray:
        """uint64 [docs, num_buckets, 2]: the xxh3-128 digest of each band's little-endian values."""
        r = self.config.hashes_per_bucket
        raw = np.ascontiguousarray(sigs.astype("<u8", copy=False)).view(np.uint8)
        width = 8 * r
        out = np.empty((len(sigs), self.config.num_buckets, 2), dtype=np.uint64)
        h = xxhash.xxh3_128_intdigest
        mask = (1 << 64) - 1
        for d in range(len(sigs)):
            row = raw[d].tobytes()
            for band in range(self.config.num_buckets):
                v = h(row[band * width : (band + 1) * width])
                out[d, band, 0] = v >> 64
                out[d, band, 1] = v & mask
        return out
