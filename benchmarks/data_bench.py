"""Data steps at scale on a synthetic corpus: dedup memory and time at 1x/4x/16x, and each step vs its library.

The corpus (tests/planted_corpus.py) has shards of ~12.5 MB of text: English-like sentences with
planted exact, re-cased and near copies of measured Jaccard similarity. Scale k is its first 5k
shards (1x ~ 63 MB, 4x ~ 250 MB, 16x ~ 1.0 GB); a copy's original is always in an earlier or the
same shard, so every prefix is a corpus with its own truth. Every measurement runs in a fresh
process (`--measure`) and reports wall time, CPU time (its own and its workers'), the peak RSS of
the driver (the measuring process) and of the largest worker (RUSAGE_CHILDREN: the largest child).

Parts (`--parts`, comma-separated):
- scale: our dedup (exact + MinHash) at every scale in `--scales`;
- tokenize-scale: at every scale in `--scales`, side by side, our tokenize step and HF
  `Tokenizer.encode_batch` streamed over the same shards (read with our reader, batches of 1,024
  texts, encodings dropped once counted, so it fits in memory at 1 GB): CPU per MB, the ratio per
  core, peak RSS of the driver and of the largest worker, and our step's CPU and driver peak by phase
  (the driver's encoder, the shards, the assembly); and the per-process fixed cost, each in a
  fresh process: the driver's (the step's module, `LevanterEncoder` and a one-row `write_cache`; it
  says whether Levanter was imported) and a worker's (the step's module and the encoder rebuilt from its spec: `tokenizers` only);
- dedup: datatrove's MinHash pipeline run directly (signatures, buckets, cluster, filter on
  LocalPipelineExecutor, one task per shard) at `--compare-scale`, beside our dedup there;
  recall and precision of both against the planted copies (Jaccard >= 0.8 are duplicates);
- tokenize: our tokenize step vs HF `Tokenizer.encode_batch` over the same texts in memory, with a
  2048-token BPE our train_tokenizer step trains on the first shard;
- filter: our filter step vs the same datatrove filters (FilterConfig defaults) run directly,
  JsonlReader -> filters -> JsonlWriter on LocalPipelineExecutor.
- parquet: the `--compare-scale` corpus written as Parquet (zstd, row groups of 1024 rows), read by
  our `read_documents` and by pyarrow's own `ParquetFile.iter_batches` on the same files, in the
  same process, alternating, best of `--rounds` and the median of the rounds' ratios: pyarrow producing the same Python values
  (`to_pylist` of every column) and pyarrow decoding only (no Python objects);
- long: one document of 5 MB and one of 50 MB (a single line) through filter, dedup and tokenize
  (and `filter-language`: the filter with its language filter on), each in a fresh process: wall
  time, CPU and peak RSS, and the largest size's CPU and RSS over the smallest's.

Per-core throughput is MB of text per CPU-second (the step's processes together), which does not
depend on how many of the machine's cores other work took; wall MB/s is printed beside it.

Run (2 cores): .venv/bin/python benchmarks/data_bench.py --workdir /tmp/marin-data-bench
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.planted_corpus import PlantedCorpus, score, write_shard  # noqa: E402

SHARDS_PER_SCALE = 5
DOCS_PER_SHARD = 4800


def spec_for(scale: int, docs_per_shard: int = DOCS_PER_SHARD) -> PlantedCorpus:
    return PlantedCorpus(shards=SHARDS_PER_SCALE * scale, docs_per_shard=docs_per_shard)


def _write_one(args: tuple[PlantedCorpus, str, int]) -> None:
    spec, work, shard = args
    truth = write_shard(spec, os.path.join(work, "corpus"), shard)
    with open(os.path.join(work, "truth", f"{shard:05d}.json"), "w") as f:
        json.dump(truth, f)


def generate(work: str, scale: int, workers: int, docs_per_shard: int) -> tuple[str, list[dict]]:
    """The first 4*scale shards of the corpus (each written once, then reused) and their truth."""
    spec = spec_for(scale, docs_per_shard)
    os.makedirs(os.path.join(work, "truth"), exist_ok=True)
    spec_path = os.path.join(work, "spec.json")
    shape = {
        "docs_per_shard": spec.docs_per_shard,
        "words": spec.words,
        "copy_every": spec.copy_every,
        "seed": spec.seed,
    }
    if os.path.exists(spec_path):
        with open(spec_path) as f:
            if json.load(f) != shape:
                raise SystemExit(f"{work} holds a corpus of another shape; use another --workdir")
    with open(spec_path, "w") as f:
        json.dump(shape, f)
    missing = [s for s in range(spec.shards) if not os.path.exists(os.path.join(work, "truth", f"{s:05d}.json"))]
    if missing:
        t = time.perf_counter()
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            list(pool.map(_write_one, [(spec, work, s) for s in missing]))
        print(f"generated {len(missing)} shards in {time.perf_counter() - t:.0f} s", flush=True)
    truth = []
    for s in range(spec.shards):
        with open(os.path.join(work, "truth", f"{s:05d}.json")) as f:
            truth += json.load(f)
    return os.path.join(work, "corpus"), truth


def view(work: str, root: str, scale: int) -> str:
    """A folder with the first 4*scale shards (symlinks)."""
    out = os.path.join(work, f"corpus-x{scale}")
    if not os.path.isdir(out):
        os.makedirs(out)
        for s in range(SHARDS_PER_SCALE * scale):
            name = f"part-{s:05d}.jsonl.gz"
            os.symlink(os.path.join(root, name), os.path.join(out, name))
    return out


def corpus_texts(corpus: str) -> list[str]:
    from marin.processing.documents import list_shards, read_documents

    return [d["text"] for p in list_shards(corpus) for d in read_documents(p)]


# ---------------------------------------------------------------- one measurement, in its own process


def _ids(path_glob_root: str) -> set[str]:
    from marin.processing.documents import list_shards, read_documents

    return {d["id"] for p in list_shards(path_glob_root) for d in read_documents(p)}


def run_side(side: str, corpus: str, out: str, workers: int, tokenizer: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    if side == "dedup":
        from marin.processing.dedup import DedupConfig, dedup_documents

        stats = dedup_documents(DedupConfig(input_path=corpus, output_path=out, workers=workers))
        with open(os.path.join(out, "removed_ids.jsonl")) as f:
            removed = [json.loads(line)["id"] for line in f]
        return {"removed_ids": removed, "kept": stats["kept"], "documents": stats["documents"]}
    if side == "datatrove-minhash":
        return run_datatrove_minhash(corpus, out, workers)
    if side == "tokenize":
        from marin.processing import tokenize as step

        phases = _time_phases(step, ("LevanterEncoder", "run_shards", "write_cache"))
        result = step.tokenize(
            step.TokenizeConfig(input_path=corpus, tokenizer=tokenizer, output_path=out, workers=workers)
        )
        splits = [v for v in result.values() if isinstance(v, dict) and "tokens" in v]
        return {
            "documents": sum(s["documents"] for s in splits),
            "tokens": sum(s["tokens"] for s in splits),
            "phases_cpu": phases,
        }
    if side == "encode_batch":
        from tokenizers import Tokenizer

        texts = corpus_texts(corpus)
        started = time.perf_counter()
        encoded = Tokenizer.from_file(os.path.join(tokenizer, "tokenizer.json")).encode_batch(texts)
        return {
            "documents": len(encoded),
            "tokens": sum(len(e.ids) for e in encoded),
            "excluding_read_s": time.perf_counter() - started,
        }
    if side == "encode_batch_stream":
        from tokenizers import Tokenizer

        from marin.processing.documents import list_shards, read_documents

        tok = Tokenizer.from_file(os.path.join(tokenizer, "tokenizer.json"))
        documents = tokens = 0
        for path in list_shards(corpus):
            texts = [d["text"] for d in read_documents(path)]
            for start in range(0, len(texts), 1024):
                encoded = tok.encode_batch(texts[start : start + 1024])
                documents += len(encoded)
                tokens += sum(len(e.ids) for e in encoded)
            del texts, encoded
        return {"documents": documents, "tokens": tokens}
    if side == "fixed-driver":
        from marin.processing.levanter_cache import LevanterEncoder, write_cache
        from marin.processing.tokenize import tokenize  # noqa: F401

        encoder = LevanterEncoder(tokenizer)
        write_cache(out + "-cache", encoder, [encoder.encode(["hi there"])])
        with open(os.path.join(os.path.dirname(out), "out-fixed-worker-spec.json"), "w") as f:
            json.dump(encoder.worker_spec(), f)
        return {"levanter_imported": "levanter" in sys.modules}
    if side == "fixed-worker":
        from marin.processing.levanter_cache import encoder_from_spec
        from marin.processing.tokenize import tokenize_shard  # noqa: F401

        encoder_from_spec(out + "-spec.json").encode(["hi there"])
        return {"levanter_imported": "levanter" in sys.modules}
    if side.startswith("long-"):
        return run_long(side.removeprefix("long-"), corpus, out, tokenizer)
    if side == "filter":
        from marin.processing.filter import FilterConfig, filter_documents

        stats = filter_documents(FilterConfig(input_path=corpus, output_path=out, workers=workers))
        return {"documents": stats["documents"], "kept": stats["kept"]}
    if side == "datatrove-filters":
        return run_datatrove_filters(corpus, out, workers)
    raise ValueError(f"unknown side {side!r}")


def _time_phases(module, names: tuple[str, ...]) -> dict:
    """Wrap `module`'s functions `names` to add up the CPU seconds each takes: this process's (`<name>`) and,
    where it waits for worker processes, theirs (`<name>_workers`); and this process's peak RSS so far once
    each returns (`<name>_peak_rss_mb_after`: the phase that raised it is the first whose figure is the peak)."""
    phases: dict[str, float] = {}

    def cpu(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    def wrap(name: str, fn):
        def timed(*args, **kwargs):
            mine, theirs = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + cpu(resource.RUSAGE_SELF) - mine
                phases[f"{name}_peak_rss_mb_after"] = _hwm_mb("self")
                if cpu(resource.RUSAGE_CHILDREN) > theirs:
                    phases[f"{name}_workers"] = (
                        phases.get(f"{name}_workers", 0.0) + cpu(resource.RUSAGE_CHILDREN) - theirs
                    )

        return timed

    for name in names:
        setattr(module, name, wrap(name, getattr(module, name)))
    return phases


def run_datatrove_minhash(corpus: str, out: str, workers: int) -> dict:
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

    cfg = MinhashConfig()
    tasks = len([n for n in os.listdir(corpus) if n.startswith("part-")])
    kw = {"workers": workers, "start_method": "spawn"}
    read = lambda: JsonlReader(corpus, glob_pattern="part-*.jsonl.gz")  # noqa: E731
    LocalPipelineExecutor(
        [read(), MinhashDedupSignature(f"{out}/sigs", config=cfg)], tasks=tasks, logging_dir=f"{out}/logs/s", **kw
    ).run()
    LocalPipelineExecutor(
        [MinhashDedupBuckets(f"{out}/sigs", f"{out}/buckets", config=cfg)],
        tasks=cfg.num_buckets,
        logging_dir=f"{out}/logs/b",
        **kw,
    ).run()
    LocalPipelineExecutor(
        [MinhashDedupCluster(f"{out}/buckets", f"{out}/remove", config=cfg)],
        tasks=1,
        logging_dir=f"{out}/logs/c",
        workers=1,
        start_method="spawn",
    ).run()
    LocalPipelineExecutor(
        [read(), MinhashDedupFilter(f"{out}/remove"), JsonlWriter(f"{out}/out")],
        tasks=tasks,
        logging_dir=f"{out}/logs/f",
        **kw,
    ).run()
    kept = _ids(f"{out}/out")
    return {"kept_ids": sorted(kept), "kept": len(kept)}


def run_datatrove_filters(corpus: str, out: str, workers: int) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from marin.processing.filter import FilterConfig, _build_filters

    tasks = len([n for n in os.listdir(corpus) if n.startswith("part-")])
    filters = [f for _, f in _build_filters(FilterConfig(input_path=corpus, output_path=out))]
    LocalPipelineExecutor(
        [JsonlReader(corpus, glob_pattern="part-*.jsonl.gz"), *filters, JsonlWriter(f"{out}/out")],
        tasks=tasks,
        logging_dir=f"{out}/logs",
        workers=workers,
        start_method="spawn",
    ).run()
    return {"kept": len(_ids(f"{out}/out"))}


def run_long(step: str, corpus: str, out: str, tokenizer: str) -> dict:
    if step in ("filter", "filter-language"):
        from marin.processing.filter import FilterConfig, LanguageConfig, filter_documents

        language = LanguageConfig() if step == "filter-language" else None
        return {"kept": filter_documents(FilterConfig(input_path=corpus, output_path=out, language=language))["kept"]}
    if step == "dedup":
        from marin.processing.dedup import DedupConfig, dedup_documents

        return {"kept": dedup_documents(DedupConfig(input_path=corpus, output_path=out))["kept"]}
    from marin.processing.tokenize import TokenizeConfig, tokenize

    stats = tokenize(TokenizeConfig(input_path=corpus, tokenizer=tokenizer, output_path=out, validation_fraction=0))
    return {"tokens": stats["train"]["tokens"]}


def _hwm_mb(pid: int | str) -> float:
    """VmHWM (peak RSS) of one process's current memory image, in MB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return 0.0


