"""Tiny, real-looking documents for the data-step tests, built deterministically from a seed."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so no will more out up into do any your what "
    "time about can them some could him than its only my first new also after other over such then these years most "
    "people made like many before must through back where much your way well down should because each just those "
    "river garden window morning letter village mountain harbour winter summer kitchen library teacher doctor "
    "farmer captain soldier merchant sailor painter student bridge market castle forest meadow island valley "
    "walked carried opened closed watched listened remembered answered wondered followed gathered travelled "
    "quiet bright heavy gentle ancient narrow distant golden silver careful patient honest sudden early late"
).split()


def english_doc(rng: random.Random, n_words: int) -> str:
    """Sentences of 8-16 words ending in a period, lines of two sentences: passes Gopher and repetition filters."""
    sentences, count = [], 0
    while count < n_words:
        k = rng.randint(8, 16)
        words = [rng.choice(WORDS) for _ in range(k)]
        sentences.append(" ".join(words).capitalize() + ".")
        count += k
    return "\n".join(" ".join(sentences[i : i + 2]) for i in range(0, len(sentences), 2))


def doc(doc_id: str, text: str, **metadata) -> dict:
    return {"id": doc_id, "text": text, "source": "test", "metadata": metadata}


def write_shard(path: Path, docs: list[dict], raw_lines: list[bytes] = ()) -> Path:
    """A gzipped jsonl shard; `raw_lines` are appended verbatim (for bad lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = b"".join(json.dumps(d).encode() + b"\n" for d in docs) + b"".join(raw_lines)
    path.write_bytes(gzip.compress(body, mtime=0))
    return path


def read_shard(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines() if line.strip()]


VOLATILE = b"<volatile>"


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root (hidden work files included) by relative path.

    A file a step lists in its volatile_files.txt (anywhere under root; shard ledgers say where each
    shard ran) is there as VOLATILE, as `marin verify` compares it: present, bytes not compared.
    """
    from marin.storage.manifest import VOLATILE_LIST, is_volatile

    lists = {
        p.parent: [line.strip() for line in p.read_text().splitlines() if line.strip()]
        for p in root.rglob(VOLATILE_LIST)
    }

    def volatile(p: Path) -> bool:
        return any(p.is_relative_to(d) and is_volatile(str(p.relative_to(d)), pats) for d, pats in lists.items())

    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {rel: VOLATILE if volatile(p) else p.read_bytes() for rel, p in files.items()}
