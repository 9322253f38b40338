"""The tiny ladder's target trained at other peak learning rates: is the forecast's bias the target's rate?

Every run of `experiments/tutorial/tiny_ladder.py` gives a rung or its target a peak learning rate of
`LEARNING_RATE_TIMES_WIDTH` over its width. This trains and evaluates the target alone (width 128, the
given seed) with that constant set to each value given, in one prefix (the data steps are shared with any
ladder already there), and prints the held-out loss of each as a JSON line.

    .venv/bin/python benchmarks/ladder_target_lr.py 0.27 0.6 0.9 --prefix ladder-seeds8
"""

from __future__ import annotations

import argparse
import json


def target_loss(lr_times_width: float, prefix: str, seed: int) -> dict:
    """The target's held-out loss with its peak rate `lr_times_width` over its width."""
    from experiments.tutorial import tiny_ladder
    from marin.execution import Executor
    from marin.storage import join, read_text

    tiny_ladder.LEARNING_RATE_TIMES_WIDTH = lr_times_width
    evaluation = tiny_ladder.build(seed=seed).target.evaluation
    paths = Executor(prefix, backend="local", experiment_name=f"ladder_target_lr_{lr_times_width}").run([evaluation])
    results = json.loads(read_text(join(paths[evaluation], "results.json")))
    return {
        "run": f"tiny_ladder target d{tiny_ladder.TARGET}, seed {seed}",
        "lr_times_width": lr_times_width,
        "peak_lr": lr_times_width / tiny_ladder.TARGET,
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
    args = parser.parse_args()
    for value in args.lr_times_width:
        print(json.dumps(target_loss(value, args.prefix, args.seed)), flush=True)


if __name__ == "__main__":
    main()
