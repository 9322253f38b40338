"""How often the tutorial ladder's forecast holds: the whole ladder and its target, once per seed.

A forecast's interval is a claim about coverage; one run that lands inside it says little. This runs
`experiments/tutorial/tiny_ladder.py` (or `isoflop_ladder.py`) as shipped but for the training seed (the
rungs' and the target's initialisation and data order), each seed in the same prefix (the data steps run
once) and each twice, as the script's docstring says: the ladder and its forecast, then the target and
the check. Per seed it prints the forecast, the interval, the measurement, the relative error and whether
the interval covered it, with the seed's CPU-seconds (this process and its children) and wall time; then
the coverage and the mean absolute (relative) error over the seeds that finished. A seed already run in the
prefix is read back, not rerun, so the benchmark can be continued. Each row keeps the seed's rungs (their
compute, loss, deviation from the law in noise units and flags) and the rungs the forecast flagged as off
their family (marin.evaluation.rung_check), so that over new seeds it also measures how often a healthy
ladder has a rung flagged.

    .venv/bin/python benchmarks/ladder_seeds.py --seeds 0 1 2 3 4 --prefix /tmp/ladder-seeds
    .venv/bin/python benchmarks/ladder_seeds.py --ladder isoflop --seeds 0 1 2 3 4 --prefix /tmp/iso-seeds
    .venv/bin/python benchmarks/ladder_seeds.py --recheck benchmarks/results/ladder_seeds_2026-12-07_oos.jsonl

`--rungs-only` runs the tiny ladder's first run only (rungs and forecast, no target): how often a healthy
ladder has a rung flagged, at about a third of the cost.

`--recheck` reruns only the law check of this tree over the rungs of rows written before (no training).

`--replicates K` runs the tiny ladder with every rung trained K times (`tiny_ladder.build(replicates=K)`:
the forecast is fitted to all K·6 points, pre-registered like the shipped one). `--pooled K` measures the
same design after the fact, at the cost of the replicate rungs only: once the shipped seed has run (its
target measured), it trains rungs with K − 1 more seeds and fits the forecast step's own `forecast` to all
the rungs, in a scratch folder of the prefix. Such a forecast is written after the measurement and is
not a pre-registered one, but nothing in it reads the target: it is the forecast `--replicates K` would
have written, and it is checked against the same measurement.
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_seed(ladder: str, seed: int, prefix: str, replicates: int = 1) -> dict:
    """Both runs of the script for `seed`; the check's figures, CPU-seconds and wall."""
    from experiments.tutorial import isoflop_ladder, tiny_ladder
    from marin.execution import Executor
    from marin.storage import join, read_text

    start, cpu = time.time(), cpu_seconds()
    script = tiny_ladder if ladder == "tiny" else isoflop_ladder
    settings = {"seed": seed, **({"replicates": replicates} if replicates > 1 else {})}
    for _ in range(2):
        script.main(["--prefix", prefix, "--backend", "local"], **settings)
    if ladder == "tiny":
        check_step = tiny_ladder.build(**settings).target.check
    else:
        target = isoflop_ladder.target_of(prefix, seed=seed)
        if target is None:
            raise SystemExit(f"seed {seed}: the isoFLOP forecast in {prefix} chose no target (see its notes)")
        check_step = target.check
    check = json.loads(read_text(join(Executor(prefix).plan([check_step])[check_step], "check.json")))
    low, high = check["interval"] or (float("nan"), float("nan"))
    forecast_step = check_step.config.forecast.step
    written = json.loads(read_text(join(Executor(prefix).plan([forecast_step])[forecast_step], "forecast.json")))
    return {
        "seed": seed,
        "flagged_rungs": written.get("flagged_rungs"),
        "rungs": [
            {k: r.get(k) for k in ("flops", "loss", "law_deviation", "flags")} for r in written.get("rungs") or []
        ],
        "forecast": check["forecast"],
        "interval": check["interval"],
        "interval_fraction": (high - low) / check["forecast"],
        "measured": check["measured"],
        "relative_error": check["relative_error"],
        "covered": check["within_interval"],
        "cpu_s": cpu_seconds() - cpu,
        "wall_s": time.time() - start,
    }


