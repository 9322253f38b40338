"""What watching a run against its forecast costs: the same training with and without the watch, side by side.

Two figures. (1) The watch's own work, timed alone: its tracker's `log` called with a training step's
metrics (the training loss as a JAX scalar, as Levanter hands it) for every step of a run, against the
median step time of the trainings below. (2) The trainings themselves: the tests' reference config
(tests/training_fixtures.py, 53k parameters) trained `--pairs` times with and without
`watch_forecast` (alternating, so that the machine's load falls on both alike), each run's time per step
from its metrics.jsonl (`elapsed_s` of the last step minus the second's, over the steps between: the
compile and start are left out, the trackers' time per step is in), and its CPU-seconds per step
(`cpu_s`, this process's: insensitive to other load on the machine). The watch's band is the first unwatched
run's own curve ± 5 %, so that the watched runs compare, every 5 % of the run, and are never stopped.

    .venv/bin/python benchmarks/forecast_watch_cost.py --pairs 2 --steps 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def per_step(run: Path, key: str = "elapsed_s") -> float:
    """Seconds per step (wall, or the process's CPU with key="cpu_s") after the first, compiling, step."""
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return (lines[-1][key] - lines[1][key]) / (len(lines) - 2)


def watch_alone(steps: int, repeats: int = 20) -> float:
    """Seconds per step of the watch's tracker alone (a comparison every 5 % of `steps`)."""
    import jax.numpy as jnp

    from marin.training.forecast_watch import Watch, tracker_configs

    band = [{"fraction": f / 20, "loss": 5.0, "low": 4.0, "high": 6.0} for f in range(1, 21)]
    loss = jnp.asarray(5.0)
    start = time.perf_counter()
    for _ in range(repeats):
        watch = Watch(
            band=band, num_train_steps=steps, every=max(1, steps // 20), patience=3, stop=False, flops_per_step=1.0
        )
        first, last = (config.init("bench") for config in tracker_configs(watch))
        for step in range(steps):
            metrics = {"train/loss": loss, "train/lr": 1e-3}
            first.log(metrics, step=step)
            last.log(metrics, step=step)
    return (time.perf_counter() - start) / (repeats * steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()

    from marin.evaluation.forecast_curve import FRACTIONS, window_mean
    from marin.training.train import train
    from tests.training_fixtures import corpus, tiny_train_config

    root = Path(tempfile.mkdtemp(prefix="watch-cost-"))
    data = {"plays_a": str(corpus(root / "corpus")["plays_a"])}
    times: dict[str, list[float]] = {"unwatched": [], "watched": []}
    cpu: dict[str, list[float]] = {"unwatched": [], "watched": []}
    band = None
    for pair in range(args.pairs):
        for kind in ("unwatched", "watched"):
            run = root / f"{kind}-{pair}"
            options = {"wandb_mode": "disabled", "num_train_steps": args.steps}
            if kind == "watched":
                options["watch_forecast"] = band
            train(tiny_train_config(str(run), data, **options))
            times[kind].append(per_step(run))
            cpu[kind].append(per_step(run, "cpu_s"))
            if band is None:
                curve = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]
                points = [
                    {"fraction": f, "loss": m, "low": 0.95 * m, "high": 1.05 * m}
                    for f in FRACTIONS
                    for m in [window_mean(curve, f, 0.025)]
                ]
                folder = root / "forecast"
                folder.mkdir()
                (folder / "forecast.json").write_text(json.dumps({"prediction": {"flops": 1e10, "curve": points}}))
                band = str(folder)
    alone = watch_alone(args.steps)
    step = statistics.median(times["unwatched"])
    print(
        json.dumps(
            {
                "steps": args.steps,
                "pairs": args.pairs,
                "per_step_s": times,
                "median_unwatched_s": step,
                "median_watched_s": statistics.median(times["watched"]),
                "ratio_watched_over_unwatched": statistics.median(times["watched"]) / step,
                "cpu_per_step_s": cpu,
                "cpu_ratio_watched_over_unwatched": statistics.median(cpu["watched"])
                / statistics.median(cpu["unwatched"]),
                "watch_alone_s_per_step": alone,
                "watch_alone_fraction_of_a_step": alone / step,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
