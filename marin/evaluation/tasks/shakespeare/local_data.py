"""The loader the shipped task YAMLs name as `custom_dataset`: a JSON-lines file beside this module.

lm-eval calls it with the task's metadata and `dataset_kwargs`; nothing is read from the hub or cached.
"""

from __future__ import annotations

import json
from pathlib import Path


def load(data_file: str, **_metadata) -> dict:
    """{"test": Dataset} of the documents in `data_file` (a name relative to this folder)."""
    import datasets

    path = Path(__file__).parent / data_file
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {"test": datasets.Dataset.from_list(rows)}
