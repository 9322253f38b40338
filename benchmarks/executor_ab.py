"""Paired first-run timings of this tree against an older one, alternating in fresh processes.

    .venv/bin/python benchmarks/executor_ab.py BEFORE_TREE [--rounds 8] [--shape chain:200] [--shape layered:1000]
        [--also LABEL=OTHER_TREE]

Each round runs, in this order and each in a fresh process on a fresh prefix: the older tree, each `--also`
tree (MARIN_FSYNC=0), this tree with MARIN_FSYNC=0, this tree (fsync on). It prints wall seconds and the
CPU seconds of the run's process (all its threads), the figure that a loaded machine moves least. Medians and per-round ratios resist a shared machine's load
better than the full harness (benchmarks/executor_compare.sh), whose phases run minutes apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.environ.get("BENCH", os.path.join(ROOT, "benchmarks", "executor_harness"))

ONE_RUN = """
import json, sys, time
sys.path.insert(0, {bench!r})
import dag
import marin.execution as api
shape, n = {shape!r}, {n}
steps = dag.build_chain(api, n) if shape == "chain" else dag.build_layered(api, n)
t, cpu = time.perf_counter(), time.process_time()
api.Executor({prefix!r}, backend="local").run(steps)
print(json.dumps({{"s": time.perf_counter() - t, "cpu": time.process_time() - cpu}}))
"""


def one(tree: str, fsync: str, shape: str, n: int) -> dict:
    """One first run in a fresh process: {"s": wall seconds, "cpu": CPU seconds of all its threads}."""
    with tempfile.TemporaryDirectory() as prefix:
        code = ONE_RUN.format(bench=BENCH, shape=shape, n=n, prefix=prefix)
        env = dict(os.environ, PYTHONPATH=tree, MARIN_FSYNC=fsync, RAY_AUTH_MODE="disabled")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--shape", action="append", default=None, help="chain:200, layered:1000 ...")
    parser.add_argument(
        "--also", action="append", default=[], help="LABEL=TREE: another tree in each round (MARIN_FSYNC=0)"
    )
    args = parser.parse_args()
    configs = {"before": (os.path.abspath(args.before), "0")}
    for spec in args.also:
        label, _, tree = spec.partition("=")
        if not tree or label in configs or label in ("staging", "fsync"):
            parser.error(f"--also {spec!r}: want LABEL=TREE with a label other than before, staging, fsync")
        configs[label] = (os.path.abspath(tree), "0")
    configs |= {"staging": (ROOT, "0"), "fsync": (ROOT, "1")}
    for spec in args.shape or ["chain:200", "layered:1000"]:
        shape, n = spec.split(":")
        runs: dict[str, list[dict]] = {label: [] for label in configs}
        for _ in range(args.rounds):
            for label, (tree, fsync) in configs.items():
                runs[label].append(one(tree, fsync, shape, int(n)))
        for figure, unit in (("s", "s"), ("cpu", "CPU s")):
            times = {label: [r[figure] for r in values] for label, values in runs.items()}
            base = statistics.median(times["before"])
            cells = []
            for label, values in times.items():
                ratios = [v / b for v, b in zip(values, times["before"], strict=True)]
                cells.append(
                    f"{label} {statistics.median(values):.3f} {unit} (x{statistics.median(values) / base:.2f}; "
                    f"per-round x{statistics.median(ratios):.2f})"
                )
            print(f"first run, {shape} {n}, {args.rounds} rounds, {unit}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
