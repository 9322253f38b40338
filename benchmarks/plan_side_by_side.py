"""Plan and dry-run times beside Marin's executor, in one run: the executor harness's `plan` phase (a fresh
process each: import, build the layered DAG, time `plan`, then a dry run with a fresh executor) for each
implementation, the implementations alternating round by round.

    .venv/bin/python benchmarks/plan_side_by_side.py --marin-python /path/to/py312-venv/bin/python \\
        [--tree OTHER_CHECKOUT ...] [--sizes 1000,10000] [--rounds 5]

Each implementation is (name, python, adapter, PYTHONPATH): Marin's (`marin_adapter.py` from the harness
folder, run by the Python 3.12 environment where `marin-core` is installed), this tree's and, with `--tree`,
other checkouts of this project (`ours_adapter.py`). Prints the median plan and dry-run seconds of each and
the ratio Marin / implementation (above 1: faster than Marin), and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HARNESS = os.path.join(HERE, "executor_harness")


def once(python: str, adapter: str, pythonpath: str | None, n: int, work: str) -> dict:
    prefix = tempfile.mkdtemp(prefix="prefix-", dir=work)
    cmd = [python, os.path.join(HARNESS, "marin_baseline.py"), "--worker", "plan", "--adapter", adapter]
    cmd += ["--shape", "layered", "--n", str(n), "--prefix", prefix, "--salt", "side-by-side"]
    env = {**os.environ, "MARIN_PREFIX": prefix}
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"{python} {adapter} failed:\n{out.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marin-python", required=True, help="python of the environment with marin-core")
    parser.add_argument(
        "--marin-adapter",
        default=os.path.join(HARNESS, "marin_adapter.py"),
        help="the harness's adapter of Marin's executor",
    )
    parser.add_argument("--tree", action="append", default=[], help="another checkout of this project")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ours = os.path.join(HARNESS, "ours_adapter.py")
    impls = {"marin": (args.marin_python, args.marin_adapter, None), "this": (sys.executable, ours, ROOT)}
    for tree in args.tree:
        impls[os.path.basename(os.path.abspath(tree))] = (sys.executable, ours, os.path.abspath(tree))
    for _, _, tree in impls.values():
        if tree:  # bytecode, as Marin's installed package has it (PYTHONDONTWRITEBYTECODE would compile per process)
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", "-j", "0", os.path.join(tree, "marin")], check=True
            )
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {name: {n: [] for n in sizes} for name in impls}
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            order = list(impls) if r % 2 == 0 else list(reversed(impls))
            for n in sizes:
                for name in order:
                    res = once(*impls[name], n, work)
                    results[name][n].append({k: res[k] for k in ("plan_s", "dry_run_s", "import_s", "loadavg_1m_end")})
    print(json.dumps({"sizes": sizes, "rounds": args.rounds, "results": results}))
    marin = results["marin"]
    for n in sizes:
        m_plan = statistics.median(x["plan_s"] for x in marin[n])
        m_dry = statistics.median(x["dry_run_s"] for x in marin[n])
        for name in impls:
            plan = statistics.median(x["plan_s"] for x in results[name][n])
            dry = statistics.median(x["dry_run_s"] for x in results[name][n])
            print(
                f"layered {n:>6}  {name:<10} plan {plan:7.3f} s (x{m_plan / plan:5.1f})   "
                f"dry run {dry:7.3f} s (x{m_dry / dry:5.1f})"
            )


if __name__ == "__main__":
    main()
