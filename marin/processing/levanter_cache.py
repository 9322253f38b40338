"""Levanter token caches, with Levanter's exact ids and bytes, written faster and on any storage.

Training reads a Levanter text cache: a TreeStore of `input_ids` written by `SerialCacheWriter`, plus
`shard_ledger.json`, whose metadata is the preprocessor's. Levanter fills one through its
`BatchTokenizer`, which hands strings to transformers, which calls the Rust tokenizer's `encode_batch`
(computing character offsets nobody reads) and turns every id into a Python int. `LevanterEncoder`
gets the same ids from `encode_batch_fast` (no offsets) straight into numpy arrays. That is exact
whenever BatchTokenizer itself reduces to one backend call: a fast tokenizer with no truncation or
padding configured and no long-string workaround (Levanter splits long strings only for tokenizers
with a Replace or Sequence normalizer). Then its output is the backend's encoding, special tokens
on, of `bos + " " + text + " " + eos`, with bos and eos as its own flags say. Any other tokenizer
goes through BatchTokenizer itself. tests/test_tokenize.py checks ids and cache bytes against
Levanter's own parts.

A long text (over LONG_TEXT_CHARS characters) is encoded in pieces of about PIECE_CHARS, a few pieces
per backend call, so time stays linear and memory bounded: the Rust tokenizer keeps ~100 bytes of
alignments per byte of one input string (6 GB for a 50 MB document), and a call over pieces spreads
them over every core. The pieces give exactly the whole text's ids because each cut falls where the
tokenizer's own pipeline already splits, whatever surrounds it: between an ASCII letter or digit and a
space or newline. There the GPT-2 pre-tokenizer regex (`ByteLevel`), `Whitespace` and
`WhitespaceSplit` end a pre-token and start the next from that character on, normalizers that map
characters one by one (NFC, NFD, NFKC, NFKD, Lowercase) change nothing across it, and an added token
with no whitespace in it and no lstrip/rstrip cannot span it; every model (BPE, WordPiece,
WordLevel, Unigram) encodes pre-tokens independently. The pieces are encoded without special tokens
and the post-processor's template (`TemplateProcessing`'s single sequence, or none) is applied once
around them. A tokenizer with any other part (a Replace or Strip normalizer, a Metaspace or custom
Split pre-tokenizer, BERT's post-processor, BPE dropout) has no piece framing and is encoded whole,
as is a text with no such cut point (e.g. one without spaces).

The cache is written to a local folder without Levanter, with the bytes of its `SerialCacheWriter`: the
arrays created as its store creates them, offsets by tensorstore, the ledger as Levanter serialises it,
the data chunk files by `_ShardedData` with tensorstore's own bytes, an inner chunk at a time, so memory
does not grow with the cache as it does when tensorstore rewrites a whole chunk file on each write.
For gs:// and s3:// the cache is built in a local temporary folder from which each chunk file moves to
the bucket as soon as no later write can touch it, and the rest at the end with `shard_ledger.json`
last: local scratch stays about one write chunk, and a finished ledger on the bucket always means a
complete cache.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from marin.storage import VOLATILE_LIST, delete, is_local, join, list_dir, put_file, read_bytes, strip_protocol

logger = logging.getLogger(__name__)

LEDGER = "shard_ledger.json"
TOKENS_PER_WRITE = 4 * 1024 * 1024
WRITE_CHUNK = 256 * 1024 * 512
"""Elements per chunk file of a cache array: Levanter's `jagged_array.DEFAULT_WRITE_CHUNK_SIZE`."""
INNER_CHUNK = 256 * 1024
"""Elements per inner chunk of a chunk file: Levanter's `jagged_array.DEFAULT_CHUNK_SIZE`."""
LONG_TEXT_CHARS = 1 << 20
PIECE_CHARS = 1 << 16
PIECES_PER_CALL = 16
_CUT = re.compile(r"[A-Za-z0-9](?=[ \n])")


