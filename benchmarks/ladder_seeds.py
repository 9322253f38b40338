"""How often the tutorial ladder's forecast holds: the whole ladder and its target, once per seed.

A forecast's interval is a claim about coverage; one run that lands inside it says little. This runs
`experiments/tutorial/tiny_ladder.py` (or `isoflop_ladder.py`) as shipped but for the training seed (the
rungs' and the target's initialisation and data order), each seed in the same prefix (the data steps run
once) and each twice, as the script's docstring says: the ladder and its forecast, then the target and
the check. Per seed it prints the forecast, the interval, the measurement, the relative error and whether
the interval covered it, with the seed's CPU-seconds (this process and its children) and wall time; then
the coverage and the mean absolute (relative) error over the seeds that finished. A seed already run in the
prefix is read back, not rerun, so the benchmark can be continued.

    .venv/bin/python benchmarks/ladder_seeds.py --seeds 0 1 2 3 4 --prefix /tmp/ladder-seeds
    .venv/bin/python benchmarks/ladder_seeds.py --ladder isoflop --seeds 0 1 2 3 4 --prefix /tmp/iso-seeds
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_seed(ladder: str, seed: int, prefix: str) -> dict:
    """Both runs of the script for `seed`; the check's figures, CPU-seconds and wall."""
    from experiments.tutorial import isoflop_ladder, tiny_ladder
    from marin.execution import Executor
    from marin.storage import join, read_text

    start, cpu = time.time(), cpu_seconds()
    script = tiny_ladder if ladder == "tiny" else isoflop_ladder
    for _ in range(2):
        script.main(["--prefix", prefix, "--backend", "local"], seed=seed)
    if ladder == "tiny":
        check_step = tiny_ladder.build(seed=seed).target.check
    else:
        target = isoflop_ladder.target_of(prefix, seed=seed)
        if target is None:
            raise SystemExit(f"seed {seed}: the isoFLOP forecast in {prefix} chose no target (see its notes)")
        check_step = target.check
    check = json.loads(read_text(join(Executor(prefix).plan([check_step])[check_step], "check.json")))
    low, high = check["interval"] or (float("nan"), float("nan"))
    return {
        "seed": seed,
        "forecast": check["forecast"],
        "interval": check["interval"],
        "interval_fraction": (high - low) / check["forecast"],
        "measured": check["measured"],
        "relative_error": check["relative_error"],
        "covered": check["within_interval"],
        "cpu_s": cpu_seconds() - cpu,
        "wall_s": time.time() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladder", choices=("tiny", "isoflop"), default="tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--prefix", default="/tmp/ladder-seeds")
    args = parser.parse_args()
    rows = []
    for seed in args.seeds:
        row = run_seed(args.ladder, seed, args.prefix)
        rows.append(row)
        print(json.dumps(row), flush=True)
    covered = sum(bool(r["covered"]) for r in rows)
    mae = sum(abs(r["relative_error"]) for r in rows) / len(rows)
    print(
        f"{args.ladder} ladder, {len(rows)} seeds: the 95 % interval covered the measurement {covered}/{len(rows)}; "
        f"mean absolute relative error {mae:.2%}; mean interval {sum(r['interval_fraction'] for r in rows) / len(rows):.2%} "
        f"of the forecast; CPU-s per seed {sum(r['cpu_s'] for r in rows) / len(rows):.0f}"
    )


if __name__ == "__main__":
    main()
