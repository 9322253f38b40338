"""The tutorial: a tiny language model from raw text to evaluation, every step versioned and recorded.

    Shakespeare (shipped with the environment)  ->  download  ->  quality filter  ->  dedup
        ->  train a BPE tokenizer  ->  tokenize (train + validation)  ->  train a tiny Llama  ->  evaluate

Run it with `make run` (or `python experiments/tutorial/tiny_lm.py`). Every step writes into
`<prefix>/<name>-<hash>/` with its config, log and manifest; the experiment record lands in
`<prefix>/experiments/`. Run it again and nothing runs. Change a versioned field (say the tokenizer's
vocabulary size) and only that step and what depends on it run again: `marin plan` shows which.
"""

from __future__ import annotations

import json
import os

from experiments.defaults import (
    default_dedup,
    default_download,
    default_filter,
    default_tokenize,
    default_tokenizer,
    shakespeare_source,
)
from experiments.defaults_training import default_eval, default_train
from marin.execution import ExecutorStep, executor_main
from marin.training.config import LlamaModelConfig, OptimizerConfig

MODEL = LlamaModelConfig(seq_len=128, hidden_dim=64, intermediate_dim=128, num_layers=2, num_heads=4, num_kv_heads=4)


def build(
    plays: tuple[str, ...] = (),
    vocab_size: int = 1024,
    num_train_steps: int = 200,
    train_batch_size: int = 16,
    model: LlamaModelConfig = MODEL,
) -> dict[str, ExecutorStep]:
    """The tutorial's steps by role; `plays` picks a subset of the corpus (all 38 plays when empty)."""
    source = shakespeare_source(plays=plays)
    raw = default_download("shakespeare", source, glob="*.jsonl.gz")
    filtered = default_filter("shakespeare", raw)
    deduped = default_dedup("shakespeare", filtered)
    tokenizer = default_tokenizer(f"shakespeare-bpe{vocab_size}", deduped, vocab_size=vocab_size)
    tokenized = default_tokenize("shakespeare", deduped, tokenizer)
    model_step = default_train(
        "tiny-shakespeare",
        tokenized,
        model=model,
        optimizer=OptimizerConfig(learning_rate=3e-3, warmup=0.1),
        train_batch_size=train_batch_size,
        num_train_steps=num_train_steps,
        tokenizer=tokenizer,
    )
    evaluation = default_eval("tiny-shakespeare", model_step, {"shakespeare": tokenized})
    return {
        "source": source,
        "raw": raw,
        "filtered": filtered,
        "deduped": deduped,
        "tokenizer": tokenizer,
        "tokenized": tokenized,
        "train": model_step,
        "eval": evaluation,
    }


def print_results(paths: dict) -> None:
    """The evaluation's results, and where to look next."""
    results_file = os.path.join(paths["eval"], "results.json")
    if os.path.exists(results_file):
        with open(results_file) as f:
            results = json.load(f)
        print(f"evaluation ({results_file}):")
        print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    steps = build()
    outputs = executor_main(steps=[steps["eval"]], description="Tiny LM on Shakespeare: data to evaluation")
    if outputs:
        print_results({role: outputs.get(step) for role, step in steps.items()})
        prefix = os.path.dirname(os.path.dirname(outputs[steps["eval"]]))
        print(f"browse it: marin browse {os.path.relpath(prefix)}")
