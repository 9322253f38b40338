"""The tokenize step: Levanter caches that Levanter loads as its own, splits by id hash, reruns, bad input."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random

import numpy as np
import pytest

from marin.processing.documents import BadDocumentError, EmptyInputError
from marin.processing.levanter_cache import LevanterEncoder, build_levanter_cache
from marin.processing.tokenize import TokenizeConfig, is_validation, tokenize
from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
from tests.data_docs import doc, english_doc, tree_bytes, write_shard


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenize")
    rng = random.Random(11)
    docs = [[doc(f"d{s}-{i}", english_doc(rng, rng.randint(20, 200))) for i in range(40)] for s in range(3)]
    for s, shard in enumerate(docs):
        write_shard(root / "docs" / f"part-{s:05d}.jsonl.gz", shard)
    train_tokenizer(TrainTokenizerConfig(input_path=str(root / "docs"), output_path=str(root / "tok"), vocab_size=350))
    return root, [d for shard in docs for d in shard]


def _levanter_load(cache_dir: str, tok: str, split: str):
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig

    cfg = UrlSingleDatasetLMConfig(
        cache_dir=cache_dir, tokenizer=tok, format=TextLmDatasetFormat(), train_urls=[], validation_urls=[]
    )
    return cfg.build_or_load_cache(split, monitors=False)


def test_tokenize_writes_caches_levanter_loads_as_its_own_with_bos_and_eos(data, tmp_path, caplog):
    from transformers import AutoTokenizer

    root, docs = data
    out, tok = str(tmp_path / "out"), str(root / "tok")
    stats = tokenize(
        TokenizeConfig(input_path=str(root / "docs"), tokenizer=tok, output_path=out, validation_fraction=0.2)
    )

    val = [d for d in docs if is_validation(d["id"], 0.2)]
    train = [d for d in docs if not is_validation(d["id"], 0.2)]
    assert 10 <= len(val) <= 40
    assert stats["train"]["documents"] == len(train) and stats["validation"]["documents"] == len(val)
    assert stats["train"]["bytes"] == sum(len(d["text"].encode()) for d in train)
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    info = json.loads((tmp_path / "out" / "tokenize_info.json").read_text())
    assert info["splits"] == ["train", "validation"] and info["tokenizer_relative_to_this_folder"]
    assert os.path.normpath(os.path.join(out, info["tokenizer"])) == tok
    assert (tmp_path / "out" / "volatile_files.txt").read_text().split() == [
        "train/shard_ledger.json",
        "validation/shard_ledger.json",
    ]

    hf = AutoTokenizer.from_pretrained(tok)
    caplog.set_level(logging.WARNING)
    for split, split_docs in (("train", train), ("validation", val)):
        cache = _levanter_load(out, tok, split)
        assert cache is not None and len(cache) == len(split_docs)
        rows = cache.get_batch_sync(list(range(len(split_docs))))
        assert sum(len(r["input_ids"]) for r in rows) == stats[split]["tokens"]
        for row, d in zip(rows[:5], split_docs[:5], strict=True):
            ids = list(row["input_ids"])
            assert ids[0] == hf.bos_token_id and ids[-1] == hf.eos_token_id
            assert hf.decode(ids, skip_special_tokens=True) == d["text"]
            assert ids == hf(d["text"])["input_ids"]
    assert not [r for r in caplog.records if "Metadata mismatch" in r.getMessage()]


def test_explicit_validation_path_and_build_levanter_cache_helper(data, tmp_path):
    root, docs = data
    tok = str(root / "tok")
    write_shard(tmp_path / "val" / "part-00000.jsonl.gz", docs[:3])
    stats = tokenize(
        TokenizeConfig(
            input_path=str(root / "docs"),
            tokenizer=tok,
            output_path=str(tmp_path / "out"),
            validation_path=str(tmp_path / "val"),
            validation_fraction=0.0,
        )
    )
    assert stats["train"]["documents"] == len(docs) and stats["validation"]["documents"] == 3

    counts = build_levanter_cache([d["text"] for d in docs[:3]], tok, str(tmp_path / "helper" / "validation"))
    assert counts["documents"] == 3
    assert tree_bytes(tmp_path / "helper" / "validation") == tree_bytes(tmp_path / "out" / "validation")
    assert len(_levanter_load(str(tmp_path / "helper"), tok, "validation")) == 3


def test_tokenize_twice_gives_identical_bytes_and_a_rerun_rebuilds_only_an_unfinished_split(data, tmp_path, caplog):
    root, _ = data
    cfgs = [
        TokenizeConfig(input_path=str(root / "docs"), tokenizer=str(root / "tok"), output_path=str(tmp_path / n))
        for n in ("a", "b")
    ]
    for cfg in cfgs:
        tokenize(cfg)
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")

    (tmp_path / "a" / "validation" / "shard_ledger.json").unlink()
    train_mtime = (tmp_path / "a" / "train" / "shard_ledger.json").stat().st_mtime_ns
    caplog.set_level(logging.INFO, logger="marin.processing.tokenize")
    tokenize(cfgs[0])
    assert any("train is already finished" in r.getMessage() for r in caplog.records)
    assert (tmp_path / "a" / "train" / "shard_ledger.json").stat().st_mtime_ns == train_mtime
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")


def test_bad_configs_and_empty_input_fail_clearly(data, tmp_path):
    root, _ = data
    with pytest.raises(ValueError, match="validation_fraction must be in"):
        TokenizeConfig(input_path="x", tokenizer="t", output_path="o", validation_fraction=1.5)
    with pytest.raises(ValueError, match="set validation_fraction=0"):
        TokenizeConfig(input_path="x", tokenizer="t", output_path="o", validation_path="v")
    write_shard(tmp_path / "empty" / "part-00000.jsonl.gz", [])
    with pytest.raises(EmptyInputError, match="no documents for the train split"):
        tokenize(
            TokenizeConfig(
                input_path=str(tmp_path / "empty"), tokenizer=str(root / "tok"), output_path=str(tmp_path / "o")
            )
        )


EDGE_TEXTS = [
    "",
    " ",
    "\n\nleading blank lines",
    "trailing spaces   ",
    "naïve café, 東京, emoji 🙂, tabs\tand\r\nwindows lines",
    "a literal <|endoftext|> inside the text",
    "x" * 25_000,
    " ".join(["long text with spaces"] * 3_000),
]


def _without_post_processor(tok: str, out) -> str:
    """The same tokenizer with no post-processor: Levanter then frames texts as `bos + " " + text + " " + eos`."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    backend = Tokenizer.from_file(os.path.join(tok, "tokenizer.json"))
    backend.post_processor = None
    hf = AutoTokenizer.from_pretrained(tok)
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=hf.bos_token, eos_token=hf.eos_token).save_pretrained(
        out
    )
    return str(out)


