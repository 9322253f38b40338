"""Reuse across labs, measured: the tutorial in a second lab with `cache_from`, and verification throughput.

Parts (`--parts`, comma-separated):

- tutorial: lab A runs the tutorial (small settings, `--backend local`); then, with one training setting
  changed (`num_train_steps`), lab B runs it cold and lab C runs it with `cache_from` lab A. Reported: the
  wall time of B and C, which steps C executed and reused, the bytes it copied, and whether every reused
  output is byte-identical to lab A's (manifests equal and every file's bytes equal).
- verify: a step that writes `--gb` GB (8 files of random bytes) runs in lab A; lab B reuses it by copy
  and lab C by reference. Reported: MB/s of the reuse (copy + verification) and of the verification alone
  (reference mode: hashing in place), against `sha256sum` over the same files, measured in the same run.
- probe: lab A runs `--probe_steps` tiny steps on the GCS emulator; lab B plans the same steps
  (`--dry_run`) with `cache_from` lab A, and with `cache_from` an empty prefix, through a proxy adding
  `--latency_ms` to every request. Reported: the requests per step and the wall time of each plan (what
  reading a source's records bounded and checked costs on a bucket).

Run (2 cores): PYTHONPATH=. .venv/bin/python benchmarks/reuse_bench.py --workdir /tmp/marin-reuse-bench
Results go to benchmarks/results/reuse.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned  # noqa: E402
from marin.execution.reuse import CacheFrom  # noqa: E402

SMALL = {"plays": ("hamlet", "macbeth", "othello"), "vocab_size": 512, "train_batch_size": 4}


def _quiet_run(executor: Executor, steps) -> tuple[object, float]:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        result = executor.run(steps)
    return result, time.perf_counter() - t0


def _same_bytes(a: str, b: str) -> bool:
    ma = json.load(open(os.path.join(a, ".executor_manifest.json")))
    mb = json.load(open(os.path.join(b, ".executor_manifest.json")))
    if ma["files"] != mb["files"]:
        return False
    for entry in ma["files"]:
        with open(os.path.join(a, entry["path"]), "rb") as fa, open(os.path.join(b, entry["path"]), "rb") as fb:
            if fa.read() != fb.read():
                return False
    return True


def tutorial(workdir: str, steps_a: int, steps_b: int) -> dict:
    from experiments.tutorial.tiny_lm import build

    def executor(lab: str, cache: CacheFrom | None = None) -> Executor:
        return Executor(os.path.join(workdir, lab), backend="local", experiment_name="tiny_lm", cache_from=cache)

    a = build(**SMALL, num_train_steps=steps_a)
    result_a, wall_a = _quiet_run(executor("lab-a"), [a["eval"]])
    b = build(**SMALL, num_train_steps=steps_b)
    result_b, wall_cold = _quiet_run(executor("lab-b-cold"), [b["eval"]])
    cache = CacheFrom(sources=(os.path.join(workdir, "lab-a"),))
    result_c, wall_reuse = _quiet_run(executor("lab-c-reuse", cache), [b["eval"]])
    outcomes = {step.name: o.status for step, o in result_c.outcomes.items()}
    reused = [name for name, s in outcomes.items() if s == "REUSED"]
    copied = sum(o.extra["reused_from"]["bytes_copied"] for o in result_c.outcomes.values() if o.status == "REUSED")
    by_name = {step.name: path for step, path in result_a.output_paths.items()}
    identical = all(
        _same_bytes(by_name[step.name], result_c[step]) for step, o in result_c.outcomes.items() if o.status == "REUSED"
    )
    data = [step for step, o in result_c.outcomes.items() if o.status == "REUSED"]

    def data_seconds(result) -> float:
        return round(sum(result.outcomes[step].duration_s or 0.0 for step in data), 2)

    return {
        "data_steps_cold_s": data_seconds(result_b),
        "data_steps_reuse_s": data_seconds(result_c),
        "settings": {
            **SMALL,
            "plays": list(SMALL["plays"]),
            "num_train_steps_a": steps_a,
            "num_train_steps_b": steps_b,
        },
        "lab_a_wall_s": round(wall_a, 2),
        "cold_wall_s": round(wall_cold, 2),
        "reuse_wall_s": round(wall_reuse, 2),
        "speedup": round(wall_cold / wall_reuse, 2),
        "outcomes": outcomes,
        "reused_steps": len(reused),
        "executed_steps": sorted(n for n, s in outcomes.items() if s == "SUCCESS"),
        "bytes_copied": copied,
        "reused_byte_identical": identical,
    }


@dataclass(frozen=True)
class BlobConfig:
    megabytes: int = 1024
    """Total size of the output, in MiB (8 files)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's folder."""


