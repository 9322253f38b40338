"""Plan time of the benchmark DAG, two trees side by side: `plan_steps` of 10,000 layered steps (the
configs the executor benchmark plans), each measurement in a fresh process, the trees alternating.

    .venv/bin/python benchmarks/plan_timing.py OTHER_TREE [--n 10000] [--rounds 7]

prints the median plan time of each tree and their ratio (this tree over OTHER_TREE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = """
import sys, time
sys.path.insert(0, {harness!r})
import dag
import marin.execution as api
steps = dag.build(api, "layered", {n}, width=100, salt="plan")
t0 = time.perf_counter()
api.Executor(prefix="/tmp/marin-plan-timing", backend="local").plan(steps)
print(time.perf_counter() - t0)
"""


def once(tree: str, n: int) -> float:
    code = WORKER.format(harness=os.path.join(HERE, "executor_harness"), n=n)
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="the other tree (a checkout of the repository)")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trees = {"this": ROOT, "other": os.path.abspath(args.other)}
    times: dict[str, list[float]] = {k: [] for k in trees}
    for r in range(args.rounds):
        for name in trees if r % 2 == 0 else reversed(list(trees)):
            times[name].append(once(trees[name], args.n))
    this, other = statistics.median(times["this"]), statistics.median(times["other"])
    print(json.dumps({"n": args.n, "rounds": args.rounds, "times": times}))
    print(
        f"plan of {args.n} layered steps, median of {args.rounds}: other {other:.3f} s, this {this:.3f} s, "
        f"ratio x{this / other:.2f}"
    )


if __name__ == "__main__":
    main()