def pooled_seed(seed: int, prefix: str, replicates: int, shipped: dict) -> dict:
    """The forecast of `tiny_ladder.build(seed=seed, replicates=replicates)`, fitted after the fact to the
    shipped seed's rungs and `replicates` − 1 more seeds' (trained here), against the shipped target."""
    from experiments.tutorial import tiny_ladder
    from marin.evaluation.forecast import ForecastConfig, forecast
    from marin.execution import Executor, executor_main
    from marin.storage import join

    start, cpu = time.time(), cpu_seconds()
    ladder = tiny_ladder.build(seed=seed, replicates=replicates)
    executor_main(steps=ladder.evaluations, argv=["--prefix", prefix, "--backend", "local"])
    paths = Executor(prefix).plan(ladder.evaluations)
    out = forecast(
        ForecastConfig(
            evaluations=[paths[e] for e in ladder.evaluations],
            output_path=join(prefix, "retrospective", f"pooled-{replicates}-seed-{seed}"),
            target_flops=ladder.forecast.config.target_flops,
        )
    )
    predicted, interval = out["prediction"]["loss"], out["prediction"]["interval"]
    measured = shipped["measured"]
    return {
        "seed": seed,
        "pooled_replicates": replicates,
        "forecast": predicted,
        "interval": interval,
        "interval_fraction": (interval[1] - interval[0]) / predicted if interval else float("nan"),
        "measured": measured,
        "relative_error": (measured - predicted) / predicted,
        "covered": bool(interval) and interval[0] <= measured <= interval[1],
        "constrained": out["constrained"],
        "replicate_cpu_s": cpu_seconds() - cpu,
        "replicate_wall_s": time.time() - start,
    }


def rungs_only(seed: int, prefix: str) -> dict:
    """The tiny ladder's first run only (its rungs and forecast, no target) for `seed`: each rung's deviation
    from its law and the rungs the forecast flagged, at about a third of a seed's cost."""
    from experiments.tutorial import tiny_ladder
    from marin.execution import Executor
    from marin.storage import join, read_text

    start, cpu = time.time(), cpu_seconds()
    tiny_ladder.main(["--prefix", prefix, "--backend", "local"], seed=seed)
    forecast_step = tiny_ladder.build(seed=seed).forecast
    written = json.loads(read_text(join(Executor(prefix).plan([forecast_step])[forecast_step], "forecast.json")))
    return {
        "seed": seed,
        "rungs_only": True,
        "flagged_rungs": written.get("flagged_rungs"),
        "rungs": [
            {k: r.get(k) for k in ("flops", "loss", "law_deviation", "flags")} for r in written.get("rungs") or []
        ],
        "forecast": written["prediction"]["loss"],
        "cpu_s": cpu_seconds() - cpu,
        "wall_s": time.time() - start,
    }


def recheck(path: str) -> None:
    """The law check of this tree (marin.evaluation.rung_check) over the rungs of rows written before:
    per seed, each rung's deviation from its law in noise units and the rungs it flags."""
    from marin.evaluation.rung_check import law_outliers

    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows if len(r.get("rungs") or []) >= 5]
    flagged_seeds = 0
    for row in rows:
        check = law_outliers([r["flops"] for r in row["rungs"]], [r["loss"] for r in row["rungs"]])
        flagged_seeds += bool(check.flagged)
        deviations = " ".join(f"{check.deviation.get(i, float('nan')):+.1f}" for i in range(len(row["rungs"])))
        print(f"seed {row['seed']}: deviations {deviations}; flagged {list(check.flagged.values()) or 'none'}")
    print(f"{path}: rungs flagged off their family in {flagged_seeds} of {len(rows)} seeds")


