"""Where the tokenize step's peak RSS goes, by phase: run the step inline (workers=1) on the first N shards of
the data_bench corpus, sampling the process's current RSS every 10 ms, labelled by the step function running
(read_shard, encode_pipelined, write_part, write_cache) and by the shard it is working on.

Run: .venv/bin/python benchmarks/tokenize_memory.py --corpus /tmp/tok-bench/corpus --tokenizer /tmp/tok-bench/tokenizer --shards 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a folder of part-*.jsonl.gz shards")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--shards", type=int, required=True)
    args = parser.parse_args()

    from marin.processing import tokenize as step

    label = ["start"]
    peaks: dict[str, float] = {}
    shard = [0]

    def wrap(name):
        original = getattr(step, name)

        def wrapped(*a, **kw):
            before = label[0]
            label[0] = f"{name} (shard {shard[0]})" if name != "write_cache" else name
            try:
                return original(*a, **kw)
            finally:
                if name == "write_part":
                    shard[0] += 1
                label[0] = before

        setattr(step, name, wrapped)

    for name in ("read_shard", "encode_pipelined", "write_part", "write_cache"):
        wrap(name)
    done = threading.Event()

    def sample():
        while not done.wait(0.01):
            key = label[0]
            peaks[key] = max(peaks.get(key, 0.0), rss_mb())

    threading.Thread(target=sample, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus")
        os.makedirs(corpus)
        names = sorted(n for n in os.listdir(args.corpus) if n.startswith("part-"))[: args.shards]
        for n in names:
            os.symlink(os.path.join(os.path.abspath(args.corpus), n), os.path.join(corpus, n))
        started = time.perf_counter()
        stats = step.tokenize(
            step.TokenizeConfig(input_path=corpus, tokenizer=args.tokenizer, output_path=os.path.join(tmp, "out"))
        )
    done.set()
    mb = sum(s["bytes"] for s in stats.values()) / 1e6
    result = {
        "shards": args.shards,
        "text_mb": round(mb, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_rss_mb_by_phase": {k: round(v) for k, v in peaks.items()},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
