"""Writing an experiment's records, two trees side by side: `experiment_record` and `dump_json` (the bytes
written, redaction included) of the 10,000 layered steps `plan_timing.py` plans, each measurement in a fresh
process, the trees alternating.

    .venv/bin/python benchmarks/record_write_timing.py OTHER_TREE [--n 10000] [--rounds 5]

prints the median seconds of each phase per tree and their ratio (this tree over OTHER_TREE).
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
import json, sys, time
sys.path.insert(0, {harness!r})
import dag
import marin.execution as api
from marin.execution.planning import plan_steps
from marin.execution.provenance import dump_json
from marin.execution.records import experiment_record
steps = dag.build(api, "layered", {n}, width=100, salt="plan")
plan = plan_steps(steps, "/tmp/marin-record-timing")
t0 = time.perf_counter()
record = experiment_record(plan, "timing", None, None)
t1 = time.perf_counter()
data = dump_json(record)
t2 = time.perf_counter()
print(json.dumps({{"record": t1 - t0, "dump": t2 - t1, "mb": len(data) / 1e6}}))
"""


def once(tree: str, n: int) -> dict:
    code = WORKER.format(harness=os.path.join(HERE, "executor_harness"), n=n)
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="the other tree (a checkout of the repository)")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"this": ROOT, "other": os.path.abspath(args.other)}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for r in range(args.rounds):
        for name in trees if r % 2 == 0 else reversed(list(trees)):
            runs[name].append(once(trees[name], args.n))
    print(json.dumps({"n": args.n, "rounds": args.rounds, "runs": runs}))
    for phase in ("record", "dump"):
        this = statistics.median(r[phase] for r in runs["this"])
        other = statistics.median(r[phase] for r in runs["other"])
        print(
            f"{phase} of {args.n} steps, median of {args.rounds}: other {other:.3f} s, this {this:.3f} s, "
            f"ratio x{this / other:.2f} ({runs['this'][0]['mb']:.1f} MB)"
        )


if __name__ == "__main__":
    main()
