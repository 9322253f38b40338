"""Cold import cost of the executor, two trees side by side: CPU seconds (user + sys) of a fresh
`python -c IMPORT` minus those of `python -c pass`, the trees alternating in each round.

    .venv/bin/python benchmarks/import_timing.py OTHER_TREE [--rounds 12] [--bytecode]

prints, for three imports (the package, the names an experiment script imports, and the package with
the engine behind `Executor`), the median and minimum of each tree and their ratio (this tree over
OTHER_TREE). CPU seconds, not wall time: on a loaded machine the wall time of one import moves by x3
between two runs of the same tree, its CPU time far less. Without `--bytecode` every module is compiled
from source (PYTHONDONTWRITEBYTECODE=1, as in this project's test runs), so the figure grows with the
lines imported; with it each tree gets its own bytecode cache (PYTHONPYCACHEPREFIX), warmed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORTS = (
    "import marin.execution",
    "from marin.execution import THIS_OUTPUT_PATH, ExecutorStep, executor_main, output_path_of, versioned",
    "import marin.execution; marin.execution.Executor",
)


def cpu_seconds(tree: str, code: str, env: dict) -> float:
    child = subprocess.Popen([sys.executable, "-c", code], cwd=tree, env={**env, "PYTHONPATH": tree})
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise RuntimeError(f"{code!r} failed in {tree}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", help="the tree to compare with (e.g. a git worktree of an older commit)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--bytecode", action="store_true", help="with bytecode caches (one per tree)")
    args = parser.parse_args()
    trees = [os.path.abspath(args.other), ROOT]
    cache = tempfile.mkdtemp(prefix="marin-import-timing-")
    envs = {}
    for i, tree in enumerate(trees):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        envs[tree] = (
            {**env, "PYTHONPYCACHEPREFIX": os.path.join(cache, str(i))}
            if args.bytecode
            else {
                **env,
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
    for code in IMPORTS:
        if args.bytecode:
            for tree in trees:
                cpu_seconds(tree, code, envs[tree])
        figures: dict[str, list[float]] = {tree: [] for tree in trees}
        for _ in range(args.rounds):
            for tree in trees:
                figures[tree].append(cpu_seconds(tree, code, envs[tree]) - cpu_seconds(tree, "pass", envs[tree]))
        other, this = (statistics.median(figures[t]) for t in trees)
        print(f"{code}  ({'bytecode' if args.bytecode else 'from source'}, {args.rounds} rounds)")
        for name, tree in (("other", trees[0]), ("this", trees[1])):
            print(f"  {name:5s} median {statistics.median(figures[tree]):.3f} CPU s, min {min(figures[tree]):.3f}")
        print(f"  ratio this/other x{this / other:.2f}")


if __name__ == "__main__":
    main()