class LevanterEncoder:
    """Texts to the `input_ids` Levanter's `TextLmDatasetFormat` preprocessor makes (bos and eos enforced).

    A plain tokenizer folder (see `plain_tokenizer`) is read with `tokenizers` alone, which gives the same
    ids, metadata and dtype as Levanter's preprocessor over transformers without importing either
    (about 10 CPU-s and 380 MB per process); any other goes through `load_tokenizer` and
    `preprocessor_for_format`, as does any folder with `through_levanter=True`.
    """

    def __init__(self, tokenizer_path: str, *, through_levanter: bool = False):
        self.tokenizer_path = tokenizer_path
        self.fast: FastEncoder | None = None
        self.processor = None
        plain = None if through_levanter else plain_tokenizer(tokenizer_path)
        if plain is not None:
            self.metadata, self.fast = plain
            self.dtype = self.fast.dtype
            return
        from levanter.compat.hf_checkpoints import load_tokenizer
        from levanter.data.text import BatchTokenizer, TextLmDatasetFormat, preprocessor_for_format
        from transformers import PreTrainedTokenizerFast

        tokenizer = load_tokenizer(tokenizer_path)
        self.processor = preprocessor_for_format(TextLmDatasetFormat(), tokenizer, enforce_bos=True, enforce_eos=True)
        self.metadata = self.processor.metadata
        self.dtype = np.asarray(self.processor.output_exemplar["input_ids"]).dtype
        if isinstance(tokenizer, PreTrainedTokenizerFast) and isinstance(self.processor, BatchTokenizer):
            backend = tokenizer.backend_tokenizer
            plain_backend = backend.truncation is None and backend.padding is None
            if plain_backend and self.processor.padding is False and not self.processor._needs_long_sequence_workaround:
                self.fast = FastEncoder(
                    backend,
                    prefix=tokenizer.bos_token + " " if self.metadata["append_bos"] else "",
                    suffix=" " + tokenizer.eos_token if self.metadata["append_eos"] else "",
                    dtype=self.dtype,
                )

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.encode_later(texts)()

    def encode_later(self, texts: Sequence[str]) -> Callable[[], list[np.ndarray]]:
        """Tokenize `texts` now; the returned function makes their id arrays (see FastEncoder.encode_later)."""
        if self.fast is not None:
            return self.fast.encode_later(texts)
        assert self.processor is not None
        rows = self.processor([{"text": t} for t in texts])
        arrays = [np.asarray(r["input_ids"], dtype=self.dtype) for r in rows]
        return lambda: arrays

    def worker_spec(self) -> dict:
        """What a worker process needs to encode exactly like this (JSON): see `encoder_from_spec`."""
        if self.fast is None:
            return {"fast": False, "tokenizer_path": self.tokenizer_path}
        return {"fast": True, **self.fast.spec()}


class FastEncoder:
    """The Rust tokenizer plus BatchTokenizer's framing; needs neither transformers nor Levanter to run."""

    def __init__(self, backend, *, prefix: str, suffix: str, dtype):
        self._backend, self._prefix, self._suffix, self.dtype = backend, prefix, suffix, np.dtype(dtype)
        self.pieces = piece_framing(json.loads(backend.to_str()))

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.encode_later(texts)()

    def encode_later(self, texts: Sequence[str]) -> Callable[[], list[np.ndarray]]:
        """Tokenize `texts` now; the returned function makes their id arrays.

        The Rust call releases the GIL and keeps every core busy; making the arrays turns each id into
        a Python int and back under the GIL. Split in two, a pipeline can make one batch's arrays on
        another thread while the next batch is tokenized, instead of leaving the cores idle meanwhile.
        A long text is encoded in pieces (see the module docstring) and its array made at once. The
        returned function may be called once.
        """
        long = {i for i, t in enumerate(texts) if len(t) > LONG_TEXT_CHARS} if self.pieces is not None else set()
        framed = [self._prefix + t + self._suffix for i, t in enumerate(texts) if i not in long]
        encodings = self._backend.encode_batch_fast(framed)
        del framed
        done = {i: self._encode_long(texts[i]) for i in sorted(long)}
        count = len(texts)

        def arrays() -> list[np.ndarray]:
            rest = iter(encodings)
            made = [done[i] if i in done else np.array(next(rest).ids, dtype=self.dtype) for i in range(count)]
            # the Rust encodings (~20 bytes a character) go as soon as their arrays exist, not when the
            # caller drops this function: a pipeline keeps it in a future until later batches are queued
            encodings.clear()
            done.clear()
            return made

        return arrays

    def _encode_long(self, text: str) -> np.ndarray:
        assert self.pieces is not None
        cuts = [0, *long_text_cuts(text, PIECE_CHARS), len(text)]
        parts = [np.array(self.pieces.head, dtype=self.dtype)]
        for first in range(0, len(cuts) - 1, PIECES_PER_CALL):
            bounds = cuts[first : first + PIECES_PER_CALL + 1]
            group = [text[a:b] for a, b in itertools.pairwise(bounds)]
            if first == 0:
                group[0] = self._prefix + group[0]
            if bounds[-1] == len(text):
                group[-1] = group[-1] + self._suffix
            encodings = self._backend.encode_batch_fast(group, add_special_tokens=False)
            parts += [np.array(e.ids, dtype=self.dtype) for e in encodings]
            del group, encodings
        parts.append(np.array(self.pieces.tail, dtype=self.dtype))
        return np.concatenate(parts)

    def spec(self) -> dict:
        return {
            "backend": self._backend.to_str(),
            "prefix": self._prefix,
            "suffix": self._suffix,
            "dtype": self.dtype.str,
        }


