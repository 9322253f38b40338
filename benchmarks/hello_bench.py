"""hello_world.py end to end, as a user runs it, on each backend side by side: wall clock of the whole process.

Each run is a fresh process on a fresh empty prefix (the first run of the experiment: both steps execute).
Runs alternate between backends within each repetition, so machine load hits them alike. `ray` is run
fewer times: each of its runs starts a local Ray (the cost the default backend, `auto`, avoids).

    PYTHONPATH=. .venv/bin/python benchmarks/hello_bench.py --repeats 5 --ray-repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "experiments", "tutorial", "hello_world.py")


def one_run(backend: str | None, workdir: str) -> float:
    prefix = tempfile.mkdtemp(dir=workdir)
    args = [sys.executable, SCRIPT, "--prefix", prefix] + (["--backend", backend] if backend else [])
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    t0 = time.perf_counter()
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - t0
    if result.returncode != 0 or "2 SUCCESS" not in result.stdout + result.stderr:
        raise SystemExit(f"hello_world.py --backend {backend} failed:\n{result.stderr[-2000:]}")
    shutil.rmtree(prefix, ignore_errors=True)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of the default and of --backend local")
    ap.add_argument("--ray-repeats", type=int, default=1, help="runs of --backend ray (each starts a local Ray)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    times: dict[str, list[float]] = {"default (auto)": [], "local": [], "ray": []}
    with tempfile.TemporaryDirectory(prefix="marin-hello-bench-") as workdir:
        for i in range(max(args.repeats, args.ray_repeats)):
            if i < args.repeats:
                times["default (auto)"].append(one_run(None, workdir))
                times["local"].append(one_run("local", workdir))
            if i < args.ray_repeats:
                try:
                    times["ray"].append(one_run("ray", workdir))
                except SystemExit as exc:  # a local Ray may fail to start on a loaded machine: say so, go on
                    print(str(exc).splitlines()[0], "(Ray did not start)", file=sys.stderr)
    load = os.getloadavg()
    print(f"hello_world.py, fresh prefix per run; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'backend':<16} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7}")
    summary = {}
    for name, ts in times.items():
        if ts:
            summary[name] = {"runs": len(ts), "median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)}
            print(f"{name:<16} {len(ts):>4} {statistics.median(ts):>9.2f} {min(ts):>7.2f} {max(ts):>7.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"load_average": load, "backends": summary}, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