@pytest.mark.parametrize("framing", ["post_processor", "levanter_adds_bos_eos"])
def test_encoder_ids_equal_levanter_batch_tokenizer_on_documents_and_edge_cases(data, tmp_path, framing):
    from levanter.data.text import TextLmDatasetFormat, preprocessor_for_format
    from transformers import AutoTokenizer

    from marin.processing.levanter_cache import LevanterEncoder, encoder_from_spec

    root, docs = data
    tok = (
        str(root / "tok") if framing == "post_processor" else _without_post_processor(str(root / "tok"), tmp_path / "t")
    )
    encoder = LevanterEncoder(tok)
    assert encoder.fast is not None
    assert encoder.metadata["append_bos"] == (framing == "levanter_adds_bos_eos")
    spec = tmp_path / "encoder.json"
    spec.write_text(json.dumps(encoder.worker_spec()))
    worker_encoder = encoder_from_spec(str(spec))
    processor = preprocessor_for_format(
        TextLmDatasetFormat(), AutoTokenizer.from_pretrained(tok), enforce_bos=True, enforce_eos=True
    )
    texts = [d["text"] for d in docs] + EDGE_TEXTS
    expected = [list(r["input_ids"]) for r in processor([{"text": t} for t in texts])]
    assert [list(a) for a in encoder.encode(texts)] == expected
    assert [list(a) for a in worker_encoder.encode(texts)] == expected
    assert worker_encoder.dtype == np.asarray(processor.output_exemplar["input_ids"]).dtype