_PLAIN_CONFIG_KEYS = {
    "added_tokens_decoder",
    "additional_special_tokens",
    "bos_token",
    "clean_up_tokenization_spaces",
    "eos_token",
    "extra_special_tokens",
    "model_input_names",
    "model_max_length",
    "tokenizer_class",
}
_PLAIN_FILES = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "train_info.json", VOLATILE_LIST}
_TRANSFORMERS_NO_MAX_LENGTH = int(1e30)
_ADDED_TOKEN_FLAGS = ("content", "lstrip", "rstrip", "normalized", "single_word", "special")


def plain_tokenizer(tokenizer_path: str) -> tuple[dict, FastEncoder] | None:
    """Levanter's preprocessor metadata and the fast encoder for a plain tokenizer folder,
    computed with `tokenizers` alone; None for any other folder (the caller then asks Levanter).

    Plain is what `train_tokenizer` writes: `tokenizer_class` PreTrainedTokenizerFast, no keys in
    `tokenizer_config.json` beyond those listed in `_PLAIN_CONFIG_KEYS`, no file beside them but
    `train_info.json` and the step's own (dot-files, the volatile list), string bos/eos tokens present in the vocabulary, every
    `added_tokens_decoder` entry already in `tokenizer.json` as it says, no truncation or padding, and
    no Replace or Sequence normalizer (for which Levanter splits long strings). For such a folder
    transformers builds its tokenizer from `tokenizer.json` as is, so Levanter's `BatchTokenizer` reduces
    to the backend: its metadata is the path, `len(tokenizer)` (the vocabulary with added tokens), the
    model_max_length, and whether bos and eos must be added, which it decides from the ids of
    "hi there" as done here; the ids' dtype is that of its exemplar (those ids as an array).
    tests/test_tokenize.py compares both routes on several folders.
    """

    def read_json(name: str):
        raw = read_bytes(join(tokenizer_path, name))
        return None if raw is None else json.loads(raw)

    try:
        names = {name for name in list_dir(tokenizer_path) if not name.startswith(".")}
        config = read_json("tokenizer_config.json")
        raw_tokenizer = read_bytes(join(tokenizer_path, "tokenizer.json"))
        special = read_json("special_tokens_map.json") or {}
    except (OSError, ValueError):
        return None
    if config is None or raw_tokenizer is None or not names <= _PLAIN_FILES:
        return None
    if config.get("tokenizer_class") != "PreTrainedTokenizerFast" or not set(config) <= _PLAIN_CONFIG_KEYS:
        return None
    if config.get("additional_special_tokens", []) or config.get("extra_special_tokens", {}):
        return None
    bos, eos = config.get("bos_token"), config.get("eos_token")
    if not all(isinstance(t, str | None) for t in (bos, eos)) or set(special) - {"bos_token", "eos_token"}:
        return None
    if special.get("bos_token", bos) != bos or special.get("eos_token", eos) != eos:
        return None
    from tokenizers import Tokenizer, normalizers

    backend = Tokenizer.from_str(raw_tokenizer.decode("utf-8"))
    if backend.truncation is not None or backend.padding is not None:
        return None
    if isinstance(backend.normalizer, normalizers.Replace | normalizers.Sequence):
        return None
    added = {
        t["id"]: {k: t.get(k) for k in _ADDED_TOKEN_FLAGS} for t in json.loads(raw_tokenizer).get("added_tokens", [])
    }
    for token_id, token in (config.get("added_tokens_decoder") or {}).items():
        if added.get(int(token_id)) != {k: token.get(k) for k in _ADDED_TOKEN_FLAGS}:
            return None
    bos_id = None if bos is None else backend.token_to_id(bos)
    eos_id = None if eos is None else backend.token_to_id(eos)
    if (bos is not None and bos_id is None) or (eos is not None and eos_id is None):
        return None
    hi_there = backend.encode("hi there").ids
    append_bos = bos_id is not None and hi_there[0] != bos_id
    append_eos = eos_id is not None and hi_there[-1] != eos_id
    metadata = {
        "tokenizer": tokenizer_path,
        "vocab_size": backend.get_vocab_size(with_added_tokens=True),
        "return_attention_mask": False,
        "padding": False,
        "max_length": config.get("model_max_length", _TRANSFORMERS_NO_MAX_LENGTH),
        "append_bos": append_bos,
        "append_eos": append_eos,
    }
    encoder = FastEncoder(
        backend,
        prefix=f"{bos} " if append_bos else "",
        suffix=f" {eos}" if append_eos else "",
        dtype=np.asarray(hi_there).dtype,
    )
    return metadata, encoder


