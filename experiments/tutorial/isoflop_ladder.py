"""An isoFLOP ladder on the tutorial's data: which model size a budget should buy, checked by training it.

Tiny Llamas of the loss-law ladder's shape and tokenizer (two layers, two heads, a 4x MLP) are trained at
two compute budgets, 1.2e11 and 2.5e11 FLOPs (D = C / 6N tokens), five sizes at each in a window that
moves up with the budget (12k-77k parameters), each at a peak learning rate of 0.5 over its width with a
linear decay to zero. Each is evaluated on the held-out split, and the forecast step fits each budget's
loss against ln N with a parabola, takes its vertex as the budget's optimum, fits N_opt(C), D_opt(C) and
(with two budgets, a pure power law) loss_opt(C), and predicts the configuration and loss for a target
budget at least five times the largest rung's compute, with a 95 % bootstrap prediction interval for that
one run (`forecast.json`, `forecast.png`). Every rung and the target read the training split at most
once. The data steps are tiny_ladder.py's (same hashes: after it they do not run again);
docs/evaluation.md says how the ladder was chosen and what it measured over five seeds.

Run it twice. The first run trains the ladder and writes the forecast. The second finds the forecast,
declares the run it configured (the chosen model, trained for the chosen steps), trains and evaluates
it, scores it on marin's shipped lm-eval tasks, and records forecast against measured loss in the check
step's `check.json`:

    python experiments/tutorial/isoflop_ladder.py        # the ladder and its forecast
    python experiments/tutorial/isoflop_ladder.py        # the target run, its tasks, and the check
"""

from __future__ import annotations

import json
import sys

from experiments.defaults_evaluation import default_harness, forecast_target, isoflop_ladder, read_forecast
from experiments.defaults_training import LearningRateByWidth, train_tokens_of
from experiments.tutorial.tiny_ladder import BATCH, OPTIMIZER, TRAIN_TOKENS, VOCAB_SIZE, model
from experiments.tutorial.tiny_lm import build as build_tutorial
from marin.execution import Executor, executor_main
from marin.execution.main import parse_main_args, resolve_prefix
from marin.storage import join, read_text

BUDGETS = (1.2e11, 2.5e11)
WIDTHS = {
    1.2e11: (12, 16, 20, 24, 32),
    2.5e11: (16, 20, 24, 32, 40),
}
"""Each budget's five sizes (12k-77k parameters), a window that moves up with the budget around its optimum."""
LEARNING_RATES = LearningRateByWidth(rate=0.0125, at_width=40, exponent=1.0)
"""Each run's peak rate, 0.5 over its width: 4.2e-2 at d12, 2.1e-2 at d24, 1.25e-2 at d40 (near the best
measured at d8, d12, d24 and d40 at isoFLOP rungs' lengths: docs/evaluation.md)."""
TARGET_FLOPS = 1.26e12
"""5.04x the largest budget: its rungs' steps are rounded, so the largest spends 2.5004e11, and the target is
at least 5x that."""
TARGET_WIDTHS = (40, 48, 56, 64, 80, 96)
"""The shapes the forecast chooses the target's model from (the one nearest N_opt): those that spend the
target's budget in at most one pass of the plays (a narrower model would read part of them twice)."""


def build(
    plays: tuple[str, ...] = (),
    budgets=BUDGETS,
    widths=WIDTHS,
    train_tokens: int | None = None,
    target_flops: float | None = TARGET_FLOPS,
    seed: int = 0,
):
    """The ladder; `train_tokens` defaults to TRAIN_TOKENS for the whole corpus (unknown for a subset)."""
    data = build_tutorial(plays=plays, vocab_size=VOCAB_SIZE)
    if train_tokens is None and not plays:
        train_tokens = TRAIN_TOKENS
    ladder = isoflop_ladder(
        "tiny-shakespeare-isoflop",
        data["tokenized"],
        budgets=list(budgets),
        widths={budget: [model(w) for w in widths[budget]] for budget in budgets},
        vocab_size=VOCAB_SIZE,
        seq_len=128,
        train_batch_size=BATCH,
        optimizer=OPTIMIZER,
        learning_rate=LEARNING_RATES,
        tokenizer=data["tokenizer"],
        train_tokens=train_tokens,
        target_flops=target_flops,
        target_widths=[model(w) for w in TARGET_WIDTHS],
        seed=seed,
    )
    return data, ladder


def planned(prefix: str, **settings):
    """The data steps and the ladder, with the training split's size measured once the tokenize step ran."""
    data, ladder = build(**settings)
    measured = train_tokens_of(Executor(prefix).plan([data["tokenized"]])[data["tokenized"]])
    if measured is not None and measured != TRAIN_TOKENS:
        data, ladder = build(train_tokens=measured, **settings)
    return data, ladder


def target_of(prefix: str, **settings):
    """The target run the forecast in `prefix` chose (train, evaluate, check), or None before a usable forecast."""
    data, ladder = planned(prefix, **settings)
    forecast = read_forecast(Executor(prefix).plan([ladder.forecast])[ladder.forecast])
    if forecast is None or not forecast.get("constrained"):
        return None
    return forecast_target("tiny-shakespeare-isoflop", ladder, data["tokenized"], forecast)


def main(argv: list[str], **settings) -> None:
    """First run: the ladder and its forecast. Once a usable forecast exists: the target, its tasks, the check."""
    prefix = resolve_prefix(parse_main_args(argv).prefix)
    data, ladder = planned(prefix, **settings)
    target = target_of(prefix, **settings)
    if target is None:
        outputs = executor_main(steps=[ladder.forecast], description="Tiny isoFLOP ladder and its forecast", argv=argv)
        if outputs:
            print(read_text(join(outputs[ladder.forecast], "forecast.json")))
            print("run this script again to train the configuration it chose and check the forecast")
    else:
        scores = default_harness("tiny-shakespeare-isoflop-target", target.train, tasks=["marin_shakespeare"])
        outputs = executor_main(
            steps=[target.check, scores],
            description="The isoFLOP forecast's target run, its tasks, and the check",
            argv=argv,
        )
        if outputs:
            print(json.dumps(json.loads(read_text(join(outputs[target.check], "check.json"))), indent=2))
            print(read_text(join(outputs[scores], "metrics.json")))


if __name__ == "__main__":
    main(sys.argv[1:])
