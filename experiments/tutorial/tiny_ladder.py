"""A scaling ladder on the tutorial's data: forecast a bigger run before paying for it, then check it.

Eight tiny Llamas (widths 28 to 80; two layers, two heads, a 4x MLP) are trained at compute-matched
budgets (D = tokens_per_param · N tokens each, C = 6·N·D FLOPs) over 35x of compute, each with a peak
learning rate that falls as width^-1.8 (the best measured at each width) and a linear decay to zero;
each is evaluated on the held-out split, and a forecast step fits loss(C) = a·C^(−b) + c to the eight
points and predicts the loss of the target run, a width-128 Llama of the same shape trained the same
way at 5.6x the largest rung's compute, with a 95 % prediction interval (a residual bootstrap), in
`forecast.json` and `forecast.png`. The plays are read through a 320-token byte-level BPE of their own
(the tutorial's download, filter and dedup steps are shared; its 1024-token tokenizer is not used here):
small vocabularies keep the models' parameters out of the embeddings and give the plays 3.05 M tokens.
tokens_per_param is 5, so that the target reads the training split once and the ladder and its target
take about 10 minutes on two cores; docs/evaluation.md says how the ladder was chosen, what it
measured, and how often its forecast held over five seeds (within 2 % in three, its interval under 10 %
in one: a forecast whose interval is wider calls itself unconstrained).

Run it twice. The first run trains the ladder and writes the forecast. The second trains and evaluates
the target and records forecast against measured loss in the check step's `check.json` (a forecast
written after the target started is refused, so the target never runs with the ladder):

    python experiments/tutorial/tiny_ladder.py        # the ladder and its forecast
    python experiments/tutorial/tiny_ladder.py        # the target run and the check
    marin browse local_store        # the forecast plot and the check are on the forecast step's page
"""

from __future__ import annotations

import json
import sys

from experiments.defaults_evaluation import read_forecast
from experiments.defaults_training import Ladder, LearningRateByWidth, TargetRun, check_step, scaling_ladder
from experiments.tutorial.tiny_lm import build as build_tutorial
from marin.evaluation.forecast import ForecastConfig, forecast
from marin.execution import Executor, ExecutorStep, executor_main, output_path_of
from marin.execution.main import parse_main_args, resolve_prefix
from marin.storage import join, read_text
from marin.training.config import LlamaModelConfig, OptimizerConfig

VOCAB_SIZE = 320
"""The ladders' byte-level BPE: the 256 bytes, two special tokens and 62 merges."""
TRAIN_TOKENS = 3_052_481
"""Tokens in the training split of all 38 plays with that tokenizer (its tokenize step's `stats.json`)."""
SIZES = (28, 32, 40, 48, 56, 64, 72, 80)
"""The rungs' widths: 43k-256k parameters, 35x in compute from the smallest to the largest."""
TARGET = 128
"""The target's width: 607k parameters, 5.6x the largest rung's compute, 3.04 M tokens (one pass of the plays)."""
TOKENS_PER_PARAM = 5
BATCH = 8
"""Sequences of 128 tokens per step."""
LEARNING_RATE = 1e-2
"""The isoFLOP ladder's peak learning rate (one for every width)."""
LEARNING_RATES = LearningRateByWidth(rate=2.6e-3, at_width=128, exponent=1.8)
"""Each run's peak learning rate by its width: 4.0e-2 at d28, 1.5e-2 at d48, 6.1e-3 at d80, 2.6e-3 at the
target (measured best at each of d28, d40, d48, d64, d80 and d128, seed 0: docs/evaluation.md)."""
OPTIMIZER = OptimizerConfig(learning_rate=LEARNING_RATE, warmup=0.1, lr_schedule="linear", min_lr_ratio=0.0)
"""AdamW, a 10 % warm-up, then a linear decay to zero: the end of training averages out the last steps' noise."""
REPLICATE_SEED_STRIDE = 1000
"""Replicate r of a ladder with seed s trains its rungs with seed s + r·1000, so that the replicates of seeds
0-999 share no rung with one another or with another seed's ladder."""


def model(width: int) -> LlamaModelConfig:
    """The ladder's shape at `width`: two layers, two heads, a 4x MLP, for every rung and the target."""
    return LlamaModelConfig(
        seq_len=128, hidden_dim=width, intermediate_dim=4 * width, num_layers=2, num_heads=2, num_kv_heads=2
    )