class PeakRss:
    """Peak RSS of this process and of each of its descendants, sampled from /proc every 0.1 s.

    Not `getrusage`: a child started by fork + exec keeps as its ru_maxrss the RSS its parent had at the
    fork, so every spawned worker of a 400 MB driver would read >= 400 MB. VmHWM is the peak of the
    process's own memory image after exec.
    """

    def __init__(self):
        import threading

        self.children: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _children_of(self, pid: int) -> list[int]:
        out = []
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    out += [int(c) for c in f.read().split()]
        except OSError:
            pass
        return out

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            todo = self._children_of(os.getpid())
            while todo:
                pid = todo.pop()
                self.children[pid] = max(self.children.get(pid, 0.0), _hwm_mb(pid))
                todo += self._children_of(pid)

    def stop(self) -> tuple[float, float]:
        """(this process's peak, the largest descendant's peak) in MB."""
        self._stop.set()
        self._thread.join()
        return _hwm_mb("self"), max(self.children.values(), default=0.0)


def measure(side: str, corpus: str, out: str, workers: int, tokenizer: str) -> dict:
    import importlib.metadata  # noqa: F401  (datatrove's dependency checks need it imported)

    if side in ("dedup", "datatrove-minhash"):
        import datatrove.pipeline.dedup.minhash  # noqa: F401  (imports before the clock, both sides)
    peaks = PeakRss()
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_side(side, corpus, out, workers, tokenizer)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    driver, worker = peaks.stop()
    result.update(
        wall=wall,
        cpu=cpu + children.ru_utime + children.ru_stime,
        rss_driver_mb=driver,
        rss_worker_mb=worker,
        rss_driver_getrusage_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        rss_worker_getrusage_mb=children.ru_maxrss / 1024,
    )
    return result