def test_a_tokenizer_levanter_splits_long_texts_for_goes_through_levanters_own_preprocessor(data, tmp_path):
    from tokenizers import Tokenizer, normalizers
    from transformers import PreTrainedTokenizerFast

    from marin.processing.levanter_cache import LevanterEncoder

    root, docs = data
    backend = Tokenizer.from_file(str(root / "tok" / "tokenizer.json"))
    backend.normalizer = normalizers.Sequence([normalizers.Replace("\t", " ")])
    PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    ).save_pretrained(tmp_path / "tok")
    encoder = LevanterEncoder(str(tmp_path / "tok"))
    assert encoder.fast is None
    texts = [docs[0]["text"], "a\ttab " * 4_000]
    expected = [list(r["input_ids"]) for r in encoder.processor([{"text": t} for t in texts])]
    assert [list(a) for a in encoder.encode(texts)] == expected


def _tokenizer_variant(tok: str, out, variant: str) -> str:
    """A copy of the trained tokenizer folder `tok`, changed as `variant` says."""
    import shutil

    if variant == "levanter_adds_bos_eos":
        return _without_post_processor(tok, out)
    shutil.copytree(tok, out)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    if variant == "max_length":
        config["model_max_length"] = 512
    elif variant == "no_max_length":
        del config["model_max_length"]
    elif variant == "token_only_in_config":
        config["added_tokens_decoder"]["4096"] = {**config["added_tokens_decoder"]["0"], "content": "<|pad|>"}
    elif variant == "other_class":
        config["tokenizer_class"] = "GPT2TokenizerFast"
    elif variant == "unknown_key":
        config["add_bos_token"] = True
    elif variant == "added_tokens_file":
        (out / "added_tokens.json").write_text(json.dumps({"<|extra|>": 4096}))
    config_path.write_text(json.dumps(config))
    (out / ".executor_status").write_text("SUCCESS")
    return str(out)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("trained", True),
        ("levanter_adds_bos_eos", True),
        ("max_length", True),
        ("no_max_length", True),
        ("token_only_in_config", False),
        ("other_class", False),
        ("unknown_key", False),
        ("added_tokens_file", False),
    ],
)
def test_a_plain_tokenizer_folder_is_read_without_levanter_with_exactly_levanters_metadata(
    data, tmp_path, variant, plain
):
    """The encoder of a plain folder comes from `tokenizers` alone; any folder that transformers might read
    differently goes through Levanter. Both routes must agree wherever the plain one is taken."""
    from marin.processing.levanter_cache import plain_tokenizer

    root, docs = data
    tok = _tokenizer_variant(str(root / "tok"), tmp_path / "t", variant)
    assert (plain_tokenizer(tok) is not None) == plain
    ours, levanters = LevanterEncoder(tok), LevanterEncoder(tok, through_levanter=True)
    assert (ours.metadata, ours.dtype) == (levanters.metadata, levanters.dtype)
    assert ours.worker_spec() == levanters.worker_spec()
    texts = [d["text"] for d in docs[:20]] + EDGE_TEXTS
    assert [list(a) for a in ours.encode(texts)] == [list(a) for a in levanters.encode(texts)]
    if variant == "max_length":
        assert ours.metadata["max_length"] == 512


