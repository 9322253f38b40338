"""Buckets: a no-op rerun of 1,000 steps on the GCS emulator, and big-object throughput on GCS and S3.

A rerun where every step already succeeded must cost a handful of round trips per step, issued
concurrently: one request after another at 20 ms would take 20 s and more. This script starts
fake-gcs-server on 127.0.0.1, runs the experiment once (populating the bucket), then times no-op
reruns straight to the emulator and through the fault proxy (no faults) adding 0 and 20 ms to every
request, and counts the requests per step at the proxy.

    python benchmarks/bucket_bench.py [--steps 1000] [--latency-ms 20] [--repeats 3]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big-mib", type=int, default=0, help="measure big-object throughput instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.big_mib:
        big_objects(args.big_mib, args.repeats)
        return

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