def long_text_cuts(text: str, size: int) -> list[int]:
    """Where to cut `text` into pieces of at least `size` characters: after an ASCII letter or digit
    followed by a space or newline (a boundary of every pre-token; see the module docstring)."""
    cuts: list[int] = []
    start = 0
    while len(text) - start > size:
        match = _CUT.search(text, start + size - 1)
        if match is None or match.end() >= len(text):
            break
        start = match.end()
        cuts.append(start)
    return cuts


@dataclass(frozen=True)
class PieceFraming:
    """The ids a tokenizer's post-processor puts around one sequence, for texts encoded in pieces."""

    head: tuple[int, ...]
    tail: tuple[int, ...]


_LOCAL_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase"}
_LOCAL_PRE_TOKENIZERS = {"Whitespace", "WhitespaceSplit"}
_PER_PRE_TOKEN_MODELS = {"BPE", "WordPiece", "WordLevel", "Unigram"}


def _members(part: dict, key: str) -> list[dict]:
    return part[key] if part.get("type") == "Sequence" else [part]


def piece_framing(tokenizer: dict) -> PieceFraming | None:
    """How to encode a long text in pieces with exactly its whole ids, for a `tokenizer.json` (parsed);
    None where some part of the tokenizer may look across a cut."""
    if tokenizer.get("truncation") is not None or tokenizer.get("padding") is not None:
        return None
    model = tokenizer.get("model") or {}
    if model.get("type") not in _PER_PRE_TOKEN_MODELS or model.get("dropout") is not None:
        return None
    for token in tokenizer.get("added_tokens") or []:
        if token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
            return None
        if any(c.isspace() for c in token["content"]):
            return None
    normalizer = tokenizer.get("normalizer")
    if normalizer is not None and any(
        n.get("type") not in _LOCAL_NORMALIZERS for n in _members(normalizer, "normalizers")
    ):
        return None
    pre = tokenizer.get("pre_tokenizer")
    if pre is None:
        return None
    for p in _members(pre, "pretokenizers"):
        kind = p.get("type")
        if not (kind in _LOCAL_PRE_TOKENIZERS or (kind == "ByteLevel" and p.get("use_regex", True))):
            return None
    head: list[int] = []
    tail: list[int] = []
    post = tokenizer.get("post_processor")
    templates = 0
    for p in _members(post, "processors") if post is not None else []:
        if p.get("type") == "ByteLevel":
            continue
        if p.get("type") != "TemplateProcessing":
            return None
        templates += 1
        items = p["single"]
        sequences = [i for i, item in enumerate(items) if "Sequence" in item]
        if templates > 1 or len(sequences) != 1:
            return None
        for target, chosen in ((head, items[: sequences[0]]), (tail, items[sequences[0] + 1 :])):
            for item in chosen:
                target += p["special_tokens"][item["SpecialToken"]["id"]]["ids"]
    return PieceFraming(tuple(head), tuple(tail))


_REGISTERED: dict[str, LevanterEncoder] = {}


def register_encoder(spec_path: str, encoder: LevanterEncoder) -> None:
    """Make `encoder_from_spec(spec_path)` in this process return `encoder` itself (shards run inline)."""
    _REGISTERED.clear()
    _REGISTERED[spec_path] = encoder


def is_registered(spec_path: str) -> bool:
    """Whether `spec_path`'s encoder was registered in this process (the driver's own, shards run inline)."""
    return spec_path in _REGISTERED


