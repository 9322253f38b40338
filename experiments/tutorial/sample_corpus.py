"""A small corpus in two shapes that real ones come in, for docs/your-own-data.md to run on.

    python -m experiments.tutorial.sample_corpus my_corpus

writes

    my_corpus/web/part-00000.parquet      column `content` holds the text; no id column; also `url`
    my_corpus/news/part-00000.jsonl.gz    field `text` holds the text; `url` identifies each document

from the Shakespeare plays shipped with the environment (a few scenes each, plus a few one-line documents
the quality filter removes). Same call, same bytes: the folder can be planned and rerun like any input.
"""

from __future__ import annotations

import gzip
import json
import os
import sys

from marin.download.shipped_corpus import shakespeare_documents

WEB_PLAYS = ("macbeth", "hamlet")
NEWS_PLAYS = ("othello",)
SHORT = ("Exeunt.", "Enter a messenger.", "Flourish. Exit.")
"""Stage directions, kept as documents of their own: too short for the Gopher quality filter."""


def write_sample_corpus(folder: str) -> dict[str, str]:
    """Writes the two shards under `folder`; their paths by corpus name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    web = [d["text"] for d in shakespeare_documents(plant_duplicates=False, plays=WEB_PLAYS)] + list(SHORT)
    news = shakespeare_documents(plant_duplicates=False, plays=NEWS_PLAYS)
    paths = {"web": os.path.join(folder, "web", "part-00000.parquet")}
    paths["news"] = os.path.join(folder, "news", "part-00000.jsonl.gz")
    for path in paths.values():
        os.makedirs(os.path.dirname(path), exist_ok=True)
    table = pa.table(
        {"content": web, "url": [f"https://example.org/web/{i}" for i in range(len(web))]},
    )
    pq.write_table(table, paths["web"], row_group_size=64)
    with gzip.GzipFile(paths["news"], "wb", mtime=0) as f:
        for i, doc in enumerate(news):
            line = {"url": f"https://example.org/news/{i}", "text": doc["text"]}
            f.write((json.dumps(line, sort_keys=True) + "\n").encode())
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m experiments.tutorial.sample_corpus FOLDER")
    for name, path in write_sample_corpus(sys.argv[1]).items():
        print(f"{name}: {path}")
