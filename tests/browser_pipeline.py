"""A prefix for the browser tests made by the real executor: hello world plus a tiny LM-shaped pipeline.

`lab_prefix(root)` runs, with `marin.execution.Executor(root, backend="local")`:

1. `experiments/tutorial/hello_world.py` (the real steps): hello/data, hello/stats.
2. "tiny_lm, first try": raw/corpus (docs.jsonl.gz, a parquet table, provenance.json), filtered/corpus
   and tokenized/tiny (stats.json), train/tiny at lr 3e-3 (metrics.jsonl), dedup/corpus (raises:
   FAILED) and tokenized/dedup (DEP_FAILED).
3. "tiny_lm: data to forecast", in a background thread and left running: the same data steps
   (skipped), train/tiny at lr 1e-3 which writes its metrics and then *holds* (RUNNING, with a live
   lease and heartbeat) until the context exits, eval/tiny (results.json; a nonblocking dependency
   on the training step, so it finishes while training runs), and ladder/forecast, never selected
   (so its folder does not exist: not started).

The step functions are tiny and write the files the real step library writes, with the same names.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorRunError, ExecutorStep, output_path_of, versioned

HOLDS: dict[str, threading.Event] = {}


@dataclass(frozen=True)
class CorpusConfig:
    n: int
    """Documents to write."""
    rows: int = 300
    """Rows of the parquet table (100 per row group)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class CountConfig:
    input_path: str
    """A docs.jsonl.gz to count."""
    kind: str = "filter"
    """filter | tokenize | dedup (dedup raises, to make a failed step)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class TrainConfig:
    data: str
    """The tokenized data (only recorded)."""
    lr: float
    """Learning rate (shapes the fake loss curve)."""
    steps: int
    """Rows of metrics.jsonl."""
    hold: str = ""
    """Name of an event in HOLDS to wait for after writing metrics (keeps the step RUNNING)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class EvalConfig:
    checkpoint: str
    """The training step's folder (a nonblocking dependency)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class ForecastConfig:
    results: str
    """The evaluation results."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def make_corpus(config: CorpusConfig) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(f"{config.output_path}/table", exist_ok=True)
    lines = [
        json.dumps(
            {
                "id": f"doc-{i:05d}",
                "text": f"Document {i}: " + "the quick brown fox jumps over the lazy dog. " * (1 + i % 5),
                "source": "tutorial",
                "metadata": {"line": i, "shard": i % 3},
            }
        )
        for i in range(config.n)
    ]
    data = gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=1, mtime=0)
    with open(f"{config.output_path}/docs.jsonl.gz", "wb") as f:
        f.write(data)
    table = pa.table(
        {
            "id": [f"row-{i:05d}" for i in range(config.rows)],
            "tokens": [i * 7 % 101 for i in range(config.rows)],
            "score": [round(1.0 / (1 + i), 6) for i in range(config.rows)],
            "text": [f"parquet row number {i}" for i in range(config.rows)],
        }
    )
    pq.write_table(table, f"{config.output_path}/table/part-00000.parquet", row_group_size=100)
    provenance = {
        "source": "file:///corpus/plays",
        "revision": "v1",
        "files": [{"path": "docs.jsonl.gz", "size": len(data), "sha256": "0" * 64}],
    }
    with open(f"{config.output_path}/provenance.json", "w") as f:
        json.dump(provenance, f, indent=2, sort_keys=True)
    print(f"wrote {config.n} documents and {config.rows} parquet rows", flush=True)


def count(config: CountConfig) -> None:
    with gzip.open(config.input_path, "rt") as f:
        n = sum(1 for _ in f)
    if config.kind == "dedup":
        raise ValueError("dedup threshold must be < 1 (got 1.5)")
    if config.kind == "filter":
        stats = {"input": n, "kept": n - 3, "removed": {"gopher_short_doc": 2, "c4_badwords": 1}}
    else:
        stats = {"documents": n, "tokens": n * 37, "bytes": n * 160}
    os.makedirs(config.output_path, exist_ok=True)
    with open(f"{config.output_path}/stats.json", "w") as f:
        json.dump(stats, f, indent=2, sort_keys=True)
    print(f"{config.kind}: {stats}", flush=True)


