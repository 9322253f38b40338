"""Browser benchmark: how long the pages a researcher opens all day take on local storage.

    PYTHONPATH=. .venv/bin/python benchmarks/browser_bench.py [--workdir DIR] [--gb 1.0]

Builds, in a temporary folder (deleted afterwards): 1,000 experiment records (4 steps each:
data, tokenize, a version of `train/bench` with its metrics.jsonl, an evaluation with its results.json;
with a realistic ~250-package environment), one experiment of 1,000 steps, and a 1 GB
(uncompressed) jsonl.gz written at gzip level 1. Then times, over real HTTP against the
app served by uvicorn on 127.0.0.1: the experiments list (cold: empty record cache; warm),
the 1,000-step experiment page (cold and warm), the leaderboard and the runs table (1,000 versions of
one train step), a text search and a random sample of the jsonl.gz, and the first page of the jsonl.gz preview
(plus a page 100 MB in, which must decompress its way there). Targets: list and experiment
page <= 1 s, first preview page <= 0.5 s.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from marin.browser import records  # noqa: E402
from marin.browser.app import create_app  # noqa: E402
from tests.browser_support import ServerThread  # noqa: E402

# Synthetic records written per docs/records.md (hashes as docs/executor.md says), fast enough for 1,000 experiments.


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def step_hash(version: dict) -> str:
    return hashlib.sha256(canonical(version).encode()).hexdigest()[:8]


def make_step(
    prefix: str, name: str, config: dict, deps: list[dict] = (), pseudo: list[dict] = (), fn: str = ""
) -> dict:
    version = {"name": name, "config": config, "dependencies": [f"{d['name']}-{d['hash']}" for d in deps]}
    if pseudo:
        version["pseudo_dependencies"] = [f"{d['name']}-{d['hash']}" for d in pseudo]
    h = step_hash(version)
    rel = f"{name}-{h}"
    return {
        "name": name,
        "hash": h,
        "output_path": f"{prefix}/{rel}",
        "relative_output_path": rel,
        "fn": fn or f"marin.steps:{name.split('/')[0]}",
        "config_type": f"marin.steps:{name.split('/')[0].title()}Config",
        "config": {**config, "output_path": f"{prefix}/{rel}"},
        "version": version,
        "dependencies": [d["output_path"] for d in deps],
        "pseudo_dependencies": [d["output_path"] for d in pseudo],
        "description": None,
        "resources": {"cpu": 1, "memory_gb": None, "gpu": 0, "tpu": None, "accelerator_type": None, "custom": {}},
        "code_fingerprint": hashlib.sha256(name.encode()).hexdigest(),
    }


def write_json(path: Path, value, indent: int | None = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, sort_keys=True, indent=indent))


def write_step_folder(
    root: Path, step: dict, state: str | None, files: dict[str, bytes] | None = None, log: str = "", lease: bool = False
) -> Path:
    folder = root / step["relative_output_path"]
    if state is None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / ".executor_info", {**step, "prefix": str(root)})
    for rel, data in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    (folder / ".executor_logs").mkdir(exist_ok=True)
    (folder / ".executor_logs" / "001.log").write_text(log or f"running {step['name']}\ndone\n")
    if lease:
        now = time.time()
        write_json(
            folder / ".executor_lease",
            {"owner": "5d0c7a6e-uuid", "host": "box", "pid": 4242, "heartbeat": now, "acquired": now - 95},
        )
    if state == "SUCCESS":
        entries = [
            {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for rel, data in sorted((files or {}).items())
        ]
        write_json(
            folder / ".executor_manifest.json", {"files": entries, "total_size": sum(e["size"] for e in entries)}
        )
    (folder / ".executor_status").write_text(state)
    return folder


def write_record(root: Path, name: str, script: str, description: str, steps: list[dict], outcomes: list[dict]) -> Path:
    h = hashlib.sha256("".join(sorted(f"{s['name']}-{s['hash']}" for s in steps)).encode()).hexdigest()[:8]
    record = {
        "format": "marin.experiment/1",
        "name": name,
        "hash": h,
        "script": script,
        "description": description,
        "prefix": str(root),
        "created": "2026-11-30T09:30:00Z",
        "user": "ada",
        "host": "box",
        "command": ["python", script],
        "git": {"commit": "3f2a9c1d0b8e7f6a5c4d3e2f1a0b9c8d7e6f5a4b", "dirty": False},
        "environment": {
            "python": "3.11.7",
            "platform": "Linux-6.1-x86_64",
            "machine": "x86_64",
            "cpu_flags": ["avx2", "fma"],
            "accelerator": None,
            "lock_sha256": "ab" * 32,
            "packages": {"ray": "2.60.0", "jax": "0.7.2", "levanter": "1.2.dev1644", "pyarrow": "26.0.1"},
        },
        "steps": steps,
    }
    path = root / "experiments" / f"{name}-{h}.json"
    write_json(path, record)
    runs = path.with_name(f"{name}-{h}.runs.jsonl")
    with runs.open("a") as f:
        for i, outcome in enumerate(outcomes):
            line = {
                "run_id": f"run-{i}",
                "user": "ada",
                "host": "box",
                "started": f"2026-11-30T09:3{i}:00Z",
                "ended": f"2026-11-30T09:3{i}:40Z",
                "git": record["git"],
                "command": record["command"],
                "prefix": str(root),
                "dry_run": False,
                "steps": outcome,
            }
            f.write(json.dumps(line, sort_keys=True) + "\n")
    return path


PACKAGES = {f"package-{i:03d}": f"{i % 7}.{i % 13}.{i % 5}" for i in range(250)}


def build(root: Path, n_experiments: int, n_steps: int) -> str:
    t0 = time.perf_counter()
    p = str(root)
    states = ["SUCCESS", "SUCCESS", "FAILED", "RUNNING", None]
    for e in range(n_experiments):
        a = make_step(p, f"exp{e:04d}/data", {"seed": e})
        b = make_step(p, f"exp{e:04d}/tok", {"input": "DEP[0]"}, [a])
        c = make_step(
            p,
            "train/bench",
            {"lr": 1e-3 * (1 + e % 10), "layers": 2 + e % 4, "seed": e, "data": "DEP[0]"},
            [b],
            fn="marin.training.train:train",
        )
        d = make_step(p, "eval/bench", {"checkpoint": "DEP[0]"}, [c], fn="marin.evaluation.evaluate:evaluate")
        for i, s in enumerate((a, b, c, d)):
            st = states[(e + i) % len(states)]
            if st:
                folder = root / s["relative_output_path"]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / ".executor_status").write_text(st)
                if s is c:
                    rows = [{"step": k, "loss": 8.0 / (1 + k) + 2.0, "tokens": 4096 * (k + 1)} for k in range(200)]
                    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
                if s is d and st == "SUCCESS":
                    params = 1_000_000 * (1 + e % 7)
                    bpb = 1.0 + 1.0 / (1 + e % 7) + 0.01 * (e % 10)
                    write_json(
                        folder / "results.json",
                        {
                            "macro_bpb": bpb,
                            "macro_loss": bpb * 1.3,
                            "parameter_count": params,
                            "tokens": 20 * params,
                            "flops": 120 * params * params,
                        },
                    )
        path = write_record(
            root, f"exp{e:04d}", f"experiments/bench/exp{e:04d}.py", f"benchmark experiment {e}", [a, b, c, d], []
        )
        rec = json.loads(path.read_text())
        rec["environment"]["packages"] = PACKAGES
        path.write_text(json.dumps(rec, sort_keys=True, indent=2))
    steps = []
    for i in range(n_steps):
        deps = [steps[i - 1]] if i % 50 else []
        if i >= 100 and i % 50 == 0:
            deps = [steps[i - 50], steps[i - 99]]
        steps.append(make_step(p, f"big/step{i:04d}", {"i": i}, deps))
    outcomes = {}
    for i, s in enumerate(steps):
        st = "SUCCESS" if i < 900 else ("RUNNING" if i < 905 else None)
        if st:
            write_step_folder(root, s, st, {"out.txt": b"x"}, lease=st == "RUNNING")
            outcomes[s["relative_output_path"]] = {
                "outcome": "SUCCESS",
                "started": "2026-11-30T09:30:00Z",
                "ended": "2026-11-30T09:30:01Z",
                "duration_s": 1.0,
            }
    big = write_record(root, "big", "experiments/bench/big.py", "1,000 steps", steps, [outcomes])
    print(
        f"built {n_experiments + 1} records and {n_experiments * 3 + n_steps} steps in {time.perf_counter() - t0:.1f} s"
    )
    return f"experiments/{big.name}"


def write_big_jsonl_gz(path: Path, gigabytes: float) -> int:
    """Dolma-like lines of random words (compresses ~3x, like real text); 64 distinct 1 MB blocks cycled."""
    import random

    t0 = time.perf_counter()
    rng = random.Random(0)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(5000)]
    blocks, doc = [], 0
    for _ in range(64):
        lines, size = [], 0
        while size < 1 << 20:
            text = " ".join(rng.choices(vocab, k=rng.randint(50, 400)))
            line = json.dumps({"id": f"doc-{doc:09d}", "text": text, "source": "bench", "metadata": {"n": doc}})
            lines.append(line)
            size += len(line) + 1
            doc += 1
        blocks.append(("\n".join(lines) + "\n").encode())
    target = int(gigabytes * (1 << 30))
    written = 0
    with gzip.open(path, "wb", compresslevel=1) as f:
        i = 0
        while written < target:
            f.write(blocks[i % len(blocks)])
            written += len(blocks[i % len(blocks)])
            i += 1
    mb = path.stat().st_size / (1 << 20)
    print(f"wrote {written / (1 << 30):.2f} GB uncompressed ({mb:.0f} MB gzip -1) in {time.perf_counter() - t0:.1f} s")
    return written


def timed_get(url: str) -> tuple[float, int, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        status = r.status
    return time.perf_counter() - t0, status, body


def measure(label: str, url: str, repeat: int, target: float | None, must_contain: bytes) -> dict:
    times = []
    for _ in range(repeat):
        dt, status, body = timed_get(url)
        assert status == 200 and must_contain in body, (label, status, body[:200])
        times.append(dt)
    result = {"what": label, "median_s": statistics.median(times), "max_s": max(times), "n": repeat, "target_s": target}
    flag = "" if target is None else ("  OK" if result["max_s"] <= target else "  OVER TARGET")
    print(f"{label:<58} median {result['median_s'] * 1000:7.1f} ms   max {result['max_s'] * 1000:7.1f} ms{flag}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None, help="where to build the data (default: a temp dir, deleted)")
    ap.add_argument("--experiments", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--gb", type=float, default=1.0, help="uncompressed size of the jsonl.gz")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="browser-bench-", dir=args.workdir))
    try:
        root = work / "lab"
        root.mkdir()
        big = build(root, args.experiments, args.steps)
        data_dir = root / "data"
        data_dir.mkdir()
        write_big_jsonl_gz(data_dir / "big.jsonl.gz", args.gb)
        app = create_app([str(root)])
        results = []
        with ServerThread(app) as server:
            base = server.url
            records._record_cache.clear()
            results.append(
                measure(f"experiments list, {args.experiments + 1} records, cold", base + "/", 1, 1.0, b"exp0999")
            )
            results.append(
                measure(f"experiments list, {args.experiments + 1} records, warm", base + "/", 5, 1.0, b"exp0999")
            )
            url = f"{base}/exp/0/{big}"
            results.append(
                measure(f"experiment page, {args.steps} steps (DAG + table), first", url, 1, 1.0, b"big/step0999")
            )
            results.append(
                measure(f"experiment page, {args.steps} steps (DAG + table), again", url, 5, 1.0, b"big/step0999")
            )
            n = args.experiments
            results.append(measure(f"leaderboard, {n} records, first", base + "/leaderboard", 1, 1.0, b"Pareto"))
            results.append(measure(f"leaderboard, {n} records, again", base + "/leaderboard", 5, 1.0, b"Pareto"))
            results.append(measure(f"runs table, {n} records, first", base + "/runs", 1, 1.0, b"train/bench"))
            results.append(measure(f"runs table, {n} records, again", base + "/runs", 5, 1.0, b"train/bench"))
            url = f"{base}/file/0/data/big.jsonl.gz"
            results.append(
                measure(f"jsonl.gz search ({args.gb:g} GB), first 50 matches", url + "?q=doc", 1, 1.0, b"documents")
            )
            results.append(
                measure(
                    f"jsonl.gz sample of 20 ({args.gb:g} GB, first 256 MiB)", url + "?sample=20", 1, None, b"random"
                )
            )
            results.append(measure(f"jsonl.gz preview ({args.gb:g} GB), first page", url, 5, 0.5, b"doc-000000049"))
            results.append(
                measure(
                    f"jsonl.gz preview ({args.gb:g} GB), page at 100 MB", url + f"?offset={100 << 20}", 1, None, b"doc-"
                )
            )
        print(json.dumps(results))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
