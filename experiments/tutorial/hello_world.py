"""Hello world: the smallest marin experiment, two steps and one dependency.

`generate` writes n numbered documents; `compute_stats` reads them and writes a few statistics. Run it
twice: the second run finds both steps succeeded and runs nothing. Change `n` and only the steps
downstream of the change get new hashes (new output folders); the old outputs stay where they were.

    python experiments/tutorial/hello_world.py --prefix scratch/lab
    marin plan experiments/tutorial/hello_world.py --prefix scratch/lab
    marin explain experiments/tutorial/hello_world.py hello/stats --prefix scratch/lab
"""

import json
import random
from dataclasses import dataclass

from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, output_path_of, versioned
from marin.storage import join, read_text, write_text


@dataclass(frozen=True)
class GenerateConfig:
    n: int
    """How many documents to write."""
    seed: int = 0
    """Seed of the random document lengths."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder (filled by the executor)."""


@dataclass(frozen=True)
class StatsConfig:
    input_path: str
    """The documents to read (a jsonl file)."""
    min_len: int = 0
    """Documents shorter than this many words are not counted."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder (filled by the executor)."""


def generate(config: GenerateConfig) -> None:
    """Writes `docs.jsonl` with n documents of random length."""
    rng = random.Random(config.seed)
    lines = []
    for i in range(config.n):
        words = " ".join(f"w{rng.randrange(100)}" for _ in range(rng.randrange(1, 20)))
        lines.append(json.dumps({"id": f"doc-{i}", "text": words}) + "\n")
    write_text(join(config.output_path, "docs.jsonl"), "".join(lines))
    print(f"wrote {config.n} documents")


def compute_stats(config: StatsConfig) -> None:
    """Writes `stats.json`: how many documents are long enough, and their mean length in words."""
    text = read_text(config.input_path)
    if text is None:
        raise FileNotFoundError(f"input_path {config.input_path} does not exist")
    lengths = [len(json.loads(line)["text"].split()) for line in text.splitlines()]
    kept = [n for n in lengths if n >= config.min_len]
    stats = {"documents": len(lengths), "kept": len(kept), "mean_words": sum(kept) / max(1, len(kept))}
    write_text(join(config.output_path, "stats.json"), json.dumps(stats, indent=2, sort_keys=True))
    print(f"stats: {stats}")


data = ExecutorStep(
    name="hello/data",
    fn=generate,
    config=GenerateConfig(n=versioned(1000), seed=versioned(0)),
    description="1000 random documents",
)
stats = ExecutorStep(
    name="hello/stats",
    fn=compute_stats,
    config=StatsConfig(input_path=output_path_of(data, "docs.jsonl"), min_len=versioned(3)),
    description="document statistics",
)

if __name__ == "__main__":
    executor_main(steps=[stats], description="Hello world: generate documents, then count them")
