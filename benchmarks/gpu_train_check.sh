#!/usr/bin/env bash
# GPU check: marin's train step vs Levanter's train_lm on the same config, for the tutorial ladder's
# largest rung and a ~150M-parameter Llama; prints tokens/s, MFU (with the FLOP count used) and the loss.
#
#   bash benchmarks/gpu_train_check.sh            # on one GPU machine, from anywhere (about 5 minutes)
#   bash benchmarks/gpu_train_check.sh --smoke    # on a CPU: tiny models, 4 steps, checks the script only
#
# On a GPU it uses .venv-gpu, synced from the lock with the `gpu` extra (jax[cuda12]==0.7.2 and its CUDA
# wheels, pinned in uv.lock; needs PyPI or a uv cache holding them). .venv, which `make setup` manages,
# is left as it is. --smoke runs in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled RAY_AUTH_MODE=disabled
if [[ " $* " == *" --smoke "* ]]; then
  exec timeout 900 .venv/bin/python benchmarks/gpu_train_check.py "$@"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if [[ ! -x .venv-gpu/bin/python ]] || ! .venv-gpu/bin/python -c 'import jax, sys; sys.exit(jax.default_backend() != "gpu")' 2>/dev/null; then
  echo "syncing .venv-gpu from uv.lock with the gpu extra (UV_PROJECT_ENVIRONMENT=.venv-gpu uv sync --frozen --extra gpu)"
  UV_PROJECT_ENVIRONMENT=.venv-gpu uv sync --frozen --extra gpu
fi
exec timeout 1500 .venv-gpu/bin/python benchmarks/gpu_train_check.py "$@"
