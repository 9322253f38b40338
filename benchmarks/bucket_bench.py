"""Buckets: the executor's first run and no-op rerun of 1,000 steps on GCS and S3 emulators with latency, and
big-object throughput on GCS and S3.

On a bucket every storage operation is a request of tens of milliseconds, so what a step costs is its count
of requests and how many of them wait one after another. This script starts fake-gcs-server and moto on
127.0.0.1, puts the fault proxy (tests/fault_proxy.py, no faults) in front of each, adding `--latency-ms`
(50 by default) to every request, runs a 1,000-step experiment (tests/lease_dag.py) once and then again with
nothing to do, and prints each run's time and its requests per step, by kind.

    python benchmarks/bucket_bench.py [--steps 1000] [--latency-ms 50] [--repeats 2] [--stores gcs,s3]

`--big-mib N` instead measures objects of N MiB on fake-gcs-server and moto (both on 127.0.0.1, in
memory) and on the local disk: upload from a local file (`put_file`, parts of MARIN_STORAGE_PART_BYTES)
against one request (`write_bytes` with the part size above the object), streamed read (`open_read`,
8 MiB ranges) against one GET (`read_bytes`), server-side copy in one request and in 64 MiB parts, and
the peak RSS of a fresh process doing each upload and download (the streams' memory stays flat).

    python benchmarks/bucket_bench.py --big-mib 256
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


RSS_CHILD = """
import sys
from marin import storage

def peak_kib():  # VmHWM: this process's own peak (ru_maxrss would carry the parent's over fork and exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

op, src, dst, warm = sys.argv[1:5]
storage.write_bytes(warm, b"x")  # clients imported and connected: what follows is the transfer's own
storage.read_bytes(warm)
before = peak_kib()
if op == "put_file":
    storage.put_file(src, dst)
elif op == "write_bytes":
    with open(src, "rb") as f:
        storage.write_bytes(dst, f.read())
elif op == "get_file":
    storage.get_file(src, dst)
else:
    data = storage.read_bytes(src)
    with open(dst, "wb") as f:
        f.write(data)