def encoder_from_spec(spec_path: str) -> LevanterEncoder | FastEncoder:
    """The encoder a `worker_spec()` saved at `spec_path` describes: the registered one in the process that
    wrote it, else read and built once per process.

    Callers write every spec under a fresh name (tokenize: one per run), so caching by path never serves
    an encoder for a tokenizer that has since changed, and a worker reads and parses it once, not per shard.
    """
    registered = _REGISTERED.get(spec_path)
    return registered if registered is not None else _encoder_from_file(spec_path)


@functools.lru_cache(maxsize=4)
def _encoder_from_file(spec_path: str) -> LevanterEncoder | FastEncoder:
    raw = read_bytes(spec_path)
    if raw is None:
        raise FileNotFoundError(f"encoder spec {spec_path} is missing")
    spec = json.loads(raw)
    if not spec["fast"]:
        return LevanterEncoder(spec["tokenizer_path"])
    from tokenizers import Tokenizer

    return FastEncoder(
        Tokenizer.from_str(spec["backend"]), prefix=spec["prefix"], suffix=spec["suffix"], dtype=spec["dtype"]
    )


def ledger_finished(cache_dir: str) -> bool:
    """Whether `cache_dir` holds a cache whose ledger says finished (Levanter's done marker)."""
    raw = read_bytes(join(cache_dir, LEDGER))
    if raw is None:
        return False
    try:
        return bool(json.loads(raw).get("is_finished"))
    except ValueError:
        return False


