"""Browser benchmark: how long the pages a researcher opens all day take on local storage.

    PYTHONPATH=. .venv/bin/python benchmarks/browser_bench.py [--workdir DIR] [--gb 1.0]

Builds, in a temporary folder (deleted afterwards): 1,000 experiment records (3 steps each,
with a realistic ~250-package environment), one experiment of 1,000 steps, and a 1 GB
(uncompressed) jsonl.gz written at gzip level 1. Then times, over real HTTP against the
app served by uvicorn on 127.0.0.1: the experiments list (cold: empty record cache; warm),
the 1,000-step experiment page (cold and warm), and the first page of the jsonl.gz preview
(plus a page 100 MB in, which must decompress its way there). Targets: list and experiment
page <= 1 s, first preview page <= 0.5 s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from browser_prefix import make_step, write_record, write_step_folder  # noqa: E402
from browser_support import ServerThread  # noqa: E402

from marin.browser import records  # noqa: E402
from marin.browser.app import create_app  # noqa: E402

PACKAGES = {f"package-{i:03d}": f"{i % 7}.{i % 13}.{i % 5}" for i in range(250)}


def build(root: Path, n_experiments: int, n_steps: int) -> str:
    t0 = time.perf_counter()
    p = str(root)
    states = ["SUCCESS", "SUCCESS", "FAILED", "RUNNING", None]
    for e in range(n_experiments):
        a = make_step(p, f"exp{e:04d}/data", {"seed": e})
        b = make_step(p, f"exp{e:04d}/tok", {"input": "DEP[0]"}, [a])
        c = make_step(p, f"exp{e:04d}/train", {"lr": 1e-3, "data": "DEP[0]"}, [b])
        for i, s in enumerate((a, b, c)):
            st = states[(e + i) % len(states)]
            if st:
                folder = root / s["relative_output_path"]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / ".executor_status").write_text(st)
        path = write_record(
            root, f"exp{e:04d}", f"experiments/bench/exp{e:04d}.py", f"benchmark experiment {e}", [a, b, c], []
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
            url = f"{base}/file/0/data/big.jsonl.gz"
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