def write_blobs(config: BlobConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    per_file = config.megabytes // 8
    for i in range(8):
        seed = hashlib.sha256(f"blob-{i}".encode()).digest()
        block = (seed * ((1 << 20) // len(seed) + 1))[: 1 << 20]
        with open(os.path.join(config.output_path, f"blob-{i}.bin"), "wb") as f:
            for j in range(per_file):
                f.write(hashlib.sha256(block + j.to_bytes(8, "little")).digest() + block[32:])


def verify(workdir: str, gb: float) -> dict:
    megabytes = int(gb * 1024)
    step = ExecutorStep("bench/blob", write_blobs, BlobConfig(megabytes=versioned(megabytes)))
    lab_a = os.path.join(workdir, "blob-a")
    result_a, _ = _quiet_run(Executor(lab_a, backend="local", experiment_name="blob"), [step])
    out_a = result_a[step]
    files = sorted(os.path.join(out_a, n) for n in os.listdir(out_a) if n.endswith(".bin"))
    total = sum(os.path.getsize(f) for f in files)
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm the page cache alike
    t0 = time.perf_counter()
    subprocess.run(["sha256sum", *files], stdout=subprocess.DEVNULL, check=True)
    sha256sum_s = time.perf_counter() - t0
    figures = {"bytes": total, "sha256sum_mb_s": round(total / 1e6 / sha256sum_s, 1)}
    for mode in ("reference", "copy"):
        lab = os.path.join(workdir, f"blob-{mode}")
        cache = CacheFrom(sources=(lab_a,), mode=mode)
        result, wall = _quiet_run(Executor(lab, backend="local", experiment_name="blob", cache_from=cache), [step])
        outcome = result.outcomes[step]
        assert outcome.status == "REUSED", outcome
        seconds = outcome.extra["reused_from"]["seconds"]
        figures[f"{mode}_mb_s"] = round(total / 1e6 / seconds, 1)
        figures[f"{mode}_run_wall_s"] = round(wall, 2)
        shutil.rmtree(lab, ignore_errors=True)
    figures["reference_vs_sha256sum"] = round(figures["reference_mb_s"] / figures["sha256sum_mb_s"], 2)
    return figures


def probe(workdir: str, n_steps: int, latency_ms: float) -> dict:
    from pathlib import Path

    from tests.emulators import clear_storage_caches, start_gcs
    from tests.fault_proxy import FaultProxy
    from tests.lease_dag import build

    emulator = start_gcs(Path(workdir))
    try:
        os.environ.update(emulator.env())
        clear_storage_caches()
        source, empty = f"gs://{emulator.bucket}/lab-a", f"gs://{emulator.bucket}/lab-empty"
        steps = build(os.path.join(workdir, "calls"), n_steps)
        _quiet_run(Executor(source, backend="local", experiment_name="probe"), steps)
        proxy = FaultProxy(emulator.url.removeprefix("http://"), latency_s=latency_ms / 1000).start()
        out = {"steps": n_steps, "latency_ms": latency_ms}
        try:
            os.environ.update(emulator.env(proxy.url))
            clear_storage_caches()
            for label, src in (("from_lab_a", source), ("from_an_empty_prefix", empty)):
                cache = CacheFrom(sources=(src,))
                executor = Executor(f"gs://{emulator.bucket}/lab-b-{label}", backend="local", cache_from=cache)
                before = proxy.counts["requests"]
                t0 = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    executor.run(steps, dry_run=True)
                out[label] = {
                    "seconds": round(time.perf_counter() - t0, 2),
                    "requests_per_step": round((proxy.counts["requests"] - before) / n_steps, 2),
                }
        finally:
            proxy.stop()
        return out
    finally:
        emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default="/tmp/marin-reuse-bench")
    parser.add_argument("--parts", default="tutorial,verify")
    parser.add_argument("--gb", type=float, default=1.0, help="size of the verified output (verify part)")
    parser.add_argument("--steps_a", type=int, default=6, help="lab A's num_train_steps")
    parser.add_argument("--steps_b", type=int, default=8, help="the changed num_train_steps of labs B and C")
    parser.add_argument("--probe_steps", type=int, default=100, help="steps of the probe part")
    parser.add_argument("--latency_ms", type=float, default=20.0, help="latency added per request (probe part)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "reuse.json"))
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    results: dict = {"cores": os.cpu_count()}
    for part in args.parts.split(","):
        results[part] = {
            "tutorial": lambda: tutorial(args.workdir, args.steps_a, args.steps_b),
            "verify": lambda: verify(args.workdir, args.gb),
            "probe": lambda: probe(args.workdir, args.probe_steps, args.latency_ms),
        }[part]()
        print(json.dumps({part: results[part]}, indent=2), flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
