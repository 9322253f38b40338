"""Builds an executor prefix for the browser tests and benchmark, written exactly per docs/records.md.

Until the executor lands on main the browser tests cannot run real experiments, so this
module writes what the executor writes: experiment records, `.runs.jsonl`, step folders
with `.executor_info` / status / lease / manifest / logs, and the files the step library
leaves (a docs.jsonl.gz, a parquet table, stats.json, provenance.json, metrics.jsonl,
results.json). Hashes are computed as DESIGN.md §4 says, so names look like real ones.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from pathlib import Path


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


def docs_jsonl_gz(n: int) -> bytes:
    lines = []
    for i in range(n):
        doc = {
            "id": f"doc-{i:05d}",
            "text": f"Document {i}: " + "the quick brown fox jumps over the lazy dog. " * (1 + i % 5),
            "source": "tutorial",
            "metadata": {"line": i, "shard": i % 3},
        }
        lines.append(json.dumps(doc))
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=1, mtime=0)


def parquet_bytes(n: int, row_group: int) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": [f"row-{i:05d}" for i in range(n)],
            "tokens": [i * 7 % 101 for i in range(n)],
            "score": [round(1.0 / (1 + i), 6) for i in range(n)],
            "text": [f"parquet row number {i}" for i in range(n)],
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group)
    return buf.getvalue()


def metrics_jsonl(n: int, scale: float = 1.0) -> bytes:
    rows = []
    for step in range(n):
        loss = 2.0 + 6.0 * scale / (1 + step / 8)
        rows.append(
            {
                "step": step,
                "loss": round(loss, 5),
                "eval/loss": round(loss + 0.1, 5) if step % 10 == 0 else None,
                "lr": 1e-3 * min(1.0, (step + 1) / 10),
                "tokens": (step + 1) * 2048,
                "throughput": 7300.0,
            }
        )
    return ("\n".join(json.dumps({k: v for k, v in r.items() if v is not None}) for r in rows) + "\n").encode()


def build_prefix(root: Path) -> dict:
    """Write the test prefix under `root`; returns names and relative paths the tests look for."""
    p = str(root)
    data = make_step(p, "hello/data", {"n": 120}, fn="experiments/tutorial/hello_world.py:generate")
    stats = make_step(
        p,
        "hello/stats",
        {"min_len": 3, "input_path": "DEP[0]/docs.jsonl.gz"},
        [data],
        fn="experiments/tutorial/hello_world.py:compute_stats",
    )
    docs = docs_jsonl_gz(120)
    write_step_folder(
        root,
        data,
        "SUCCESS",
        {"docs.jsonl.gz": docs, "table/part-00000.parquet": parquet_bytes(300, 100)},
        log="generating 120 documents\nwrote docs.jsonl.gz\n",
    )
    write_step_folder(
        root,
        stats,
        "SUCCESS",
        {"stats.json": json.dumps({"documents": 120, "kept": 117, "removed": {"short": 3}}).encode()},
    )
    hello = write_record(
        root,
        "hello_world",
        "experiments/tutorial/hello_world.py",
        "Hello world",
        [data, stats],
        [
            {
                data["relative_output_path"]: {
                    "outcome": "SUCCESS",
                    "started": "2026-11-30T09:30:01Z",
                    "ended": "2026-11-30T09:30:03Z",
                    "duration_s": 2.1,
                },
                stats["relative_output_path"]: {
                    "outcome": "SUCCESS",
                    "started": "2026-11-30T09:30:03Z",
                    "ended": "2026-11-30T09:30:04Z",
                    "duration_s": 0.7,
                },
            }
        ],
    )

    download = make_step(
        p, "raw/shakespeare", {"source": "file:///corpus", "revision": "v1"}, fn="marin.download:download"
    )
    filt = make_step(
        p,
        "filtered/shakespeare",
        {"min_words": 5, "input_path": "DEP[0]"},
        [download],
        fn="marin.processing.filter:run",
    )
    tok = make_step(p, "tokenized/tiny", {"input_path": "DEP[0]"}, [filt], fn="marin.processing.tokenize:tokenize")
    train_old = make_step(
        p, "train/tiny", {"lr": 0.003, "steps": 60, "data": "DEP[0]"}, [tok], fn="marin.training.train:train"
    )
    train = make_step(
        p, "train/tiny", {"lr": 0.001, "steps": 120, "data": "DEP[0]"}, [tok], fn="marin.training.train:train"
    )
    evaluate = make_step(p, "eval/tiny", {"checkpoint": "DEP[0]"}, [], [train], fn="marin.evaluation.evaluate:evaluate")
    dedup = make_step(
        p,
        "dedup/shakespeare",
        {"threshold": 0.8, "input_path": "DEP[0]"},
        [download],
        fn="marin.processing.dedup:dedup",
    )
    dedup_tok = make_step(
        p, "tokenized/dedup", {"input_path": "DEP[0]"}, [dedup], fn="marin.processing.tokenize:tokenize"
    )
    ladder = make_step(p, "ladder/forecast", {"rungs": "DEP[0]"}, [evaluate], fn="marin.evaluation.ladder:forecast")
    provenance = {
        "source": "file:///corpus",
        "revision": "v1",
        "files": [{"path": "plays/hamlet.md", "size": 190000, "sha256": "ab" * 32}],
    }
    write_step_folder(
        root,
        download,
        "SUCCESS",
        {"provenance.json": json.dumps(provenance).encode(), "plays/hamlet.md": b"# Hamlet\n"},
    )
    write_step_folder(
        root,
        filt,
        "SUCCESS",
        {
            "stats.json": json.dumps(
                {"input": 1000, "kept": 910, "removed": {"gopher_short_doc": 60, "c4_badwords": 30}}
            ).encode()
        },
    )
    write_step_folder(
        root,
        tok,
        "SUCCESS",
        {"stats.json": json.dumps({"documents": 910, "tokens": 1234567, "bytes": 5300000}).encode()},
    )
    write_step_folder(root, train_old, "SUCCESS", {"metrics.jsonl": metrics_jsonl(60, scale=1.3)})
    write_step_folder(
        root,
        train,
        "RUNNING",
        {"metrics.jsonl": metrics_jsonl(120)},
        log="step 0 loss 8.0\nstep 119 loss 2.3\n",
        lease=True,
    )
    write_step_folder(
        root,
        evaluate,
        "SUCCESS",
        {
            "results.json": json.dumps(
                {"shakespeare_val": {"loss": 2.41, "bpb": 1.12}, "sonnets": {"loss": 2.77, "bpb": 1.29}}
            ).encode()
        },
    )
    write_step_folder(
        root,
        dedup,
        "FAILED",
        log='Traceback (most recent call last):\n  File "dedup.py", line 3\nValueError: threshold must be < 1\n',
    )
    write_step_folder(root, dedup_tok, "DEP_FAILED")
    write_record(
        root,
        "tiny_lm",
        "experiments/tutorial/tiny_lm.py",
        "Tiny LM, old learning rate",
        [download, filt, tok, train_old],
        [],
    )
    tiny = write_record(
        root,
        "tiny_lm",
        "experiments/tutorial/tiny_lm.py",
        "Tiny LM: data to forecast",
        [download, filt, tok, train, evaluate, dedup, dedup_tok, ladder],
        [
            {
                download["relative_output_path"]: {
                    "outcome": "SUCCESS",
                    "started": "2026-11-30T09:31:00Z",
                    "ended": "2026-11-30T09:31:12Z",
                    "duration_s": 12.0,
                },
                dedup["relative_output_path"]: {
                    "outcome": "FAILED",
                    "started": "2026-11-30T09:31:12Z",
                    "ended": "2026-11-30T09:31:13Z",
                    "duration_s": 1.0,
                },
            }
        ],
    )
    (root / "experiments" / "broken-00000000.json").write_text('{"format": "marin.experiment/1", "steps": [')
    return {
        "hello_record": f"experiments/{hello.name}",
        "tiny_record": f"experiments/{tiny.name}",
        "data": data["relative_output_path"],
        "stats": stats["relative_output_path"],
        "train": train["relative_output_path"],
        "train_old": train_old["relative_output_path"],
        "eval": evaluate["relative_output_path"],
        "download": download["relative_output_path"],
        "dedup": dedup["relative_output_path"],
        "ladder": ladder["relative_output_path"],
    }