def train(config: TrainConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    scale = config.lr / 1e-3
    with open(f"{config.output_path}/metrics.jsonl", "w") as f:
        for step in range(config.steps):
            loss = 2.0 + 6.0 * (1 + 0.1 * scale) / (1 + step / 8)
            row = {"step": step, "loss": round(loss, 5), "lr": config.lr * min(1.0, (step + 1) / 10)}
            if step % 10 == 0:
                row["eval/loss"] = round(loss + 0.1, 5)
            row.update({"tokens": (step + 1) * 2048, "throughput": 7300.0})
            f.write(json.dumps(row) + "\n")
    print(f"step 0 loss 8.0\nstep {config.steps - 1} loss {loss:.2f}", flush=True)
    if config.hold:
        print("holding (the test keeps this step RUNNING)", flush=True)
        HOLDS[config.hold].wait(600)
        print("released: saving the final checkpoint", flush=True)
        time.sleep(0.5)
        print("done", flush=True)


def evaluate(config: EvalConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    results = {"shakespeare_val": {"loss": 2.41, "bpb": 1.12}, "sonnets": {"loss": 2.77, "bpb": 1.29}}
    with open(f"{config.output_path}/results.json", "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)


def forecast(config: ForecastConfig) -> None:
    raise AssertionError("ladder/forecast is never selected in the browser tests")


def pipeline(lr: float, steps: int, hold: str = "") -> dict[str, ExecutorStep]:
    corpus = ExecutorStep("raw/corpus", make_corpus, CorpusConfig(n=versioned(120)))
    docs = output_path_of(corpus, "docs.jsonl.gz")
    filt = ExecutorStep("filtered/corpus", count, CountConfig(input_path=docs, kind=versioned("filter")))
    tok = ExecutorStep("tokenized/tiny", count, CountConfig(input_path=docs, kind=versioned("tokenize")))
    dedup = ExecutorStep("dedup/corpus", count, CountConfig(input_path=docs, kind=versioned("dedup")))
    dedup_tok = ExecutorStep(
        "tokenized/dedup", count, CountConfig(input_path=output_path_of(dedup, "docs.jsonl.gz"), kind="tokenize")
    )
    tr = ExecutorStep(
        "train/tiny", train, TrainConfig(data=output_path_of(tok), lr=versioned(lr), steps=versioned(steps), hold=hold)
    )
    ev = ExecutorStep("eval/tiny", evaluate, EvalConfig(checkpoint=output_path_of(tr).nonblocking()))
    ladder = ExecutorStep("ladder/forecast", forecast, ForecastConfig(results=output_path_of(ev, "results.json")))
    return {
        "corpus": corpus,
        "filter": filt,
        "tokenize": tok,
        "dedup": dedup,
        "dedup_tok": dedup_tok,
        "train": tr,
        "eval": ev,
        "ladder": ladder,
    }


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root)


def _status(root: Path, rel: str) -> str | None:
    try:
        return (root / rel / ".executor_status").read_text().strip()
    except FileNotFoundError:
        return None


def _executor(root: Path, name: str, description: str) -> Executor:
    return Executor(
        str(root), backend="local", experiment_name=name, script="tests/browser_pipeline.py", description=description
    )


@contextlib.contextmanager
def lab_prefix(root: Path):
    """Build the prefix (see the module docstring); yields the relative paths the tests look for."""
    from experiments.tutorial import hello_world

    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        hello = Executor(
            str(root),
            backend="local",
            experiment_name="hello_world",
            script="experiments/tutorial/hello_world.py",
            description="Hello world: generate documents, then count them",
        )
        paths = hello.run([hello_world.stats])
        hello_record = paths.record_path
        first = pipeline(lr=3e-3, steps=60)
        ex = _executor(root, "tiny_lm", "Tiny LM, first try (lr 3e-3)")
        try:
            first_record = ex.run([first["filter"], first["train"], first["dedup_tok"]]).record_path
        except ExecutorRunError as failure:
            first_record = failure.result.record_path
    hold = f"hold-{id(root)}-{time.time()}"
    HOLDS[hold] = threading.Event()
    second = pipeline(lr=1e-3, steps=120, hold=hold)
    ex2 = _executor(root, "tiny_lm", "Tiny LM: data to forecast")
    planned = ex2.plan(list(second.values()))
    names = {
        "hello_record": _rel(root, hello_record),
        "first_record": _rel(root, first_record),
        "tiny_record": _rel(root, ex2.record_path(ex2.plan_dag(list(second.values())))),
        "data": _rel(root, paths[hello_world.data]),
        "stats": _rel(root, paths[hello_world.stats]),
        "train_old": _rel(root, ex.plan([first["train"]])[first["train"]]),
        "hold": hold,
    }
    names.update({key: _rel(root, planned[step]) for key, step in second.items()})
    errors: list[BaseException] = []

    def run_second() -> None:
        try:
            ex2.run(list(second.values()), run_only=["^(raw|filtered|tokenized|train|eval|dedup)/"])
        except ExecutorRunError:
            pass
        except BaseException as e:  # noqa: BLE001 - reported to the fixture below
            errors.append(e)

    thread = threading.Thread(target=run_second, name="browser-lab-run", daemon=True)
    thread.start()
    try:
        deadline = time.time() + 60
        while not (_status(root, names["train"]) == "RUNNING" and _status(root, names["eval"]) == "SUCCESS"):
            if errors or not thread.is_alive() or time.time() > deadline:
                raise RuntimeError(f"the background run did not reach RUNNING/SUCCESS: {errors}")
            time.sleep(0.05)
        yield names
    finally:
        release(names)
        thread.join(60)


def release(names: dict) -> None:
    """Let the held training step finish."""
    HOLDS[names["hold"]].set()