def test_the_tokenize_driver_imports_neither_levanter_nor_transformers_for_a_plain_tokenizer(data, tmp_path):
    """Importing Levanter costs each process ~10 CPU-s and ~380 MB: the step's driver must not pay it."""
    import subprocess
    import sys

    root, _ = data
    script = (
        "import sys\n"
        "from marin.processing.tokenize import TokenizeConfig, tokenize\n"
        f"tokenize(TokenizeConfig(input_path={str(root / 'docs')!r}, tokenizer={str(root / 'tok')!r}, "
        f"output_path={str(tmp_path / 'out')!r}, workers=2))\n"
        "print(sorted(m for m in ('levanter', 'transformers', 'jax') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout
    tokenize(
        TokenizeConfig(input_path=str(root / "docs"), tokenizer=str(root / "tok"), output_path=str(tmp_path / "b"))
    )
    assert tree_bytes(tmp_path / "out" / "train") == tree_bytes(tmp_path / "b" / "train")


def test_the_cache_layout_constants_are_levanters():
    import levanter.store.jagged_array as jagged

    from marin.processing import levanter_cache

    assert (levanter_cache.WRITE_CHUNK, levanter_cache.INNER_CHUNK) == (
        jagged.DEFAULT_WRITE_CHUNK_SIZE,
        jagged.DEFAULT_CHUNK_SIZE,
    )


def test_caches_are_byte_identical_to_levanters_serial_writer_fed_by_its_own_preprocessor(data, tmp_path):
    from levanter.compat.hf_checkpoints import load_tokenizer
    from levanter.data.text import TextLmDatasetFormat, preprocessor_for_format
    from levanter.store.cache import CacheMetadata, SerialCacheWriter

    root, docs = data
    tok = str(root / "tok")
    tokenize(TokenizeConfig(input_path=str(root / "docs"), tokenizer=tok, output_path=str(tmp_path / "ours")))
    train = [d for d in docs if not is_validation(d["id"], 0.05)]
    processor = preprocessor_for_format(TextLmDatasetFormat(), load_tokenizer(tok), enforce_bos=True, enforce_eos=True)
    metadata = CacheMetadata(preprocessor_metadata=processor.metadata)
    with SerialCacheWriter(str(tmp_path / "levanter" / "train"), processor.output_exemplar, metadata=metadata) as w:
        w.write_batch(processor(train))
    assert tree_bytes(tmp_path / "ours" / "train") == tree_bytes(tmp_path / "levanter" / "train")


def test_output_bytes_identical_across_workers_and_batch_sizes(data, tmp_path):
    """Batches of 3 documents make several batches per shard wait in the inline pipeline at once."""
    root, _ = data
    for name, workers, batch_size in (("one", 1, 1024), ("eight", 8, 1024), ("batches-of-3", 1, 3)):
        tokenize(
            TokenizeConfig(
                input_path=str(root / "docs"),
                tokenizer=str(root / "tok"),
                output_path=str(tmp_path / name),
                workers=workers,
                batch_size=batch_size,
            )
        )
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "eight") == tree_bytes(tmp_path / "batches-of-3")
    assert not (tmp_path / "one" / ".parts").exists()


def test_a_crash_after_k_shards_resumes_tokenizing_only_the_missing_ones(data, tmp_path, caplog):
    root, docs = data
    for s in range(4):
        write_shard(tmp_path / "in" / f"part-{s:05d}.jsonl.gz", docs[s * 10 : (s + 1) * 10])
    good = (tmp_path / "in" / "part-00002.jsonl.gz").read_bytes()
    write_shard(tmp_path / "in" / "part-00002.jsonl.gz", docs[20:30], raw_lines=[b'{"id": "x", "text": "\xff"}\n'])
    cfg = TokenizeConfig(
        input_path=str(tmp_path / "in"), tokenizer=str(root / "tok"), output_path=str(tmp_path / "out")
    )
    with pytest.raises(BadDocumentError, match=r"part-00002\.jsonl\.gz:11: not_utf8"):
        tokenize(cfg)
    done = {p.name for p in (tmp_path / "out" / ".parts" / ".shards").glob("part-*[0-9].json")}
    assert {"part-00000.json", "part-00001.json"} <= done and "part-00002.json" not in done

    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(good)
    caplog.set_level(logging.INFO)
    caplog.clear()  # an earlier test may have left the root logger at INFO: the first run's lines are not the rerun's
    tokenize(cfg)
    redone = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("tokenized shard")]
    expected = [f"part-{s:05d}.jsonl.gz" for s in range(4) if f"part-{s:05d}.json" not in done]
    assert sorted(os.path.basename(p) for p in redone) == expected

    tokenize(
        TokenizeConfig(
            input_path=str(tmp_path / "in"), tokenizer=str(root / "tok"), output_path=str(tmp_path / "fresh")
        )
    )
    assert tree_bytes(tmp_path / "out") == tree_bytes(tmp_path / "fresh")