def fresh(side: str, corpus: str, work: str, workers: int, tokenizer: str = "") -> dict:
    """`measure` in a fresh process; its output folder is removed afterwards."""
    out = os.path.join(work, f"out-{side}")
    cmd = [sys.executable, os.path.abspath(__file__), "--measure", side, "--corpus", corpus, "--out", out]
    cmd += ["--workers", str(workers), "--tokenizer", tokenizer, "--workdir", work]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the parts


def text_mb(corpus: str) -> float:
    """MB of text (UTF-8) in the corpus, read as a stream."""
    from marin.processing.documents import list_shards, read_documents

    return sum(len(d["text"].encode("utf-8")) for p in list_shards(corpus) for d in read_documents(p)) / 1e6


def line(name: str, r: dict, mb: float) -> str:
    return (
        f"{name:28s} wall {r['wall']:7.1f} s  CPU {r['cpu']:7.1f} s  {mb / r['cpu']:6.2f} MB/s per core "
        f"({mb / r['wall']:6.2f} MB/s wall)  RSS driver {r['rss_driver_mb']:6.0f} MB, largest worker "
        f"{r['rss_worker_mb']:6.0f} MB"
    )


def part_scale(args, work, make_corpus) -> dict:
    rows = {}
    for k in args.scales:
        root, truth = make_corpus(k)
        corpus = view(work, root, k)
        mb = text_mb(corpus)
        r = fresh("dedup", corpus, work, args.workers)
        ids = _ids(corpus)
        q = score([t for t in truth if t["id"] in ids], set(r.pop("removed_ids")))
        rows[k] = {**r, "mb": mb, **q}
        print(line(f"dedup {k}x ({mb:.0f} MB)", r, mb) + f"  recall {q['recall']:.4f} precision {q['precision']:.4f}")
        print(json.dumps({"scale": k, **rows[k]}), flush=True)
    base = rows[min(rows)]
    for k, r in rows.items():
        print(
            f"{k}x vs {min(rows)}x: data x{r['mb'] / base['mb']:.2f}, wall x{r['wall'] / base['wall']:.2f}, "
            f"wall per MB x{(r['wall'] / r['mb']) / (base['wall'] / base['mb']):.2f}, "
            f"driver RSS x{r['rss_driver_mb'] / base['rss_driver_mb']:.2f}, "
            f"worker RSS x{r['rss_worker_mb'] / base['rss_worker_mb']:.2f}"
        )
    return rows


