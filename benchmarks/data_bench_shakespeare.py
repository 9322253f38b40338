"""Data-step throughput on the tutorial corpus (Shakespeare, ~5 MB): our steps vs the libraries they wrap.

1. tokenize: the tokenize step (read gzipped shards, Levanter's BatchTokenizer with bos/eos, write the
   Levanter cache) vs HF `tokenizers` `Tokenizer.encode_batch` over the same document texts with the
   same tokenizer.json, in memory (the library limit). Ratio = ours docs/s / encode_batch docs/s.
2. dedup: the dedup step with exact=False (MinHash only) vs the same datatrove MinHash pipeline
   (JsonlReader -> signatures -> buckets -> cluster -> JsonlReader -> filter -> JsonlWriter) run
   directly on datatrove's LocalPipelineExecutor, same shards, same MinhashConfig, same worker count.
   Ratio = datatrove time / our time. Also reported: our dedup with exact dedup on.

Run: .venv/bin/python benchmarks/data_bench_shakespeare.py [--workers 1] [--repeats 15] [--workdir DIR]
Each side runs once per round, `repeats` rounds, the order alternating. The ratio is taken within each
round and the median of those is the figure (quartiles, range and the older best-of ratio beside it):
on a shared machine a burst of load lands on both sides of a round, while two separately chosen best
times can come from different bursts.
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


def paired_rounds(rounds: int, *fns):
    """Run the fns once each per round, alternating the order (A B, B A, ...); per fn its times and last result.

    Both sides of a round run seconds apart, so a burst of load from other processes lands on both:
    the ratio within a round is far steadier than the ratio of two separately chosen best times.
    """
    times: list[list[float]] = [[] for _ in fns]
    results = [None] * len(fns)
    for r in range(rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            t = time.perf_counter()
            results[i] = fns[i]()
            times[i].append(time.perf_counter() - t)
    return times, results


def ratio_summary(ours: list[float], theirs: list[float]) -> dict:
    """Per-round throughput ratios (their time / our time): median, quartiles, range, and the best-of ratio."""
    ratios = sorted(t / o for o, t in zip(ours, theirs, strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "median": statistics.median(ratios),
        "q1": q[0],
        "q3": q[2],
        "min": ratios[0],
        "max": ratios[-1],
        "best_of": min(theirs) / min(ours),
    }


def describe(summary: dict) -> str:
    return (
        f"median {summary['median']:.2f} (quartiles {summary['q1']:.2f}-{summary['q3']:.2f}, "
        f"range {summary['min']:.2f}-{summary['max']:.2f}; best-of ratio {summary['best_of']:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15, help="paired rounds")
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--parts", default="tokenize,dedup", help="comma-separated: tokenize, dedup")
    parser.add_argument("--raw", default=None, help="write the tokenize part's per-round times to this JSON file")
    parser.add_argument("--measure-tokenize", choices=TOKENIZE_SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_tokenize:  # one measurement, in a process of its own (see bench_tokenize)
        print(json.dumps(measure_tokenize_side(args.measure_tokenize, args.workdir, args.workers)))
        return

    from marin.download.shipped_corpus import ShippedCorpusConfig, write_shakespeare_corpus
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    work = args.workdir or tempfile.mkdtemp(prefix="marin-data-bench-")
    corpus = os.path.join(work, "corpus")
    info = write_shakespeare_corpus(ShippedCorpusConfig(output_path=corpus, num_shards=8))
    print(
        f"corpus: {info['documents']} documents, {info['characters'] / 1e6:.2f} M characters, {info['shards']} shards"
    )

    tok_dir = os.path.join(work, "tokenizer")
    t = time.perf_counter()
    train_tokenizer(TrainTokenizerConfig(input_path=corpus, output_path=tok_dir, vocab_size=args.vocab_size))
    t_tok = time.perf_counter() - t
    print(f"train_tokenizer (vocab {args.vocab_size}): {t_tok:.2f} s")

    parts = set(args.parts.split(","))
    results = {"workers": args.workers}
    if "tokenize" in parts:
        results["tokenize_ratio"] = round(bench_tokenize(args, work), 3)
    if "dedup" in parts:
        results["dedup_ratio"] = round(bench_dedup(args, work, corpus, info), 3)
    print(json.dumps(results))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


TOKENIZE_SIDES = ("encode_batch", "encode_batch_fast", "tokenize")


def measure_tokenize_side(side: str, work: str, workers: int) -> dict:
    """Time one side once, in this (fresh) process: wall and CPU seconds, documents and tokens.

    Every measurement gets a process of its own, started the same way for each side, so neither side
    inherits the other's heap (the encodings of a previous call) or a tokenizer with a warm word cache:
    the step loads its tokenizer once per run, and so does the baseline here.
    """
    import resource

    import levanter.data.text  # noqa: F401  (imported before the clock starts, as in a running executor)
    from tokenizers import Tokenizer

    from marin.processing.documents import list_shards, read_documents
    from marin.processing.tokenize import TokenizeConfig, tokenize

    corpus, tok_dir = os.path.join(work, "corpus"), os.path.join(work, "tokenizer")
    if side == "tokenize":
        out = os.path.join(work, "tokenized")
        shutil.rmtree(out, ignore_errors=True)
        config = TokenizeConfig(input_path=corpus, tokenizer=tok_dir, output_path=out, workers=workers)
        run = lambda: tokenize(config)  # noqa: E731
    else:
        texts = [d["text"] for p in list_shards(corpus) for d in read_documents(p)]
        run = lambda: getattr(Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json")), side)(texts)  # noqa: E731
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    if side == "tokenize":
        documents = sum(s["documents"] for s in result.values())
        tokens = sum(s["tokens"] for s in result.values())
    else:
        documents, tokens = len(result), sum(len(e.ids) for e in result)
    return {"wall": wall, "cpu": cpu, "documents": documents, "tokens": tokens}


def bench_tokenize(args, work: str) -> float:
    """Paired rounds of the three sides, each measurement in a fresh process (`--measure-tokenize`)."""
    walls: dict[str, list[float]] = {side: [] for side in TOKENIZE_SIDES}
    cpus: dict[str, list[float]] = {side: [] for side in TOKENIZE_SIDES}
    last: dict[str, dict] = {}
    for r in range(args.repeats):
        for side in TOKENIZE_SIDES if r % 2 == 0 else reversed(TOKENIZE_SIDES):
            cmd = [
                sys.executable,
                __file__,
                "--measure-tokenize",
                side,
                "--workdir",
                work,
                "--workers",
                str(args.workers),
            ]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            last[side] = json.loads(done.stdout.strip().splitlines()[-1])
            walls[side].append(last[side]["wall"])
            cpus[side].append(last[side]["cpu"])
    for side in TOKENIZE_SIDES:
        t = statistics.median(walls[side])
        print(
            f"{side + ':':19s} {last[side]['documents'] / t:8.1f} docs/s  {last[side]['tokens'] / t:10.0f} tokens/s  "
            f"(median {t:.2f} s, best {min(walls[side]):.2f} s; CPU median {statistics.median(cpus[side]):.2f} s)"
        )
    summary = ratio_summary(walls["tokenize"], walls["encode_batch"])
    print(f"tokenize / encode_batch throughput, per round: {describe(summary)}  (target >= 0.9)")
    fast = ratio_summary(walls["tokenize"], walls["encode_batch_fast"])
    print(f"tokenize / encode_batch_fast throughput, per round: {describe(fast)}")
    cpu = ratio_summary(cpus["tokenize"], cpus["encode_batch"])
    print(f"CPU seconds, encode_batch / tokenize, per round: {describe(cpu)}")
    if args.raw:
        raw = {"workers": args.workers, "rounds": args.repeats, "wall_s": walls, "cpu_s": cpus, "summary": summary}
        with open(args.raw, "w") as f:
            json.dump(raw, f, indent=1)
        print(f"per-round times written to {args.raw}")
    return summary["median"]


def bench_dedup(args, work: str, corpus: str, info: dict) -> float:
    # --- dedup vs datatrove directly ------------------------------------------------------------
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from marin.processing.dedup import DedupConfig, MinHashConfig, dedup_documents

    mh = MinHashConfig()
    dt_cfg = MinhashConfig(
        n_grams=mh.n_grams, num_buckets=mh.num_buckets, hashes_per_bucket=mh.hashes_per_bucket, seed=mh.seed
    )
    n_shards = info["shards"]

    def run_datatrove():
        base = os.path.join(work, "datatrove")
        shutil.rmtree(base, ignore_errors=True)
        kw = {"workers": args.workers, "start_method": "spawn"}
        LocalPipelineExecutor(
            [JsonlReader(corpus, glob_pattern="part-*.jsonl.gz"), MinhashDedupSignature(f"{base}/sigs", config=dt_cfg)],
            tasks=n_shards,
            logging_dir=f"{base}/logs/sigs",
            **kw,
        ).run()
        LocalPipelineExecutor(
            [MinhashDedupBuckets(f"{base}/sigs", f"{base}/buckets", config=dt_cfg)],
            tasks=dt_cfg.num_buckets,
            logging_dir=f"{base}/logs/buckets",
            **kw,
        ).run()
        LocalPipelineExecutor(
            [MinhashDedupCluster(f"{base}/buckets", f"{base}/remove", config=dt_cfg)],
            tasks=1,
            logging_dir=f"{base}/logs/cluster",
            workers=1,
            start_method="spawn",
        ).run()
        LocalPipelineExecutor(
            [
                JsonlReader(corpus, glob_pattern="part-*.jsonl.gz"),
                MinhashDedupFilter(f"{base}/remove"),
                JsonlWriter(f"{base}/out"),
            ],
            tasks=n_shards,
            logging_dir=f"{base}/logs/filter",
            **kw,
        ).run()

    def run_ours(exact: bool):
        out = os.path.join(work, f"dedup-{exact}")
        shutil.rmtree(out, ignore_errors=True)
        return dedup_documents(
            DedupConfig(input_path=corpus, output_path=out, exact=exact, fuzzy=mh, workers=args.workers)
        )

    (t_dt, t_fuzzy, t_both), (_, s_fuzzy, s_both) = paired_rounds(
        args.repeats, run_datatrove, lambda: run_ours(False), lambda: run_ours(True)
    )
    n = info["documents"]
    for name, times, extra in (
        ("datatrove MinHash directly:", t_dt, ""),
        ("dedup step, MinHash only:  ", t_fuzzy, f", removed {s_fuzzy['removed']}"),
        ("dedup step, exact+MinHash: ", t_both, f", removed {s_both['removed']}"),
    ):
        t = statistics.median(times)
        print(f"{name} {n / t:8.1f} docs/s  (median {t:.2f} s, best {min(times):.2f} s{extra})")
    summary = ratio_summary(t_fuzzy, t_dt)
    print(f"dedup ratio, datatrove time / ours (MinHash only), per round: {describe(summary)}  (target >= 0.9)")
    dedup_ratio = summary["median"]
    return dedup_ratio


if __name__ == "__main__":
    main()
