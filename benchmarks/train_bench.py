"""Training throughput through marin's train step vs Levanter's `train_lm` run directly, side by side.

Both runs train the same `TrainLmConfig` (marin builds it; the direct run hands it to
`levanter.main.train_lm.main` itself) on the same tokenized Shakespeare, one after the other in this
process, alternating when --repeats > 1. Throughput is steady-state tokens/s over the wall clock of the
training loop (data loading, steps, hooks, logging), leaving out the first steps (they compile); the
best and the median over the repeats are printed (on a shared machine the best is the least disturbed). End-to-end wall time (compilation, checkpoints, marin's HF export and records included) is
printed too. Figures go to docs/benchmarks-training.md.

    python benchmarks/train_bench.py                 # width 96, 3 layers, seq 128, batch 16, 40 steps, 3 repeats
    python benchmarks/train_bench.py --width 128 --layers 4 --seq-len 256 --batch 8 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.training_fixtures import build_tokenized, build_tokenizer, shakespeare_paragraphs  # noqa: E402


def steady_tokens_per_second(metrics: Path, tokens_per_step: int, skip: int, clock: str = "elapsed_s") -> float:
    """Tokens over the time from step `skip` to the last step: the whole loop (data, step, hooks, logging).
    `clock` is `elapsed_s` (wall) or `cpu_s` (this process's CPU time: robust to other load on the machine)."""
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    first, last = lines[skip], lines[-1]
    return tokens_per_step * (last["step"] - first["step"]) / (last[clock] - first[clock])


def run_marin(config) -> float:
    from marin.training.train import train

    start = time.perf_counter()
    train(config)
    return time.perf_counter() - start


def run_levanter(config, out: Path) -> float:
    """The very TrainLmConfig marin runs for `config` (same trackers: metrics.jsonl and W&B offline), given
    to `train_lm.main` directly: no input checks, no records, no HF export."""
    import os

    from levanter.main import train_lm

    from marin.training.train import levanter_config, resolve_tokenizer, run_id_of

    lev = levanter_config(config, resolve_tokenizer(config), {}, run_id_of(str(out)))
    (out / "wandb").mkdir(parents=True)
    os.environ["WANDB_DIR"] = str(out / "wandb")
    start = time.perf_counter()
    train_lm.main(lev)
    os.environ.pop("WANDB_DIR")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=96)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=5, help="first steps left out of the steady state")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from marin.training.config import LlamaModelConfig, TrainConfig

    root = Path(tempfile.mkdtemp(prefix="marin-train-bench-"))
    texts = shakespeare_paragraphs(1_000_000)
    tokenizer = build_tokenizer(root / "tokenizer", texts, vocab_size=2048)
    data = build_tokenized(root / "plays", tokenizer, texts[:-100], texts[-100:])
    model = LlamaModelConfig(
        seq_len=args.seq_len,
        hidden_dim=args.width,
        intermediate_dim=4 * args.width,
        num_layers=args.layers,
        num_heads=max(1, args.width // 32),
        num_kv_heads=max(1, args.width // 32),
    )
    results: dict[str, list[tuple[float, float]]] = {"levanter": [], "marin": []}
    per_cpu: dict[str, list[float]] = {"levanter": [], "marin": []}
    for repeat in range(args.repeats):
        for who in ("levanter", "marin"):
            out = root / f"{who}-{repeat}"
            config = TrainConfig(
                data={"plays": str(data)},
                output_path=str(out),
                model=model,
                train_batch_size=args.batch,
                num_train_steps=args.steps,
                checkpoint_every_steps=10**9,
                max_eval_batches=1,
            )
            wall = run_marin(config) if who == "marin" else run_levanter(config, out)
            tps = steady_tokens_per_second(out / "metrics.jsonl", config.tokens_per_step, args.skip)
            cpu = steady_tokens_per_second(out / "metrics.jsonl", config.tokens_per_step, args.skip, "cpu_s")
            results[who].append((tps, wall))
            per_cpu[who].append(cpu)
            print(
                f"{who:9s} repeat {repeat}: {tps:8.0f} tokens/s steady (wall), {cpu:8.0f} tokens per CPU-second,"
                f" {wall:6.1f} s end to end",
                flush=True,
            )

    n_params = model.parameter_count(2048)
    print()
    print(
        f"model: width {args.width}, {args.layers} layers, seq {args.seq_len}, batch {args.batch}, {n_params:,} params"
    )
    for label, pick in (("best", max), ("median", statistics.median)):
        lev_tps = pick(t for t, _ in results["levanter"])
        marin_tps = pick(t for t, _ in results["marin"])
        print(
            f"{label:6s} of {args.repeats}, wall: levanter train_lm direct {lev_tps:8.0f} tokens/s,"
            f" marin {marin_tps:8.0f} tokens/s, ratio {marin_tps / lev_tps:.3f} (want >= 0.95)"
        )
    lev_cpu, marin_cpu = statistics.median(per_cpu["levanter"]), statistics.median(per_cpu["marin"])
    print(
        f"median of {args.repeats}, per CPU-second: levanter {lev_cpu:8.0f} tokens, marin {marin_cpu:8.0f} tokens,"
        f" ratio {marin_cpu / lev_cpu:.3f}"
    )
    lev_wall = statistics.median(w for _, w in results["levanter"])
    marin_wall = statistics.median(w for _, w in results["marin"])
    print(
        f"end to end: levanter {lev_wall:.1f} s, marin {marin_wall:.1f} s (marin adds W&B offline, HF export, records)"
    )


if __name__ == "__main__":
    main()
