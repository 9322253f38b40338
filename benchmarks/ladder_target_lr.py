"""The tiny ladder's runs trained at other peak learning rates: is the forecast's bias a rate?

Every run of `experiments/tutorial/tiny_ladder.py` gives a rung or its target the peak learning rate
`LEARNING_RATES(width)`. This trains and evaluates one run of the ladder's shape alone (the target's
width 128 by default, or `--width`, at the ladder's tokens per parameter, the given seed) at a peak rate
of each value given times its width (`lr_times_width`), in one prefix (the data steps are shared with any
ladder already there), and prints the held-out loss of each as a JSON line.

    .venv/bin/python benchmarks/ladder_target_lr.py 0.27 0.6 0.9 --prefix ladder-seeds8
    .venv/bin/python benchmarks/ladder_target_lr.py 0.4 0.8 1.6 --width 28 --prefix ladder-seeds8
"""

from __future__ import annotations

import argparse
import json


def target_loss(lr_times_width: float, prefix: str, seed: int, width: int | None = None) -> dict:
    """The held-out loss of the run of `width` (default the target's) at peak rate `lr_times_width` over it."""
    from experiments.defaults_training import LearningRateByWidth
    from experiments.tutorial import tiny_ladder
    from marin.execution import Executor
    from marin.storage import join, read_text

    width = width or tiny_ladder.TARGET
    tiny_ladder.LEARNING_RATES = LearningRateByWidth(rate=lr_times_width / width, at_width=width, exponent=1.0)
    evaluation = tiny_ladder.build(seed=seed, target=width).target.evaluation
    paths = Executor(prefix, backend="local", experiment_name=f"ladder_lr_d{width}_{lr_times_width}").run([evaluation])
    results = json.loads(read_text(join(paths[evaluation], "results.json")))
    return {
        "run": f"tiny_ladder shape d{width}, seed {seed}",
        "lr_times_width": lr_times_width,
        "peak_lr": lr_times_width / width,
        "loss": results["macro_loss"],
        "bpb": results["macro_bpb"],
        "steps": results["step"] + 1,
        "tokens": results["tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lr_times_width", type=float, nargs="+")
    parser.add_argument("--prefix", default="ladder-target-lr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=None, help="the run's width (default: the target's)")
    args = parser.parse_args()
    for value in args.lr_times_width:
        print(json.dumps(target_loss(value, args.prefix, args.seed, args.width)), flush=True)


if __name__ == "__main__":
    main()