class _Spiller:
    """Builds a cache for a bucket in a local folder, moving each finished chunk file to the bucket at once.

    Levanter's JaggedArrayStore keeps `input_ids/data` (the tokens) and `input_ids/offsets` (row ends,
    with the row count at index 0) as zarr3 arrays cut into write chunks of W = WRITE_CHUNK elements, one file each
    (`c/<k>`). Rows are only appended, so data chunk k is final once more than (k+1)*W tokens are
    written, and offsets chunk k >= 1 once more than (k+1)*W rows are (chunk 0 holds the row count,
    rewritten by every append, so it goes last, with the metadata and `shard_ledger.json` last of all).
    Local scratch therefore stays at about one data chunk and the first offsets chunk, whatever the
    corpus size, and a finished ledger on the bucket still always means a complete cache.
    """

    def __init__(self, local: str, cache_dir: str):
        self.local, self.cache_dir = local, cache_dir
        self.spilled: set[str] = set()
        self.peak_local_bytes = 0

    def _upload(self, rel: str) -> None:
        local = os.path.join(self.local, rel)
        put_file(local, join(self.cache_dir, rel.replace(os.sep, "/")))
        os.unlink(local)
        self.spilled.add(rel)

    def _measure(self) -> None:
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(self.local) for f in names)
        self.peak_local_bytes = max(self.peak_local_bytes, size)

    def spill(self, rows: int, tokens: int) -> None:
        """Move the chunk files no later append can touch, after `rows` rows of `tokens` tokens."""
        self._measure()
        for array, extent, first in (("input_ids/data", tokens, 0), ("input_ids/offsets", rows + 1, 1)):
            for k in range(first, extent // WRITE_CHUNK):
                rel = os.path.join(array, "c", str(k))
                if rel not in self.spilled and os.path.exists(os.path.join(self.local, rel)):
                    self._upload(rel)

    def finish(self) -> None:
        self._measure()
        files = sorted(
            os.path.relpath(os.path.join(d, f), self.local) for d, _, names in os.walk(self.local) for f in names
        )
        for rel in sorted(files, key=lambda r: r == LEDGER):
            self._upload(rel)


@contextlib.contextmanager
def _build_folder(cache_dir: str) -> Iterator[tuple[str, _Spiller | None]]:
    """A local folder to build `cache_dir` in: the folder itself on disk, a spilled temporary one for buckets."""
    delete(cache_dir, recursive=True)
    if is_local(cache_dir):
        yield strip_protocol(cache_dir), None
        return
    with tempfile.TemporaryDirectory(prefix="marin-levanter-cache-") as tmp:
        spiller = _Spiller(os.path.join(tmp, "cache"), cache_dir)
        yield spiller.local, spiller
        spiller.finish()
        logger.info("built %s with at most %d bytes of local scratch", cache_dir, spiller.peak_local_bytes)


class _ShardedData:
    """Writes a JaggedArrayStore's `data` chunk files itself, an inner chunk at a time, with tensorstore's bytes.

    The data array is zarr3 with a `sharding_indexed` codec: chunk file k holds write chunk k (W elements)
    as its inner chunks (I elements each), each encoded by the inner codecs (bytes, blosc) and laid end to
    end in order, then the index (offset and length per inner chunk, all ones for one not stored, encoded
    by the index codecs: bytes and crc32c). An inner chunk all of the fill value is not stored, and a chunk
    file with no stored inner chunk is not written. Tensorstore rewrites the whole chunk file on every write
    that lands in it, holding its old and new encodings at once (two compressed write chunks: up to ~430 MB
    for Levanter's 128 Mi tokens) and taking quadratic time in the writes per chunk. Here each inner chunk
    is encoded once, by tensorstore itself (a zarr3 array of one inner chunk with the same codecs, on a
    memory kvstore), and appended to its chunk file; the index is encoded the same way when the file is
    full or the cache ends. Memory stays at one inner chunk plus the run being appended.
    """

    def __init__(self, array_dir: str, meta: dict):
        import tensorstore as ts

        shard = meta["codecs"][0]["configuration"]
        self.dir = array_dir
        self.width = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        self.inner = int(shard["chunk_shape"][0])
        self.per_file = self.width // self.inner
        self.dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        context = ts.Context()
        self._kv = ts.KvStore.open({"driver": "memory"}, context=context).result()

        def array(name: str, shape: list[int], codecs: list, data_type: str, fill_value):
            metadata = {
                "shape": shape,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
                "chunk_key_encoding": {"name": "default"},
                "codecs": codecs,
                "data_type": data_type,
                "fill_value": fill_value,
                "node_type": "array",
                "zarr_format": 3,
            }
            spec = {"driver": "zarr3", "kvstore": {"driver": "memory", "path": f"{name}/"}, "metadata": metadata}
            return ts.open(spec, create=True, context=context).result()

        self._fill_value = meta["fill_value"]
        self._chunk = array("chunk", [self.inner], shard["codecs"], meta["data_type"], self._fill_value)
        self._index = array("index", [self.per_file, 2], shard["index_codecs"], "uint64", 0)
        self._buf = np.full(self.inner, self._fill_value, dtype=self.dtype)
        self._filled = 0
        self._chunks = 0
        self._file = None
        self._offset = 0
        self._entries = np.full((self.per_file, 2), np.iinfo(np.uint64).max, dtype=np.uint64)

    def extend(self, data: np.ndarray) -> None:
        pos = 0
        while pos < len(data):
            n = min(self.inner - self._filled, len(data) - pos)
            self._buf[self._filled : self._filled + n] = data[pos : pos + n]
            self._filled += n
            pos += n
            if self._filled == self.inner:
                self._flush_chunk()

    def _flush_chunk(self) -> None:
        slot = self._chunks % self.per_file
        self._chunk.write(self._buf).result()
        encoded = self._kv.read("chunk/c/0").result()
        if encoded.state == "value":
            if self._file is None:
                path = os.path.join(self.dir, "c", str(self._chunks // self.per_file))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                self._file = open(path, "wb")  # noqa: SIM115  (closed by _end_file)
                self._offset = 0
            self._file.write(encoded.value)
            self._entries[slot] = (self._offset, len(encoded.value))
            self._offset += len(encoded.value)
        self._buf[:] = self._fill_value
        self._filled = 0
        self._chunks += 1
        if slot == self.per_file - 1:
            self._end_file()

    def _end_file(self) -> None:
        """Write the current chunk file's index and close it."""
        if self._file is not None:
            self._index.write(self._entries).result()
            self._file.write(self._kv.read("index/c/0/0").result().value)
            self._file.close()
            self._file = None
        self._entries[:] = np.iinfo(np.uint64).max

    def finish(self) -> None:
        if self._filled:
            self._flush_chunk()
        if self._chunks % self.per_file:
            self._end_file()


def _create_array(path: str, dtype: np.dtype):
    """An empty array as Levanter's JaggedArrayStore creates one on disk (its `_get_spec`): zarr3, shape 2**54,
    chunk files of WRITE_CHUNK elements sharded into inner chunks of INNER_CHUNK, blosc level 5."""
    import tensorstore as ts

    codec = {"chunk_shape": [INNER_CHUNK], "codecs": [{"name": "blosc", "configuration": {"clevel": 5}}]}
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [WRITE_CHUNK]}},
            "codecs": [{"name": "sharding_indexed", "configuration": codec}],
        },
    }
    return ts.open(spec, dtype=np.dtype(dtype).name, shape=[2**54], create=True, delete_existing=True).result()


