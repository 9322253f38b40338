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
import shlex
import shutil
import sys

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
from marin.storage import is_local, join, read_text
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


def run_summary(eval_output: str, eval_name: str) -> str:
    """What a run prints at its end: the evaluation's results (when the step wrote them) and how to browse.

    Works on any prefix: `results.json` is read through marin.storage, and the prefix is the evaluation's
    output path less its `<name>-<hash>`, so `gs://lab/tut` stays a URL (`os.path` would make it `gs:/lab/tut`).
    """
    prefix = eval_output.rstrip("/").rsplit("/", eval_name.count("/") + 1)[0]
    lines = []
    results_file = join(eval_output, "results.json")
    text = read_text(results_file)
    if text is not None:
        lines += [f"evaluation ({results_file}):", json.dumps(json.loads(text), indent=2, sort_keys=True)]
    if is_local(prefix):
        where = os.path.relpath(prefix)
        prefix = where if not where.startswith("..") else os.path.abspath(prefix)
    lines.append(f"browse it: {marin_command()} browse {shlex.quote(prefix)}")
    return "\n".join(lines)


def marin_command() -> str:
    """`marin` when it is on the PATH, else the environment's own script (`.venv/bin/marin` after `make run`)."""
    own = os.path.join(os.path.dirname(sys.executable), "marin")
    found = shutil.which("marin")
    if found and (not os.path.exists(own) or os.path.samefile(found, own)):
        return "marin"
    if os.path.exists(own):
        where = os.path.relpath(own)
        return where if not where.startswith("..") else own
    return f"{sys.executable} -m marin.cli"


def main(**settings) -> None:
    """Runs the tutorial (`build(**settings)`) with the command line's flags, then prints its summary."""
    steps = build(**settings)
    outputs = executor_main(
        steps=[steps["eval"]],
        description="Tiny LM on Shakespeare: data to evaluation",
        experiment_name="tiny_lm",
    )
    if outputs:
        print(run_summary(outputs[steps["eval"]], steps["eval"].name))


if __name__ == "__main__":
    main()