def test_an_encoder_failure_in_a_shards_last_batch_leaves_it_undone_and_a_rerun_completes(data, tmp_path, monkeypatch):
    """Fault injection: the tokenizer call is replaced by one that fails once (nothing real fails on demand)."""
    root, _ = data
    cfg = TokenizeConfig(
        input_path=str(root / "docs"), tokenizer=str(root / "tok"), output_path=str(tmp_path / "out"), batch_size=3
    )
    real = LevanterEncoder.encode_later
    calls = []

    def fail_on_14th(self, texts):  # 40 documents a shard in batches of 3: call 14 is shard 0's last batch
        calls.append(len(texts))
        if len(calls) == 14:
            raise RuntimeError("injected tokenizer failure")
        return real(self, texts)

    monkeypatch.setattr(LevanterEncoder, "encode_later", fail_on_14th)
    with pytest.raises(RuntimeError, match="injected tokenizer failure"):
        tokenize(cfg)
    assert not (tmp_path / "out" / ".parts" / ".shards" / "part-00000.json").exists()

    monkeypatch.setattr(LevanterEncoder, "encode_later", real)
    tokenize(cfg)
    tokenize(dataclasses.replace(cfg, output_path=str(tmp_path / "clean")))
    assert tree_bytes(tmp_path / "out") == tree_bytes(tmp_path / "clean")


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_tokenize_into_a_bucket_writes_the_same_bytes_as_on_disk(data, tmp_path, bucket_prefix, store):
    from marin.storage import filesystem

    root, _ = data
    remote = bucket_prefix(store) + "/tokenized"
    for out in (str(tmp_path / "local"), remote):
        tokenize(TokenizeConfig(input_path=str(root / "docs"), tokenizer=str(root / "tok"), output_path=out))
    filesystem(remote).get(remote + "/", str(tmp_path / "fetched") + "/", recursive=True)
    fetched, local = tree_bytes(tmp_path / "fetched"), tree_bytes(tmp_path / "local")
    assert json.loads(fetched.pop("tokenize_info.json"))["tokenizer"] == str(root / "tok")
    assert json.loads(local.pop("tokenize_info.json"))["tokenizer_relative_to_this_folder"]
    assert fetched == local
    assert "train/input_ids/data/c/0" in fetched and "validation/shard_ledger.json" in fetched


