"""No-op rerun of a 1,000-step experiment on the GCS emulator, with and without 20 ms per request.

A rerun where every step already succeeded must cost a handful of round trips per step, issued
concurrently: one request after another at 20 ms would take 20 s and more. This script starts
fake-gcs-server on 127.0.0.1, runs the experiment once (populating the bucket), then times no-op
reruns straight to the emulator and through the fault proxy (no faults) adding 0 and 20 ms to every
request, and counts the requests per step at the proxy.

    python benchmarks/bucket_bench.py [--steps 1000] [--latency-ms 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from marin.execution import Executor
    from tests.emulators import clear_storage_caches, start_gcs
    from tests.fault_proxy import FaultProxy
    from tests.lease_dag import build

    work = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    emulator = start_gcs(work)
    try:
        os.environ.update(emulator.env())
        clear_storage_caches()
        prefix = f"gs://{emulator.bucket}/bench"
        steps = build(str(work / "calls"), args.steps)

        def rerun() -> float:
            executor = Executor(prefix, backend="local", experiment_name="bench")
            start = time.perf_counter()
            result = executor.run(steps)
            elapsed = time.perf_counter() - start
            outcomes = {o.status for o in result.outcomes.values()}
            assert len(result.outcomes) == args.steps, len(result.outcomes)
            return elapsed, outcomes

        counter = FaultProxy(emulator.url.removeprefix("http://")).start()
        try:
            os.environ.update(emulator.env(counter.url))
            clear_storage_caches()
            start = time.perf_counter()
            Executor(prefix, backend="local", experiment_name="bench").run(steps)
            first_s = time.perf_counter() - start
        finally:
            counter.stop()
            os.environ.update(emulator.env())
            clear_storage_caches()
        print(
            f"first run of {args.steps} steps (populating the emulator, through the proxy): {first_s:.1f} s, "
            f"{counter.counts['requests'] / args.steps:.1f} requests/step"
        )

        rows = []
        best = min(rerun()[0] for _ in range(args.repeats))
        rows.append(("direct to the emulator", best, None))
        for latency_ms in (0.0, args.latency_ms):
            proxy = FaultProxy(emulator.url.removeprefix("http://"), latency_s=latency_ms / 1000).start()
            try:
                os.environ.update(emulator.env(proxy.url))
                clear_storage_caches()
                times = []
                for _ in range(args.repeats):
                    before = proxy.counts["requests"]
                    elapsed, outcomes = rerun()
                    times.append(elapsed)
                    requests = proxy.counts["requests"] - before
                rows.append((f"through the proxy, +{latency_ms:g} ms per request", min(times), requests))
            finally:
                proxy.stop()
        print(f"no-op rerun of {args.steps} steps (best of {args.repeats}); step outcomes: {sorted(outcomes)}")
        for label, seconds, requests in rows:
            per_step = f"{requests / args.steps:.2f} requests/step ({requests} total)" if requests else ""
            print(f"  {label:40s} {seconds:6.2f} s   {per_step}")
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
