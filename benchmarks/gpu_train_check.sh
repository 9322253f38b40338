#!/usr/bin/env bash
# Train the largest tutorial ladder rung on one GPU and print tokens/s and MFU (< 5 minutes).
# Run from the repository root with .venv present:  bash benchmarks/gpu_train_check.sh
# If jax in .venv has no CUDA backend, this installs jax[cuda12]==0.7.2 into it first (needs PyPI access;
# on a machine without network, install those wheels beforehand).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ! "$PY" -c 'import jax, sys; sys.exit(jax.default_backend() != "gpu")' 2>/dev/null; then
  echo "jax sees no GPU; installing jax[cuda12]==0.7.2 into .venv"
  if command -v uv >/dev/null 2>&1; then
    uv pip install --python "$PY" "jax[cuda12]==0.7.2"
  else
    "$PY" -m pip install -q "jax[cuda12]==0.7.2"
  fi
fi
timeout 280 "$PY" benchmarks/gpu_train_check.py "$@"
