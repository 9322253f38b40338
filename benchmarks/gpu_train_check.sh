#!/usr/bin/env bash
# Train the largest tutorial ladder rung on one GPU and print tokens/s and MFU (< 5 minutes).
# Run from the repository root with .venv present:  bash benchmarks/gpu_train_check.sh
# If jax in .venv has no CUDA backend, this installs the lock's `gpu` extra (jax[cuda12]==0.7.2 and its
# CUDA wheels, pinned in uv.lock) into it first: needs PyPI, or a uv cache that already holds them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ! "$PY" -c 'import jax, sys; sys.exit(jax.default_backend() != "gpu")' 2>/dev/null; then
  echo "jax sees no GPU; installing the lock's gpu extra (uv sync --frozen --extra gpu)"
  uv sync --frozen --extra gpu
fi
timeout 280 "$PY" benchmarks/gpu_train_check.py "$@"
