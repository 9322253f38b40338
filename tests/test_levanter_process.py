"""Levanter in a process that several steps share (the local backend's threads): a tokenizer on a bucket
loads in several threads at once. Levanter swaps transformers' downloader process-wide for the duration of
each load, and two loads at once undid each other's swap ("Can't load tokenizer for 'gs://...'")."""

from __future__ import annotations

import threading

from marin.storage import join, write_bytes
from tests.training_fixtures import build_tokenizer, shakespeare_paragraphs


def test_a_bucket_tokenizer_loads_in_threads_at_once(bucket_prefix, tmp_path):
    from levanter.compat.hf_checkpoints import load_tokenizer

    from marin.training.levanter_process import prepare_levanter_process

    local = build_tokenizer(tmp_path / "tok", shakespeare_paragraphs(20_000), vocab_size=300)
    remote = join(bucket_prefix("gcs"), "tok")
    for path in local.iterdir():
        write_bytes(join(remote, path.name), path.read_bytes())
    prepare_levanter_process()

    loaded, errors = [], []

    def load():
        try:
            loaded.append(len(load_tokenizer(remote)))
        except Exception as exc:  # collected: a thread's exception would otherwise be lost
            errors.append(f"{type(exc).__name__}: {exc}"[:200])

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and loaded == [300] * 4, errors