def fixed_costs(work: str, tok: str) -> dict:
    """The tokenize step's per-process fixed cost: the driver's and one worker's, each in a fresh process
    (the driver's writes the encoder spec the worker's reads)."""
    costs = {side: fresh(side, "", work, 1, tok) for side in ("fixed-driver", "fixed-worker")}
    for side, r in costs.items():
        print(
            f"{side:13s} CPU {r['cpu']:5.1f} s  wall {r['wall']:5.1f} s  peak RSS {r['rss_driver_mb']:5.0f} MB  "
            f"imports levanter: {r['levanter_imported']}",
            flush=True,
        )
    return costs


def part_tokenize_scale(args, work, make_corpus) -> dict:
    """Our tokenize step and streamed encode_batch at every scale, side by side: throughput per core and memory."""
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    rows: dict = {}
    tok = os.path.join(work, "tokenizer")
    for k in args.scales:
        root, _ = make_corpus(k)
        if not os.path.exists(os.path.join(tok, "tokenizer.json")):
            train_tokenizer(TrainTokenizerConfig(input_path=_first_shard(work, root), output_path=tok, vocab_size=2048))
        if "fixed" not in rows:
            rows["fixed"] = fixed_costs(work, tok)
        corpus = view(work, root, k)
        mb = text_mb(corpus)
        ours = fresh("tokenize", corpus, work, args.workers, tok)
        theirs = fresh("encode_batch_stream", corpus, work, args.workers, tok) if k in args.baseline_scales else None
        rows[k] = {"mb": mb, "ours": ours, "encode_batch": theirs}
        print(line(f"tokenize {k}x ({mb:.0f} MB)", ours, mb), flush=True)
        print(
            f"tokenize {k}x CPU by phase: "
            + ", ".join(
                f"{name} {v:.0f} MB" if name.endswith("_mb_after") else f"{name} {v:.1f} s"
                for name, v in ours.get("phases_cpu", {}).items()
            ),
            flush=True,
        )
        if theirs is not None:
            print(line(f"encode_batch {k}x ({mb:.0f} MB)", theirs, mb), flush=True)
            fixed = rows["fixed"]["fixed-driver"]["cpu"] + args.workers * rows["fixed"]["fixed-worker"]["cpu"]
            print(
                f"tokenize {k}x per core, ours / encode_batch: {theirs['cpu'] / ours['cpu']:.2f} "
                f"(without the fixed {fixed:.1f} CPU-s: {theirs['cpu'] / (ours['cpu'] - fixed):.2f}); "
                f"tokens {ours['tokens']:,} vs {theirs['tokens']:,}",
                flush=True,
            )
        print(json.dumps({"tokenize_scale": k, **rows[k]}), flush=True)
    scales = [k for k in rows if k != "fixed"]
    base = rows[min(scales)]
    for k in scales:
        r, b = rows[k]["ours"], base["ours"]
        print(
            f"tokenize {k}x vs {min(scales)}x: data x{rows[k]['mb'] / base['mb']:.2f}, "
            f"CPU per MB x{(r['cpu'] / rows[k]['mb']) / (b['cpu'] / base['mb']):.2f}, "
            f"driver RSS x{r['rss_driver_mb'] / b['rss_driver_mb']:.2f}, "
            f"worker RSS x{r['rss_worker_mb'] / b['rss_worker_mb']:.2f}"
        )
    return rows


