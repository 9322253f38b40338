"""The isoFLOP ladder's runs trained alone at other peak learning rates: what rate does each width want?

The isoFLOP rungs train far longer per parameter than the loss-law ladder's (30-160 tokens per parameter
against 5), so the loss-law ladder's width rule, measured at 5, does not carry over. This trains and
evaluates single runs of the ladders' shape (`tiny_ladder.model(width)`) for a budget's steps
(`rung_steps_for_budget`: D = C / 6N, batch 8 x 128) at each peak rate given, with the tutorial's optimizer
(10 % warm-up, linear decay to zero), in one prefix (the data steps are shared with the ladders there), and
prints the held-out loss of each as a JSON line. Each run is `width:budget:rate`.

    .venv/bin/python benchmarks/isoflop_rung_lr.py 12:1.2e11:0.015 12:1.2e11:0.03 12:1.2e11:0.09 --prefix P
"""

from __future__ import annotations

import argparse
import dataclasses
import json


def losses(runs: list[tuple[int, float, float]], prefix: str, seed: int) -> list[dict]:
    """The held-out loss of each (width, budget, peak rate) run, trained with `seed`."""
    from experiments.defaults_evaluation import rung_steps_for_budget
    from experiments.defaults_training import ladder_rung, named_datasets
    from experiments.tutorial import tiny_ladder
    from experiments.tutorial.tiny_lm import build as build_tutorial
    from marin.execution import Executor
    from marin.storage import join, read_text

    data = build_tutorial(vocab_size=tiny_ladder.VOCAB_SIZE)
    tokens_per_step = tiny_ladder.BATCH * 128
    evaluations = []
    for width, budget, rate in runs:
        model = tiny_ladder.model(width)
        steps = rung_steps_for_budget(model, tiny_ladder.VOCAB_SIZE, budget, tokens_per_step)
        _, evaluation = ladder_rung(
            f"isoprobe/C{budget:.2g}/d{width}/lr{rate:g}".replace("+", ""),
            data["tokenized"],
            named_datasets(data["tokenized"]),
            max_eval_documents=None,
            model=model,
            optimizer=dataclasses.replace(tiny_ladder.OPTIMIZER, learning_rate=rate),
            train_batch_size=tiny_ladder.BATCH,
            num_train_steps=steps,
            seed=seed,
        )
        evaluations.append(((width, budget, rate, steps), evaluation))
    paths = Executor(prefix, experiment_name="isoflop_rung_lr").run([e for _, e in evaluations])
    rows = []
    for (width, budget, rate, steps), evaluation in evaluations:
        results = json.loads(read_text(join(paths[evaluation], "results.json")))
        rows.append({"width": width, "budget": budget, "peak_lr": rate, "steps": steps, "loss": results["macro_loss"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="width:budget:peak_rate, e.g. 12:1.2e11:0.03")
    parser.add_argument("--prefix", default="isoflop-rung-lr")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    runs = [(int(w), float(c), float(r)) for w, c, r in (s.split(":") for s in args.runs)]
    for row in losses(runs, args.prefix, args.seed):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
