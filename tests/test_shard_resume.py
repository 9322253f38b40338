"""A real tokenize step process killed with SIGKILL mid-step: the rerun tokenizes only the unfinished shards."""

from __future__ import annotations

import glob
import logging
import os
import random
import signal
import subprocess
import sys
import time

from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
from tests.data_docs import doc, english_doc, tree_bytes, write_shard

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARDS = 24


def test_tokenize_killed_with_sigkill_redoes_only_the_shards_without_a_ledger(tmp_path, caplog):
    rng = random.Random(7)
    for s in range(SHARDS):
        docs = [doc(f"d{s}-{i}", english_doc(rng, rng.randint(100, 300))) for i in range(40)]
        write_shard(tmp_path / "docs" / f"part-{s:05d}.jsonl.gz", docs)
    one_shard = str(tmp_path / "docs" / "part-00000.jsonl.gz")
    train_tokenizer(TrainTokenizerConfig(input_path=one_shard, output_path=str(tmp_path / "tok"), vocab_size=300))
    config = TokenizeConfig(
        input_path=str(tmp_path / "docs"), tokenizer=str(tmp_path / "tok"), output_path=str(tmp_path / "out")
    )
    code = (
        "from marin.processing.tokenize import TokenizeConfig, tokenize; "
        f"tokenize(TokenizeConfig(input_path={config.input_path!r}, tokenizer={config.tokenizer!r}, "
        f"output_path={config.output_path!r}))"
    )
    step = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.DEVNULL)
    ledgers = str(tmp_path / "out" / ".parts" / ".shards" / "part-*[0-9].json")
    deadline = time.monotonic() + 180
    try:
        while len(glob.glob(ledgers)) < 2:
            assert step.poll() is None and time.monotonic() < deadline, "the step ended before two shards finished"
            time.sleep(0.002)
    finally:
        step.send_signal(signal.SIGKILL)
        step.wait()
    done = {int(os.path.basename(p)[5:10]) for p in glob.glob(ledgers)}
    assert 2 <= len(done) < SHARDS, done

    caplog.set_level(logging.INFO, logger="marin.processing.tokenize")
    tokenize(config)
    redone = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("tokenized shard")]
    assert sorted(os.path.basename(p) for p in redone) == [
        f"part-{s:05d}.jsonl.gz" for s in range(SHARDS) if s not in done
    ]

    tokenize(
        TokenizeConfig(input_path=config.input_path, tokenizer=config.tokenizer, output_path=str(tmp_path / "clean"))
    )
    assert tree_bytes(tmp_path / "out") == tree_bytes(tmp_path / "clean")
