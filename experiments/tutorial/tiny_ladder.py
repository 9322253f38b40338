"""A scaling ladder on the tutorial's data: forecast a bigger run before paying for it.

Four tiny Llamas (widths 24, 32, 48, 64) are trained at compute-matched budgets (D = tokens_per_param · N
tokens each, C = 6·N·D FLOPs), each is evaluated on the held-out split, and a forecast step fits
loss(C) = a·C^(−b) + c to the four points and predicts the loss of a run ten times bigger, with an
interval, in `forecast.json` and `forecast.png`. The data steps are the tutorial's (same hashes, so
after `make run` they are not run again). tokens_per_param is 2 here, not the usual 20, so that the
ladder takes minutes on a CPU; the forecast says so in its record.

    python experiments/tutorial/tiny_ladder.py
    marin browse local_store        # the ladder's forecast plot is on the forecast step's page
"""

from __future__ import annotations

import json

from experiments.defaults_training import scaling_ladder
from experiments.tutorial.isoflop_ladder import TRAIN_TOKENS
from experiments.tutorial.tiny_lm import build as build_tutorial
from marin.execution import executor_main
from marin.storage import join, read_text
from marin.training.config import OptimizerConfig

VOCAB_SIZE = 1024


def build(
    sizes: tuple[int, ...] = (24, 32, 48, 64),
    tokens_per_param: float = 2,
    plays: tuple[str, ...] = (),
    train_tokens: int | None = None,
):
    """The ladder; `train_tokens` (checked against each rung) defaults to the whole corpus's TRAIN_TOKENS."""
    data = build_tutorial(plays=plays, vocab_size=VOCAB_SIZE)
    if train_tokens is None and not plays:
        train_tokens = TRAIN_TOKENS
    return scaling_ladder(
        "tiny-shakespeare-ladder",
        data["tokenized"],
        sizes=list(sizes),
        vocab_size=VOCAB_SIZE,
        tokens_per_param=tokens_per_param,
        seq_len=128,
        train_batch_size=16,
        optimizer=OptimizerConfig(learning_rate=3e-3, warmup=0.1),
        tokenizer=data["tokenizer"],
        train_tokens=train_tokens,
    )


if __name__ == "__main__":
    ladder = build()
    outputs = executor_main(steps=[ladder.forecast], description="Tiny scaling ladder with a loss forecast")
    if outputs:
        forecast = read_text(join(outputs[ladder.forecast], "forecast.json"))
        if forecast is not None:
            print(json.dumps(json.loads(forecast).get("prediction"), indent=2))
            print(f"plot: {join(outputs[ladder.forecast], 'forecast.png')}")
