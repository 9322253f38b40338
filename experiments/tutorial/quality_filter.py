"""Research data steps on the tutorial corpus: train a quality classifier, filter with it, decontaminate.

    two plays  ----------------------------------------------->  positives  \\
    two plays, every scene garbled  -------------------------->  negatives  -> fastText classifier
    a third play, half its scenes garbled  ->  quality filter (keeps what the classifier likes)
        ->  decontaminate against an "evaluation set" quoting some of its scenes

Garbled scenes (words shuffled, lowercased, punctuation stripped) stand in for low-quality web text
(the real recipe: positives from a reference source such as Wikipedia or instruction data, negatives
sampled from the crawl you filter). The evaluation set stands in for a benchmark built from the same
text: passages of 40 words quoted from some scenes, so decontamination finds and removes those scenes
and `contamination.jsonl` says which passage each overlapped with. Copy this file and swap in your own sources, classifier inputs and eval sets.

    python experiments/tutorial/quality_filter.py --prefix scratch/lab
    marin plan experiments/tutorial/quality_filter.py --prefix scratch/lab
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass

from experiments.defaults import (
    default_decontaminate,
    default_quality_classifier,
    default_quality_filter,
    shakespeare_source,
)
from marin.execution import ExecutorStep, executor_main, output_path_of
from marin.processing.documents import encode_documents, list_shards, read_documents, shard_name
from marin.stepkit.config import StepConfig, input_field, output_field
from marin.storage import join, read_text, write_bytes

TRAIN_PLAYS = ("macbeth", "the-tempest")
TARGET_PLAYS = ("othello",)


@dataclass(frozen=True, kw_only=True)
class GarbleConfig(StepConfig):
    """Garble a share of the documents under `input_path`: a stand-in for badly extracted text."""

    input_path: str = input_field("documents")
    """Documents to copy."""
    output_path: str = output_field()
    """Where the copies go, shard for shard."""
    fraction: float = 1.0
    """Share of documents (by a hash of the id) garbled; the others are copied as they are."""
    seed: int = 0
    """Seed of the choice and of the word shuffles."""


def garble(config: GarbleConfig) -> None:
    """Copy every shard, garbling the chosen documents (words shuffled, lowercased, punctuation stripped);
    `metadata.garbled` says which."""
    for i, path in enumerate(list_shards(config.input_path)):
        docs = []
        for doc in read_documents(path):
            key = hashlib.sha256(f"{config.seed}\0{doc['id']}".encode()).digest()
            garbled = int.from_bytes(key[:8], "big") < config.fraction * 2**64
            text = doc["text"]
            if garbled:
                words = re.sub(r"[^\w\s]", "", text.lower()).split()
                random.Random(key).shuffle(words)
                text = " ".join(words)
            docs.append({**doc, "text": text, "metadata": {**doc["metadata"], "garbled": garbled}})
        write_bytes(join(config.output_path, shard_name(i)), encode_documents(docs))


@dataclass(frozen=True, kw_only=True)
class QuotedPassagesConfig(StepConfig):
    """An evaluation set of passages quoted from every `every`-th document under `input_path`."""

    input_path: str = input_field("documents")
    """Documents to quote from."""
    output_path: str = output_field()
    """Where the evaluation documents go (one shard)."""
    every: int = 10
    """Quote from documents 0, every, 2 * every, ... (in shard order)."""
    words: int = 40
    """Words per passage, from the 20th word of the document on."""


def quoted_passages(config: QuotedPassagesConfig) -> None:
    """Write the passages as documents `passage-<n>` with `metadata.quoted_from` naming their source."""
    docs = [d for path in list_shards(config.input_path) for d in read_documents(path)]
    passages = []
    for n, source in enumerate(docs[:: config.every]):
        words = source["text"].split()[20 : 20 + config.words]
        if len(words) == config.words:
            passages.append({"id": f"passage-{n}", "text": " ".join(words), "metadata": {"quoted_from": source["id"]}})
    write_bytes(join(config.output_path, shard_name(0)), encode_documents(passages))


def build(train_plays: tuple[str, ...] = TRAIN_PLAYS, target_plays: tuple[str, ...] = TARGET_PLAYS) -> dict:
    """The experiment's steps by role."""
    positives = shakespeare_source(plays=train_plays, num_shards=2)
    negatives = ExecutorStep(
        name="sources/shakespeare-garbled",
        fn=garble,
        config=GarbleConfig(input_path=output_path_of(positives)),
        description="every scene of the training plays garbled",
    )
    classifier = default_quality_classifier(
        "shakespeare-vs-garbled",
        positives,
        negatives,
        validation_fraction=0.2,
        dim=16,
        bucket=100_000,
        epoch=25,
        lr=1.0,
    )
    target = shakespeare_source(plays=target_plays, num_shards=2)
    mixed = ExecutorStep(
        name="sources/shakespeare-half-garbled",
        fn=garble,
        config=GarbleConfig(input_path=output_path_of(target), fraction=0.5),
        description="the target play with half its scenes garbled",
    )
    kept = default_quality_filter("shakespeare-half-garbled", mixed, classifier)
    eval_set = ExecutorStep(
        name="evals/shakespeare-quotes",
        fn=quoted_passages,
        config=QuotedPassagesConfig(input_path=output_path_of(target)),
        description="40-word passages quoted from every 10th scene of the target play",
    )
    clean = default_decontaminate("shakespeare-half-garbled", kept, {"quotes": eval_set})
    return {
        "positives": positives,
        "negatives": negatives,
        "classifier": classifier,
        "mixed": mixed,
        "kept": kept,
        "eval_set": eval_set,
        "clean": clean,
    }


def main() -> None:
    steps = build()
    outputs = executor_main(
        steps=[steps["clean"]],
        description="Quality classifier, quality filter and decontamination on Shakespeare",
        experiment_name="quality_filter",
    )
    for role in ("classifier", "kept", "clean"):
        if outputs and steps[role] in outputs:
            name = "classifier_info.json" if role == "classifier" else "stats.json"
            print(f"{role}: {json.dumps(json.loads(read_text(join(outputs[steps[role]], name)) or 'null'), indent=1)}")


if __name__ == "__main__":
    main()
