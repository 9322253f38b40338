#!/usr/bin/env bash
# The executor benchmark: benchmarks/executor_harness over this project's executor, with the
# local backend (sizes 1,000 and 10,000 layered, a 200-step chain) and the Ray backend (1,000 and the
# chain). Results: benchmarks/results/executor-{local,ray}.json; the table goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BENCH=${BENCH:-$ROOT/benchmarks/executor_harness}
WORK=$(mktemp -d)
mkdir -p benchmarks/results
export PYTHONPATH=$ROOT RAY_AUTH_MODE=disabled
cd "$WORK"
"$ROOT/.venv/bin/python" "$BENCH/marin_baseline.py" --adapter "$BENCH/ours_adapter.py" \
  --sizes 1000,10000 --chain-depths 200 --reps "${REPS:-3}" --import-reps 5 \
  --workdir "$WORK/local" --out "$ROOT/benchmarks/results/executor-local.json" >/dev/null
"$ROOT/.venv/bin/python" "$BENCH/marin_baseline.py" --adapter "$ROOT/benchmarks/ray_adapter.py" \
  --sizes 1000 --chain-depths 200 --reps 1 --import-reps 1 --timeout 600 \
  --workdir "$WORK/ray" --out "$ROOT/benchmarks/results/executor-ray.json" >/dev/null
rm -rf "$WORK"