def part_dedup(args, work, root, truth) -> dict:
    corpus = view(work, root, args.compare_scale)
    mb = text_mb(corpus)
    ids = _ids(corpus)
    mine = [t for t in truth if t["id"] in ids]
    ours = fresh("dedup", corpus, work, args.workers)
    theirs = fresh("datatrove-minhash", corpus, work, args.workers)
    q_ours = score(mine, set(ours.pop("removed_ids")))
    q_theirs = score(mine, ids - set(theirs.pop("kept_ids")))
    print(
        line("dedup (exact + MinHash)", ours, mb)
        + f"  recall {q_ours['recall']:.4f} precision {q_ours['precision']:.4f}"
    )
    print(
        line("datatrove MinHash directly", theirs, mb)
        + f"  recall {q_theirs['recall']:.4f} precision {q_theirs['precision']:.4f}"
    )
    print(f"dedup throughput per core, ours / datatrove: {theirs['cpu'] / ours['cpu']:.2f}  (goal >= 3)")
    print(f"dedup wall, datatrove / ours: {theirs['wall'] / ours['wall']:.2f}", flush=True)
    return {"mb": mb, "ours": {**ours, **q_ours}, "datatrove": {**theirs, **q_theirs}}


def part_tokenize(args, work, root) -> dict:
    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer

    corpus = view(work, root, args.compare_scale)
    mb = text_mb(corpus)
    tok = os.path.join(work, "tokenizer")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        train_tokenizer(TrainTokenizerConfig(input_path=_first_shard(work, root), output_path=tok, vocab_size=2048))
    ours = fresh("tokenize", corpus, work, args.workers, tok)
    theirs = fresh("encode_batch", corpus, work, args.workers, tok)
    for name, r in (("tokenize step", ours), ("HF encode_batch (in memory)", theirs)):
        print(
            line(name, r, mb)
            + f"  {r['tokens'] / r['cpu']:,.0f} tokens/s per core ({r['tokens'] / r['wall']:,.0f} wall)"
        )
    print(f"tokenize per core, ours / encode_batch: {theirs['cpu'] / ours['cpu']:.2f}  (goal >= 0.9)")
    print(f"tokenize wall, encode_batch / ours: {theirs['wall'] / ours['wall']:.2f}", flush=True)
    return {"mb": mb, "ours": ours, "encode_batch": theirs}