def recheck_isoflop_curves(prefix: str, seeds: list[int]) -> None:
    """The curve check (marin.evaluation.rung_check.curve_reasons) over each isoFLOP rung's training curve:
    the isoFLOP forecast does not run it, so this says what it would flag on healthy rungs."""
    from experiments.tutorial import isoflop_ladder
    from marin.evaluation.rung_check import curve_reasons, train_curve
    from marin.execution import Executor
    from marin.storage import join, read_text

    flagged, total = 0, 0
    for seed in seeds:
        _, ladder = isoflop_ladder.planned(prefix, seed=seed)
        out = Executor(prefix).plan([ladder.forecast])[ladder.forecast]
        written = json.loads(read_text(join(out, "forecast.json")))
        for budget in written["budgets"]:
            for rung in budget["rungs"]:
                evaluation = rung["evaluation"]
                path = evaluation if "://" in evaluation or evaluation.startswith("/") else join(out, evaluation)
                results = json.loads(read_text(join(path, "results.json")))
                curve = train_curve(path, results)
                if not curve:
                    raise SystemExit(f"seed {seed}: no training curve for the rung evaluated in {path}")
                reasons = curve_reasons(curve)
                total += 1
                flagged += bool(reasons)
                if reasons:
                    print(f"seed {seed} C={budget['flops']:.2g} N={rung['params']}: {reasons}")
    print(f"{prefix}: {flagged} of {total} isoFLOP rungs flagged by their training curve")


def summary(name: str, rows: list[dict]) -> str:
    covered = sum(bool(r["covered"]) for r in rows)
    mae = sum(abs(r["relative_error"]) for r in rows) / len(rows)
    width = sum(r["interval_fraction"] for r in rows) / len(rows)
    return (
        f"{name}, {len(rows)} seeds: the 95 % interval covered the measurement {covered}/{len(rows)}; "
        f"mean absolute relative error {mae:.2%}; mean interval {width:.2%} of the forecast; "
        f"rungs flagged off their family in {sum(bool(r.get('flagged_rungs')) for r in rows)} of {len(rows)} seeds"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladder", choices=("tiny", "isoflop"), default="tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--prefix", default="/tmp/ladder-seeds")
    parser.add_argument("--replicates", type=int, default=1, help="tiny ladder: train every rung K times")
    parser.add_argument("--pooled", type=int, default=1, help="tiny ladder: also refit with K seeds per rung")
    parser.add_argument("--recheck", metavar="JSONL", help="only rerun the law check over rows written before")
    parser.add_argument(
        "--recheck-curves", action="store_true", help="isoFLOP: only run the curve check over the seeds' rungs"
    )
    parser.add_argument(
        "--rungs-only", action="store_true", help="tiny ladder: only the rungs and the forecast (no target)"
    )
    args = parser.parse_args()
    if args.rungs_only:
        for seed in args.seeds:
            row = rungs_only(seed, args.prefix)
            print(json.dumps(row), flush=True)
        return None
    if args.recheck:
        return recheck(args.recheck)
    if args.recheck_curves:
        return recheck_isoflop_curves(args.prefix, args.seeds)
    if args.ladder != "tiny" and (args.replicates > 1 or args.pooled > 1):
        parser.error("--replicates and --pooled are the tiny ladder's")
    rows, pooled = [], []
    for seed in args.seeds:
        row = run_seed(args.ladder, seed, args.prefix, args.replicates)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.pooled > 1:
            pooled.append(pooled_seed(seed, args.prefix, args.pooled, row))
            print(json.dumps(pooled[-1]), flush=True)
    name = f"{args.ladder} ladder" + (f" ({args.replicates} seeds per rung)" if args.replicates > 1 else "")
    print(f"{summary(name, rows)}; CPU-s per seed {sum(r['cpu_s'] for r in rows) / len(rows):.0f}")
    if pooled:
        print(
            f"{summary(f'{name}, refitted with {args.pooled} seeds per rung (after the measurement)', pooled)}; "
            f"CPU-s of the replicate rungs per seed {sum(r['replicate_cpu_s'] for r in pooled) / len(pooled):.0f}"
        )


if __name__ == "__main__":
    main()
