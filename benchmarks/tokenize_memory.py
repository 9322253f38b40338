"""Whether the tokenize step's peak RSS stays flat as the corpus grows, and where it goes, by phase.

Each corpus size runs in a fresh process (`--measure`): the step inline (`workers=1`, one process) on the
first N shards of the data_bench corpus, either as they are (`--layout shards`: shards of ~12.5 MB) or
concatenated into one shard (`--layout one-shard`: one gzip file of N shards' documents, so the shard
grows with the corpus). The process's RSS is sampled every 10 ms, labelled by the step function running
(tokenize_shard, write_cache) and the shard; its peak is /proc/self/status VmHWM. The sizes are printed
side by side with each one's peak over the smallest's (flat: within 10 %).

It exits with status 1 when a size's peak is over x1.10 the smallest's (the guard `make bench` runs).

Run (`--workdir` generates the data_bench corpus and its tokenizer there once, then reuses them; or pass
`--corpus` and `--tokenizer`):
  .venv/bin/python benchmarks/tokenize_memory.py --workdir /tmp/tok-bench --shards 2,6,13 --layout shards
  .venv/bin/python benchmarks/tokenize_memory.py --workdir /tmp/tok-bench --shards 2,6,13 --layout one-shard
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FLAT = 1.10


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def make_corpus(source: str, shards: int, layout: str, folder: str) -> None:
    names = sorted(n for n in os.listdir(source) if n.startswith("part-"))[:shards]
    if len(names) < shards:
        raise SystemExit(f"{source} has {len(names)} shards, fewer than {shards}")
    os.makedirs(folder)
    if layout == "shards":
        for n in names:
            os.symlink(os.path.join(os.path.abspath(source), n), os.path.join(folder, n))
        return
    with open(os.path.join(folder, "part-00000.jsonl.gz"), "wb") as out:  # gzip members concatenate
        for n in names:
            with open(os.path.join(source, n), "rb") as f:
                out.write(f.read())


def prepare(workdir: str, shards: int) -> tuple[str, str]:
    """The data_bench corpus (at least `shards` shards) and a 2048-token BPE trained on its first shard."""
    from benchmarks.data_bench import DOCS_PER_SHARD, SHARDS_PER_SCALE, _first_shard, generate
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    root, _ = generate(workdir, -(-shards // SHARDS_PER_SCALE), 2, DOCS_PER_SHARD)
    tokenizer = os.path.join(workdir, "tokenizer")
    if not os.path.exists(os.path.join(tokenizer, "tokenizer.json")):
        first = _first_shard(workdir, root)
        train_tokenizer(TrainTokenizerConfig(input_path=first, output_path=tokenizer, vocab_size=2048))
    return root, tokenizer


def measure(args) -> dict:
    from marin.processing import tokenize as step

    label = ["start"]
    peaks: dict[str, float] = {}
    shard = [0]

    def wrap(name):
        original = getattr(step, name)

        def wrapped(*a, **kw):
            before = label[0]
            label[0] = f"{name} (shard {shard[0]})" if name == "tokenize_shard" else name
            try:
                return original(*a, **kw)
            finally:
                if name == "tokenize_shard":
                    shard[0] += 1
                label[0] = before

        setattr(step, name, wrapped)

    for name in ("tokenize_shard", "write_cache"):
        wrap(name)
    done = threading.Event()

    def sample():
        while not done.wait(0.01):
            key = label[0]
            peaks[key] = max(peaks.get(key, 0.0), rss_mb())

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus")
        make_corpus(args.corpus, args.measure, args.layout, corpus)
        threading.Thread(target=sample, daemon=True).start()
        started, cpu = time.perf_counter(), time.process_time()
        stats = step.tokenize(
            step.TokenizeConfig(input_path=corpus, tokenizer=args.tokenizer, output_path=os.path.join(tmp, "out"))
        )
        done.set()
    return {
        "shards": args.measure,
        "layout": args.layout,
        "text_mb": round(sum(s["bytes"] for s in stats.values()) / 1e6, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "peak_rss_mb": round(hwm_mb()),
        "peak_rss_mb_by_phase": {k: round(v) for k, v in peaks.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to generate (once) the corpus and the tokenizer")
    parser.add_argument("--corpus", help="a folder of part-*.jsonl.gz shards (instead of --workdir)")
    parser.add_argument("--tokenizer", help="a tokenizer folder (instead of --workdir)")
    parser.add_argument("--shards", default="2,6", help="comma-separated corpus sizes, in shards")
    parser.add_argument("--layout", choices=("shards", "one-shard"), default="shards")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args)), flush=True)
        return
    sizes = [int(s) for s in args.shards.split(",")]
    if args.workdir:
        args.corpus, args.tokenizer = prepare(args.workdir, max(sizes))
    elif not (args.corpus and args.tokenizer):
        parser.error("give --workdir, or both --corpus and --tokenizer")
    rows = []
    for n in sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--corpus", args.corpus, "--tokenizer", args.tokenizer]
        cmd += ["--layout", args.layout, "--measure", str(n)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    print(f"\n{'layout':10s} {'shards':>6s} {'text MB':>8s} {'CPU s':>6s} {'peak RSS MB':>12s} {'vs first':>9s}")
    for r in rows:
        ratio = r["peak_rss_mb"] / base["peak_rss_mb"]
        note = "" if ratio <= FLAT else f"  (not flat: over x{FLAT:.2f})"
        print(
            f"{r['layout']:10s} {r['shards']:6d} {r['text_mb']:8.1f} {r['cpu_s']:6.1f} {r['peak_rss_mb']:12d} "
            f"{ratio:8.2f}x{note}"
        )
    if any(r["peak_rss_mb"] > FLAT * base["peak_rss_mb"] for r in rows):
        raise SystemExit(f"tokenize memory: peak RSS grew more than x{FLAT:.2f} with the corpus")


if __name__ == "__main__":
    main()