def _first_shard(work: str, root: str) -> str:
    out = os.path.join(work, "corpus-first")
    if not os.path.isdir(out):
        os.makedirs(out)
        os.symlink(os.path.join(root, "part-00000.jsonl.gz"), os.path.join(out, "part-00000.jsonl.gz"))
    return out


def part_filter(args, work, root) -> dict:
    corpus = view(work, root, args.compare_scale)
    mb = text_mb(corpus)
    ours = fresh("filter", corpus, work, args.workers)
    theirs = fresh("datatrove-filters", corpus, work, args.workers)
    print(line("filter step", ours, mb) + f"  kept {ours['kept']}")
    print(line("datatrove filters directly", theirs, mb) + f"  kept {theirs['kept']}")
    print(f"filter per core, ours / datatrove: {theirs['cpu'] / ours['cpu']:.2f}  (goal >= 0.9)")
    print(f"filter wall, datatrove / ours: {theirs['wall'] / ours['wall']:.2f}", flush=True)
    return {"mb": mb, "ours": ours, "datatrove": theirs}


def to_parquet(corpus: str, out: str) -> str:
    """The corpus's shards as Parquet (same rows, metadata as a JSON string column), written once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from marin.processing.documents import list_shards, read_documents

    if os.path.isdir(out):
        return out
    os.makedirs(out + ".tmp", exist_ok=True)
    for path in list_shards(corpus):
        rows = [
            {"id": d["id"], "text": d["text"], "source": d["source"], "meta": json.dumps(d["metadata"])}
            for d in read_documents(path)
        ]
        name = os.path.basename(path).replace(".jsonl.gz", ".parquet")
        pq.write_table(
            pa.Table.from_pylist(rows), os.path.join(out + ".tmp", name), row_group_size=1024, compression="zstd"
        )
    os.rename(out + ".tmp", out)
    return out


def part_parquet(args, work, root) -> dict:
    import pyarrow.parquet as pq

    from marin.processing.documents import list_shards, read_documents

    folder = to_parquet(view(work, root, args.compare_scale), os.path.join(work, f"parquet-x{args.compare_scale}"))
    files = list_shards(folder)
    mb = sum(os.path.getsize(f) for f in files) / 1e6

    def ours() -> int:
        return sum(len(d["text"]) for f in files for d in read_documents(f))

    def pyarrow_values() -> int:
        n = 0
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=1024):
                columns = [c.to_pylist() for c in batch.columns]
                n += sum(len(t) for t in columns[batch.schema.names.index("text")])
        return n

    def pyarrow_decode() -> int:
        return sum(batch.num_rows for f in files for batch in pq.ParquetFile(f).iter_batches(batch_size=1024))

    best = {"ours": float("inf"), "pyarrow_values": float("inf"), "pyarrow_decode": float("inf")}
    ratios = []
    for _ in range(args.rounds):
        took = {}
        for name, fn in (("ours", ours), ("pyarrow_values", pyarrow_values), ("pyarrow_decode", pyarrow_decode)):
            started = time.process_time()
            fn()
            took[name] = time.process_time() - started
            best[name] = min(best[name], took[name])
        ratios.append(took["pyarrow_values"] / took["ours"])
    ratios.sort()
    median = ratios[len(ratios) // 2]
    for name, t in best.items():
        print(f"parquet read {name:16s} CPU {t:6.3f} s  ({mb / t:6.1f} MB/s of Parquet per core)")
    print(
        f"parquet: ours / pyarrow iter_batches+to_pylist: {best['pyarrow_values'] / best['ours']:.2f} best of "
        f"{args.rounds}, {median:.2f} median of the rounds' ratios (goal >= 0.9)"
    )
    print(
        f"parquet: ours / pyarrow iter_batches decoding only: {best['pyarrow_decode'] / best['ours']:.2f}", flush=True
    )
    return {
        "parquet_mb": mb,
        "files": len(files),
        "median_ratio": median,
        **{f"{k}_cpu_s": v for k, v in best.items()},
    }


def part_long(args, work, root) -> dict:
    """One 5 MB and one 50 MB single-line document through filter, dedup and tokenize (fresh processes)."""
    import gzip
    import random

    from marin.processing.train_tokenizer import TrainTokenizerConfig, train_tokenizer
    from tests.data_docs import english_doc

    tok = os.path.join(work, "tokenizer")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        train_tokenizer(TrainTokenizerConfig(input_path=_first_shard(work, root), output_path=tok, vocab_size=2048))
    rows = {}
    for mb in args.long_mb:
        corpus = os.path.join(work, f"long-{mb}mb")
        if not os.path.isdir(corpus):
            rng = random.Random(mb)
            parts, size = [], 0
            while size < mb * 1_000_000:
                parts.append(english_doc(rng, 2000).replace("\n", " "))
                size += len(parts[-1]) + 1
            line_ = json.dumps({"id": f"long-{mb}", "text": " ".join(parts)}).encode() + b"\n"
            os.makedirs(corpus + ".tmp")
            with open(os.path.join(corpus + ".tmp", "part-00000.jsonl.gz"), "wb") as f:
                f.write(gzip.compress(line_, compresslevel=1))
            os.rename(corpus + ".tmp", corpus)
        for step in args.long_steps:
            r = fresh(f"long-{step}", corpus, work, 1, tok)
            rows[f"{step}-{mb}mb"] = r
            print(
                f"long document {mb:3d} MB {step:9s} wall {r['wall']:7.1f} s  CPU {r['cpu']:7.1f} s  "
                f"RSS driver {r['rss_driver_mb']:6.0f} MB, largest worker {r['rss_worker_mb']:6.0f} MB",
                flush=True,
            )
    small, big = min(args.long_mb), max(args.long_mb)
    for step in args.long_steps if small != big else ():
        a, b = rows[f"{step}-{small}mb"], rows[f"{step}-{big}mb"]
        print(
            f"long document {step}: {big} MB vs {small} MB (x{big / small:.0f} the text): CPU x{b['cpu'] / a['cpu']:.2f}, "
            f"peak RSS x{b['rss_driver_mb'] / a['rss_driver_mb']:.2f}",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/marin-data-bench", help="kept between runs (the corpus is reused)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scales", default="1,4,16")
    parser.add_argument("--compare-scale", type=int, default=1)
    parser.add_argument(
        "--baseline-scales", default="1,4,16", help="tokenize-scale: scales at which encode_batch also runs"
    )
    parser.add_argument("--parts", default="dedup,tokenize,filter,scale", help="run in this order")
    parser.add_argument("--docs-per-shard", type=int, default=DOCS_PER_SHARD, help="smaller for a quick try")
    parser.add_argument("--rounds", type=int, default=15, help="parquet part: best of this many reads")
    parser.add_argument("--long-mb", default="5,50", help="long part: document sizes in MB")
    parser.add_argument("--long-steps", default="filter,dedup,tokenize", help="long part: steps, in order")
    parser.add_argument("--results", default=None, help="write every figure to this JSON file")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.corpus, args.out, args.workers, args.tokenizer)))
        return
    args.scales = [int(s) for s in args.scales.split(",")]
    args.baseline_scales = [int(s) for s in args.baseline_scales.split(",")]
    args.long_mb = [int(s) for s in args.long_mb.split(",")]
    args.long_steps = args.long_steps.split(",")
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    results = {"workers": args.workers, "cores": os.cpu_count()}

    def corpus(scale: int) -> tuple[str, list[dict]]:
        return generate(work, scale, args.workers, args.docs_per_shard)

    for part in args.parts.split(","):
        if part == "scale":
            results["scale"] = part_scale(args, work, corpus)
        elif part == "tokenize-scale":
            results["tokenize_scale"] = part_tokenize_scale(args, work, corpus)
        elif part == "dedup":
            results["dedup"] = part_dedup(args, work, *corpus(args.compare_scale))
        elif part == "tokenize":
            results["tokenize"] = part_tokenize(args, work, corpus(args.compare_scale)[0])
        elif part == "filter":
            results["filter"] = part_filter(args, work, corpus(args.compare_scale)[0])
        elif part == "parquet":
            results["parquet"] = part_parquet(args, work, corpus(args.compare_scale)[0])
        elif part == "long":
            results["long"] = part_long(args, work, corpus(args.compare_scale)[0])
        else:
            raise SystemExit(f"unknown part {part!r}")
        if args.results:
            with open(args.results, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