def build(
    sizes: tuple[int, ...] = SIZES,
    tokens_per_param: float = TOKENS_PER_PARAM,
    plays: tuple[str, ...] = (),
    train_tokens: int | None = None,
    target: int | None = TARGET,
    seed: int = 0,
    train_batch_size: int = BATCH,
    replicates: int = 1,
    stop_off_forecast: bool = False,
):
    """The ladder (its `target` the run to check); `train_tokens` (checked against each rung and the
    target) defaults to the whole corpus's TRAIN_TOKENS.

    `replicates` > 1 trains every rung that many times (seeds `seed + r·REPLICATE_SEED_STRIDE`), and the
    forecast fits the law to all of them as separate points (replicates at the same compute: the fit's
    residual variance then has 3 degrees of freedom more per replicate); the target is trained once, with
    `seed`. With 1 (the default) the ladder is `scaling_ladder`'s own. `stop_off_forecast` watches the
    target against the forecast's curve and stops it once it leaves the band (docs/training.md)."""
    if replicates < 1:
        raise ValueError(f"tiny_ladder: replicates must be >= 1, got {replicates}")
    data = build_tutorial(plays=plays, vocab_size=VOCAB_SIZE)
    if train_tokens is None and not plays:
        train_tokens = TRAIN_TOKENS
    ladders = [
        scaling_ladder(
            "tiny-shakespeare-ladder",
            data["tokenized"],
            sizes=[model(w) for w in sizes],
            vocab_size=VOCAB_SIZE,
            tokens_per_param=tokens_per_param,
            seq_len=128,
            train_batch_size=train_batch_size,
            optimizer=OPTIMIZER,
            learning_rate=LEARNING_RATES,
            tokenizer=data["tokenizer"],
            train_tokens=train_tokens,
            target=model(target) if target is not None and r == 0 else None,
            seed=seed + r * REPLICATE_SEED_STRIDE,
            stop_off_forecast=stop_off_forecast,
        )
        for r in range(replicates)
    ]
    if replicates == 1:
        return ladders[0]
    return pooled(ladders)


def pooled(ladders: list[Ladder]) -> Ladder:
    """One ladder from replicates of it: every replicate's rungs, one forecast fitted to all their
    evaluations at the first replicate's target compute, and that replicate's target and check."""
    first = ladders[0]
    evaluations = [e for ladder in ladders for e in ladder.evaluations]
    forecast_step = ExecutorStep(
        name=first.forecast.name,
        fn=forecast,
        config=ForecastConfig(
            evaluations=[output_path_of(e) for e in evaluations], target_flops=first.forecast.config.target_flops
        ),
        description=f"forecast tiny-shakespeare-ladder: fit loss(C) over {len(ladders)} replicates of "
        f"{len(first.evaluations)} rungs, predict at {first.forecast.config.target_flops:.3g} FLOPs",
    )
    target = None
    if first.target is not None:
        name = first.forecast.name.removeprefix("forecast/")
        check = check_step(name, forecast_step, first.target.train, first.target.evaluation)
        target = TargetRun(first.target.train, first.target.evaluation, check)
    return Ladder([t for ladder in ladders for t in ladder.trains], evaluations, forecast_step, target)


def main(argv: list[str], **settings) -> None:
    """First run: the ladder and its forecast. Once the forecast exists: the target and the check."""
    prefix = resolve_prefix(parse_main_args(argv).prefix)
    ladder = build(**settings)
    if read_forecast(Executor(prefix).plan([ladder.forecast])[ladder.forecast]) is None:
        outputs = executor_main(
            steps=[ladder.forecast], description="Tiny scaling ladder with a loss forecast", argv=argv
        )
        written = outputs and read_text(join(outputs[ladder.forecast], "forecast.json"))
        if written:  # None after --dry_run
            forecast = json.loads(written)
            summary = ("prediction", "constrained", "notes", "flagged_rungs", "prediction_other")
            print(json.dumps({k: forecast.get(k) for k in summary}, indent=2))
            for flagged in forecast.get("flagged_rungs") or []:
                print(f"FLAGGED rung {flagged['evaluation']}: {'; '.join(flagged['reasons'])} (left out of the fit)")
            print(f"plot: {join(outputs[ladder.forecast], 'forecast.png')}")
            print("run this script again to train the target run and check the forecast")
    else:
        outputs = executor_main(
            steps=[ladder.target.check], description="The tiny ladder's target run and the check", argv=argv
        )
        written = outputs and read_text(join(outputs[ladder.target.check], "check.json"))
        if written:
            print(json.dumps(json.loads(written), indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
