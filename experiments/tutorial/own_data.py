"""Your own data: two corpora in the shapes real ones come in, filtered, deduplicated, tokenized and mixed.

    my_corpus/web/*.parquet     the text in column `content`, no id   ->  glob="*.parquet", text_key="content",
                                                                           id_key=None (ids: <shard>/<row>)
    my_corpus/news/*.jsonl.gz   the text in `text`, ids in `url`       ->  id_key="url"

docs/your-own-data.md walks through it (`python -m experiments.tutorial.sample_corpus my_corpus` writes such a
folder). Point CORPUS (or $MY_CORPUS) at your own folder, bucket or hub dataset and adjust the keys. Only the
steps reading the raw files name the keys: what a step writes always has `id` and `text`. With neither
$MY_CORPUS nor a `my_corpus` folder here, the script plans and runs on the sample corpus, written (same bytes
every time) under ~/.cache/marin/sample_corpus.

    marin plan experiments/tutorial/own_data.py
    python experiments/tutorial/own_data.py --prefix lab --backend local
"""

from __future__ import annotations

import os
import shutil

from experiments.defaults import default_dedup, default_download, default_filter, default_tokenize, default_tokenizer
from experiments.defaults_training import default_train
from experiments.tutorial.tiny_lm import MODEL
from marin.execution import executor_main
from marin.training.config import OptimizerConfig


def _corpus() -> str:
    if os.environ.get("MY_CORPUS") or os.path.isdir("my_corpus"):
        return os.path.abspath(os.environ.get("MY_CORPUS", "my_corpus"))
    from experiments.tutorial.sample_corpus import write_sample_corpus

    sample = os.path.join(os.path.expanduser("~"), ".cache", "marin", "sample_corpus")
    if not os.path.isdir(sample):
        staged = f"{sample}.tmp-{os.getpid()}"
        write_sample_corpus(staged)
        try:
            os.rename(staged, sample)
        except OSError:  # another process put it in place first
            shutil.rmtree(staged, ignore_errors=True)
    return sample


CORPUS = _corpus()
"""Where the raw files are: a folder here, or gs://, s3://, hf://datasets/ORG/NAME@REVISION/..."""

web_raw = default_download("my-web", f"{CORPUS}/web", glob="*.parquet")  # the default glob is **/*.jsonl.gz
news_raw = default_download("my-news", f"{CORPUS}/news")
web = default_dedup("my-web", default_filter("my-web", web_raw, text_key="content", id_key=None))
news = default_dedup("my-news", default_filter("my-news", news_raw, id_key="url"))
tokenizer = default_tokenizer("my-bpe512", web, vocab_size=512)
mixed = default_train(
    "my-mix",
    {"web": default_tokenize("my-web", web, tokenizer), "news": default_tokenize("my-news", news, tokenizer)},
    weights={"web": 0.7, "news": 0.3},
    tokenizer=tokenizer,
    model=MODEL,
    optimizer=OptimizerConfig(learning_rate=3e-3, warmup=0.1),
    train_batch_size=4,
    num_train_steps=4,
    checkpoint_every_steps=2,
)

if __name__ == "__main__":
    executor_main(
        steps=[mixed], description="Your own data: Parquet and JSON lines, mixed 70/30", experiment_name="my_data"
    )