print((peak_kib() - before) / 1024)
"""


def _peak_rss_mib(op: str, src: str, dst: str, warm: str, env: dict) -> float:
    """Peak RSS growth (MiB) of a fresh process doing one transfer, over its RSS after imports."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, op, src, dst, warm],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def big_objects(mib: int, repeats: int) -> None:
    from marin import storage
    from tests.emulators import clear_storage_caches, start_gcs, start_s3

    work = Path(tempfile.mkdtemp(prefix="bucket-big-"))
    source = work / "source.bin"
    with open(source, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    size = mib << 20
    rows = []

    def timed(label: str, store: str, fn) -> None:
        best = min(_time(fn) for _ in range(repeats))
        rows.append((store, label, best, size / best / 1e6))

    emulators = [start_gcs(work), start_s3(work)]
    try:
        for store, prefix, emulator in [("local", str(work / "local"), None)] + [
            (e.kind, f"{e.scheme}://{e.bucket}/big", e) for e in emulators
        ]:
            env = emulator.env() if emulator else {}
            os.environ.update(env)
            clear_storage_caches()
            target, second = f"{prefix}/a.bin", f"{prefix}/b.bin"
            timed("put_file (streamed, 64 MiB parts)", store, lambda t=target: storage.put_file(str(source), t))
            os.environ["MARIN_STORAGE_PART_BYTES"] = str(size + (1 << 20))
            timed("write_bytes (one request)", store, lambda t=target, d=source.read_bytes(): storage.write_bytes(t, d))
            del os.environ["MARIN_STORAGE_PART_BYTES"]
            timed("open_read (streamed, 8 MiB ranges)", store, lambda t=target: _drain(storage.open_read(t)))
            timed("read_bytes (one request)", store, lambda t=target: storage.read_bytes(t))
            timed("copy (server-side, default)", store, lambda t=target, s2=second: storage.copy(t, s2))
            os.environ["MARIN_STORAGE_COPY_PART_BYTES"] = str(64 << 20)
            timed("copy (server-side, 64 MiB parts)", store, lambda t=target, s2=second: storage.copy(t, s2))
            del os.environ["MARIN_STORAGE_COPY_PART_BYTES"]
            for op, src, dst in [
                ("put_file", str(source), target),
                ("write_bytes", str(source), target),
                ("get_file", target, str(work / "down.bin")),
                ("read_bytes", target, str(work / "down.bin")),
            ]:
                rows.append((store, f"peak RSS growth: {op}", None, _peak_rss_mib(op, src, dst, target + ".warm", env)))
            for name in (target, second, target + ".warm"):
                storage.delete(name)
    finally:
        for e in emulators:
            e.stop()
    print(f"objects of {mib} MiB, best of {repeats}")
    for store, label, seconds, value in rows:
        if seconds is None:
            print(f"  {store:5s} {label:40s} {value:8.0f} MiB")
        else:
            print(f"  {store:5s} {label:40s} {seconds:6.2f} s  {value:7.0f} MB/s")


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _drain(stream) -> None:
    with stream as f:
        while f.read(8 << 20):
            pass


def executor_on_buckets(steps_n: int, latency_ms: float, repeats: int, stores: list[str]) -> None:
    """First run and no-op reruns of `steps_n` steps on each emulator, every request through the fault proxy
    adding `latency_ms`, with the requests counted by kind."""
    import contextlib
    import io

    from marin.execution import Executor
    from tests.emulators import clear_storage_caches, start_gcs, start_s3
    from tests.fault_proxy import FaultProxy
    from tests.lease_dag import build

    work = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    steps = build(str(work / "calls"), steps_n)
    for store in stores:
        emulator = (start_gcs if store == "gcs" else start_s3)(work)
        proxy = FaultProxy(emulator.url.removeprefix("http://"), latency_s=latency_ms / 1000).start()
        try:
            os.environ.update(emulator.env(proxy.url))
            clear_storage_caches()
            prefix = f"{emulator.scheme}://{emulator.bucket}/bench"

            def run(proxy=proxy, prefix=prefix) -> tuple[float, int, dict]:
                before, kinds = proxy.counts["requests"], dict(proxy.kinds)
                start = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    result = Executor(prefix, backend="local", experiment_name="bench").run(steps)
                elapsed = time.perf_counter() - start
                assert len(result.outcomes) == steps_n, len(result.outcomes)
                delta = {k: v - kinds.get(k, 0) for k, v in proxy.kinds.items() if v != kinds.get(k, 0)}
                return elapsed, proxy.counts["requests"] - before, delta

            first_s, first_requests, first_kinds = run()
            reruns = [run() for _ in range(repeats)]
            best_s, rerun_requests, rerun_kinds = min(reruns)
            print(f"{store}, +{latency_ms:g} ms per request, {steps_n} steps (tests/lease_dag.py):")
            print(f"  first run      {first_s:7.2f} s   {first_requests / steps_n:6.2f} requests/step")
            print(
                f"  no-op rerun    {best_s:7.2f} s   {rerun_requests / steps_n:6.2f} requests/step (best of {repeats})"
            )
            for label, kinds in (("first run", first_kinds), ("no-op rerun", rerun_kinds)):
                per_step = sorted(((n / steps_n, k) for k, n in kinds.items() if n >= steps_n / 10), reverse=True)
                print(f"  {label} requests per step by kind: " + ", ".join(f"{k} {n:.2f}" for n, k in per_step))
        finally:
            proxy.stop()
            emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--stores", default="gcs,s3")
    parser.add_argument("--big-mib", type=int, default=0, help="measure big-object throughput instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.big_mib:
        big_objects(args.big_mib, args.repeats)
        return
    executor_on_buckets(args.steps, args.latency_ms, args.repeats, args.stores.split(","))


if __name__ == "__main__":
    main()