def test_a_tokenizer_replaced_at_the_same_path_is_never_served_stale(data, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    root, docs = data
    tok = tmp_path / "tok"
    shutil.copytree(root / "tok", tok)
    cfg = dict(input_path=str(root / "docs"), tokenizer=str(tok), validation_fraction=0.0)
    first = tokenize(TokenizeConfig(**cfg, output_path=str(tmp_path / "a")))
    shutil.rmtree(tok)
    train_tokenizer(TrainTokenizerConfig(input_path=str(root / "docs"), output_path=str(tok), vocab_size=300))
    second = tokenize(TokenizeConfig(**cfg, output_path=str(tmp_path / "b")))
    hf = AutoTokenizer.from_pretrained(str(tok))
    expected = sum(len(ids) for ids in hf([d["text"] for d in docs])["input_ids"])
    assert second["train"]["tokens"] == expected != first["train"]["tokens"]


def test_a_cache_of_many_chunks_moves_to_the_bucket_chunk_by_chunk_with_the_same_bytes(
    data, tmp_path, bucket_prefix, monkeypatch, caplog
):
    """Levanter's write chunk lowered to 2048 tokens, so the tiny corpus spans many chunk files."""
    import levanter.store.jagged_array as jagged

    from marin.processing import levanter_cache

    monkeypatch.setattr(jagged, "DEFAULT_WRITE_CHUNK_SIZE", 2048)
    monkeypatch.setattr(jagged, "DEFAULT_CHUNK_SIZE", 512)
    monkeypatch.setattr(levanter_cache, "WRITE_CHUNK", 2048)
    monkeypatch.setattr(levanter_cache, "INNER_CHUNK", 512)
    monkeypatch.setattr(levanter_cache, "TOKENS_PER_WRITE", 1000)
    root, _ = data
    remote = bucket_prefix("gcs") + "/tokenized"
    caplog.set_level(logging.INFO, logger="marin.processing.levanter_cache")
    for out in (str(tmp_path / "local"), remote):
        cfg = TokenizeConfig(input_path=str(root / "docs"), tokenizer=str(root / "tok"), output_path=out)
        tokenize(dataclasses.replace(cfg, validation_fraction=0.0))
    from marin.storage import filesystem

    filesystem(remote).get(remote + "/", str(tmp_path / "fetched") + "/", recursive=True)
    fetched, local = tree_bytes(tmp_path / "fetched"), tree_bytes(tmp_path / "local")
    fetched.pop("tokenize_info.json"), local.pop("tokenize_info.json")
    assert fetched == local
    chunks = [rel for rel in local if rel.startswith("train/input_ids/data/c/")]
    assert len(chunks) >= 6, chunks
    (peak,) = [int(r.getMessage().split()[5]) for r in caplog.records if "bytes of local scratch" in r.getMessage()]
    cache_bytes = sum(len(b) for rel, b in local.items() if rel.startswith("train/"))
    print(f"local scratch peak {peak} bytes for a {cache_bytes}-byte cache in {len(chunks)} data chunks")
    assert peak < cache_bytes / 2, (peak, cache_bytes)


def test_a_crash_on_a_bucket_resumes_tokenizing_only_the_shards_without_a_ledger(
    data, tmp_path, bucket_prefix, monkeypatch
):
    from marin.storage import filesystem, list_dir

    root, docs = data
    for s in range(4):
        write_shard(tmp_path / "in" / f"part-{s:05d}.jsonl.gz", docs[s * 10 : (s + 1) * 10])
    good = (tmp_path / "in" / "part-00002.jsonl.gz").read_bytes()
    write_shard(tmp_path / "in" / "part-00002.jsonl.gz", docs[20:30], raw_lines=[b'{"id": "x", "text": "\xff"}\n'])
    remote = bucket_prefix("s3") + "/tokenized"
    cfg = TokenizeConfig(input_path=str(tmp_path / "in"), tokenizer=str(root / "tok"), output_path=remote)
    with pytest.raises(BadDocumentError, match=r"part-00002\.jsonl\.gz:11: not_utf8"):
        tokenize(cfg)
    ledgers = {n for n in list_dir(remote + "/.parts/.shards") if not n.endswith(".attempts.json")}
    assert ledgers == {"part-00000.json", "part-00001.json"}

    (tmp_path / "in" / "part-00002.jsonl.gz").write_bytes(good)
    started = []
    import marin.processing.tokenize as tokenize_module

    real = tokenize_module.read_shard

    def recording(path, *args):
        started.append(os.path.basename(path))
        return real(path, *args)

    monkeypatch.setattr(tokenize_module, "read_shard", recording)  # records which shards run, changes nothing
    tokenize(cfg)
    monkeypatch.setattr(tokenize_module, "read_shard", real)
    assert started == ["part-00002.jsonl.gz", "part-00003.jsonl.gz"]
    tokenize(dataclasses.replace(cfg, output_path=str(tmp_path / "clean")))
    filesystem(remote).get(remote + "/", str(tmp_path / "fetched") + "/", recursive=True)
    fetched, clean = tree_bytes(tmp_path / "fetched"), tree_bytes(tmp_path / "clean")
    fetched.pop("tokenize_info.json"), clean.pop("tokenize_info.json")
    assert fetched == clean and not list_dir(remote + "/.parts")


class _RecordingBackend:
    """Delegates to a Rust tokenizer and records the length of every piece (string without special tokens) handed to it."""

    def __init__(self, backend):
        self.backend, self.lengths = backend, []

    def encode_batch_fast(self, texts, add_special_tokens=True):
        self.lengths += [] if add_special_tokens else [len(t) for t in texts]
        return self.backend.encode_batch_fast(texts, add_special_tokens=add_special_tokens)


def _prefix_space_nfkc(tok: str, out) -> str:
    """The same vocabulary with an NFKC normalizer and a ByteLevel pre-tokenizer that adds a prefix space."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    backend = Tokenizer.from_file(os.path.join(tok, "tokenizer.json"))
    backend.normalizer = normalizers.NFKC()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    hf = AutoTokenizer.from_pretrained(tok)
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=hf.bos_token, eos_token=hf.eos_token).save_pretrained(
        out
    )
    return str(out)


@pytest.mark.parametrize("variant", ["post_processor", "levanter_adds_bos_eos", "prefix_space_nfkc"])
def test_a_long_text_encoded_in_pieces_has_exactly_levanters_ids_for_the_whole_text(
    data, tmp_path, monkeypatch, variant
):
    from levanter.data.text import TextLmDatasetFormat, preprocessor_for_format
    from transformers import AutoTokenizer

    from marin.processing import levanter_cache

    root, docs = data
    tok = str(root / "tok")
    if variant == "levanter_adds_bos_eos":
        tok = _without_post_processor(tok, tmp_path / "t")
    elif variant == "prefix_space_nfkc":
        tok = _prefix_space_nfkc(tok, tmp_path / "t")
    monkeypatch.setattr(levanter_cache, "LONG_TEXT_CHARS", 2_000)
    monkeypatch.setattr(levanter_cache, "PIECE_CHARS", 300)
    monkeypatch.setattr(levanter_cache, "PIECES_PER_CALL", 3)
    rng = random.Random(5)
    tricky = ["it's", "they'll", "  two  spaces ", "tab\there", "breaks\n\n", "x1 2y", "12 345", "ﬁne", "naïve café"]
    tricky += ["İstanbul", "🙂", "<|endoftext|>", "<|begin_of_text|>", "end.", "a  \n b", "\r\n", "ΣΑΣ", "\u00a0nbsp"]
    long_text = " ".join(rng.choice(tricky + english_doc(rng, 2).split()) for _ in range(4_000))
    texts = [docs[0]["text"], long_text, "short", long_text.replace(" ", "\n"), *EDGE_TEXTS, long_text + " x"]

    encoder = LevanterEncoder(tok)
    assert encoder.fast is not None and encoder.fast.pieces is not None
    recording = _RecordingBackend(encoder.fast._backend)
    encoder.fast._backend = recording
    processor = preprocessor_for_format(
        TextLmDatasetFormat(), AutoTokenizer.from_pretrained(tok), enforce_bos=True, enforce_eos=True
    )
    expected = [list(r["input_ids"]) for r in processor([{"text": t} for t in texts])]
    assert [list(a) for a in encoder.encode(texts)] == expected
    longest_word = max(len(w) for t in tricky for w in t.split())
    assert len(long_text) > 20_000 and len(recording.lengths) > 3 * 20_000 // 300
    assert max(n for n in recording.lengths if n < 25_000) <= 300 + 2 * longest_word + 40  # "x" * 25_000: no cut
    assert max(recording.lengths) >= 25_000


def test_tokenizers_whose_parts_may_look_across_a_cut_are_encoded_whole(data):
    from marin.processing.levanter_cache import piece_framing

    root, _ = data
    base = json.loads((root / "tok" / "tokenizer.json").read_text())
    assert piece_framing(base) is not None
    changes = {
        "Replace normalizer": {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "_"}},
        "Metaspace": {"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}},
        "no regex split": {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}},
        "BERT post-processor": {"post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]}},
        "BPE dropout": {"model": {**base["model"], "dropout": 0.1}},
        "added token that strips": {"added_tokens": [{**base["added_tokens"][0], "rstrip": True}]},
        "added token with a space": {"added_tokens": [{**base["added_tokens"][0], "content": "<a b>"}]},
    }
    for name, change in changes.items():
        assert piece_framing({**base, **change}) is None, name


def _many_chunk_rows() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    rows = [rng.integers(1, 350, int(rng.integers(0, 300))).astype(np.int32) for _ in range(120)]
    rows.insert(40, np.zeros(1500, np.int32))  # a whole inner chunk of the fill value
    rows.append(np.zeros(2 * 2048 + 700, np.int32))  # a whole chunk file of it, and part of the next
    rows.append(np.arange(1, 8, dtype=np.int32))
    return rows


@pytest.fixture
def small_chunks(monkeypatch):
    """Levanter's write chunk lowered to 2048 tokens of 4 inner chunks, so a few thousand tokens span many files."""
    import levanter.store.jagged_array as jagged

    from marin.processing import levanter_cache

    monkeypatch.setattr(jagged, "DEFAULT_WRITE_CHUNK_SIZE", 2048)
    monkeypatch.setattr(jagged, "DEFAULT_CHUNK_SIZE", 512)
    monkeypatch.setattr(levanter_cache, "WRITE_CHUNK", 2048)
    monkeypatch.setattr(levanter_cache, "INNER_CHUNK", 512)
    monkeypatch.setattr(levanter_cache, "TOKENS_PER_WRITE", 1000)


def test_data_chunk_files_written_by_write_cache_are_levanters_bytes_over_many_chunks(data, tmp_path, small_chunks):
    """Our chunk-file writer against SerialCacheWriter fed every row in one write, over 20 chunk files,
    with an inner chunk and a whole chunk file of zeros (the fill value: not stored) and a partial last chunk."""
    from levanter.store.cache import CacheMetadata, SerialCacheWriter

    from marin.processing.levanter_cache import write_cache

    root, _ = data
    encoder = LevanterEncoder(str(root / "tok"))
    rows = _many_chunk_rows()
    write_cache(str(tmp_path / "ours"), encoder, [rows[i : i + 7] for i in range(0, len(rows), 7)])
    metadata = CacheMetadata(preprocessor_metadata=encoder.metadata)
    exemplar = {"input_ids": np.zeros(0, dtype=encoder.dtype)}
    with SerialCacheWriter(str(tmp_path / "levanter"), exemplar, metadata=metadata) as writer:
        writer.write_batch([{"input_ids": r} for r in rows])
    ours, levanters = tree_bytes(tmp_path / "ours"), tree_bytes(tmp_path / "levanter")
    files = sorted(rel for rel in ours if rel.startswith("input_ids/data/c/"))
    assert len(files) >= 10 and "input_ids/data/c/18" not in ours, files  # chunk 18 is all zeros
    assert ours == levanters


def test_write_cache_writes_each_data_chunk_file_once_never_rewriting_it(data, tmp_path, small_chunks):
    """Tensorstore rewrites a chunk file (a new file renamed over it) on every write landing in it, holding its
    old and new encodings in memory: the driver's peak grew with the cache up to two compressed 128 Mi-token
    chunks. Each file must be created once and only appended to, whatever the runs of rows."""
    from marin.processing.levanter_cache import write_cache

    root, _ = data
    out = tmp_path / "cache"
    rows = _many_chunk_rows()
    seen: dict[str, int] = {}

    def batches():
        for i in range(0, len(rows), 7):
            yield rows[i : i + 7]
            chunks = out / "input_ids" / "data" / "c"
            for f in chunks.iterdir() if chunks.exists() else []:
                assert seen.setdefault(f.name, f.stat().st_ino) == f.stat().st_ino, f"{f.name} was rewritten"

    write_cache(str(out), LevanterEncoder(str(root / "tok")), batches())
    assert len(seen) >= 10, seen


def test_a_shard_in_a_process_of_its_own_runs_the_rust_tokenizer_on_its_share_of_cores(data, tmp_path, monkeypatch):
    """One core per worker process: the Rust calls run serially (no rayon pool of every core per process, whose
    idle threads spin); the driver's own inline shards keep every core. The environment is restored after."""
    from marin.processing import levanter_cache
    from marin.processing import tokenize as step

    root, _ = data
    encoder = LevanterEncoder(str(root / "tok"))  # Levanter sets TOKENIZERS_PARALLELISM=true where unset
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(encoder.worker_spec()))
    seen: list[str | None] = []
    real = levanter_cache.FastEncoder.encode_later

    def spy(self, texts):
        seen.append(os.environ.get("TOKENIZERS_PARALLELISM"))
        return real(self, texts)

    monkeypatch.setattr(levanter_cache.FastEncoder, "encode_later", spy)
    shard_path = str(next((root / "docs").iterdir()))
    job = step.TokenizeJob(str(spec), False, 16, cores=1)
    worker = step.tokenize_shard(job, step.TokenizeShard(shard_path, 0.05, str(tmp_path / "worker")))
    assert seen and set(seen) == {"false"}
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
    seen.clear()
    levanter_cache.register_encoder(str(spec), encoder)
    inline = step.tokenize_shard(job, step.TokenizeShard(shard_path, 0.05, str(tmp_path / "inline")))
    assert seen and set(seen) == {"true"}
    assert worker == inline
    for split in ("train", "validation"):
        assert (tmp_path / f"worker.{split}.bin").read_bytes() == (tmp_path / f"inline.{split}.bin").read_bytes()