def write_cache(cache_dir: str, encoder: LevanterEncoder, batches: Iterable[Sequence[np.ndarray]]) -> int:
    """Write a finished Levanter cache of the rows in `batches` (replacing any cache there); returns rows.

    The files are those of Levanter's `SerialCacheWriter` fed every row in one `write_batch`
    (tests/test_tokenize.py), written without importing Levanter: the store's two arrays created as its
    JaggedArrayStore creates them (`input_ids/offsets`: row ends, with the row count at index 0;
    `input_ids/data`: the tokens), then `shard_ledger.json` as its `CacheLedger` serialises it. The
    offsets are written through tensorstore in runs of about TOKENS_PER_WRITE tokens whatever the
    batches are (each write rewrites the offsets' chunk file); the tokens go to `_ShardedData`, which
    writes the data chunk files with the bytes tensorstore writes, row by row, in memory bounded by one run
    (~32 MB of int64 rows) whatever the cache size. On a bucket, finished chunk files move
    there after each run (see `_Spiller`).
    """
    rows = tokens = 0
    with _build_folder(cache_dir) as (folder, spiller):
        offsets = _create_array(os.path.join(folder, "input_ids", "offsets"), np.dtype(np.int64))
        data_dir = os.path.join(folder, "input_ids", "data")
        _create_array(data_dir, encoder.dtype)
        with open(os.path.join(data_dir, "zarr.json")) as f:
            data = _ShardedData(data_dir, json.load(f))
        pending: list[np.ndarray] = []
        pending_tokens = 0
        for batch in itertools.chain(batches, [None]):
            if batch is not None:
                pending.extend(batch)
                pending_tokens += sum(len(ids) for ids in batch)
            if pending and (batch is None or pending_tokens >= TOKENS_PER_WRITE):
                ends = tokens + np.cumsum([len(ids) for ids in pending], dtype=np.int64)
                for ids in pending:  # row by row: no concatenation of the run beside its rows
                    data.extend(ids.astype(data.dtype, copy=False))
                offsets[rows + 1 : rows + 1 + len(pending)].write(ends).result()
                offsets[0].write(rows + len(pending)).result()
                rows += len(pending)
                tokens += pending_tokens
                pending, pending_tokens = [], 0
                if spiller is not None:
                    spiller.spill(rows, tokens)
        data.finish()
        ledger = {
            "total_num_rows": rows,
            "shard_rows": {"": rows},
            "is_finished": True,
            "finished_shards": [""],
            "field_counts": {},
            "metadata": {"preprocessor_metadata": encoder.metadata},
        }
        with open(os.path.join(folder, LEDGER), "w") as f:
            f.write(json.dumps(ledger))
    logger.info("wrote Levanter cache %s (%d rows, tokenizer %s)", cache_dir, rows, encoder.tokenizer_path)
    return rows


def build_levanter_cache(texts: Iterable[str], tokenizer_dir: str, cache_dir: str, batch_size: int = 1024) -> dict:
    """A Levanter text cache at `cache_dir` (a split folder, e.g. OUT/train) from plain strings.

    Identical to what the tokenize step writes for the same texts; load it with
    `UrlSingleDatasetLMConfig(cache_dir=<parent of cache_dir>, tokenizer=tokenizer_dir)`.
    """
    from marin.processing.documents import EmptyInputError

    encoder = LevanterEncoder(tokenizer_dir)
    counts = {"documents": 0, "tokens": 0, "bytes": 0}

    def batches() -> Iterator[list[np.ndarray]]:
        remaining = iter(texts)
        while chunk := list(itertools.islice(remaining, batch_size)):
            ids = encoder.encode(chunk)
            counts["documents"] += len(chunk)
            counts["tokens"] += sum(len(a) for a in ids)
            counts["bytes"] += sum(len(t.encode("utf-8")) for t in chunk)
            yield ids

    write_cache(cache_dir, encoder, batches())
    if not counts["documents"]:
        delete(cache_dir, recursive=True)
        raise EmptyInputError(f"build_levanter_cache: no texts for {cache_dir}")
    return counts
