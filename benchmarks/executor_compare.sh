#!/usr/bin/env bash
# The executor benchmark (benchmarks/executor_bench.sh's local part) for two code trees side by side:
#   benchmarks/executor_compare.sh BEFORE_TREE [ROUNDS]
# Rounds alternate: BEFORE, this tree with MARIN_FSYNC=0, this tree (fsync on, the default), so load
# on a shared machine falls on all three alike. BEFORE_TREE is a checkout of the older commit (e.g.
# `git worktree add /tmp/before <commit>`); it runs with this tree's .venv and its own code first on
# PYTHONPATH. JSON per run: benchmarks/results/compare/<label>-<round>.json; summary to stdout.
# MODES picks the configurations (default "before staging fsync"; "before fsync" compares the two trees
# as shipped); BEFORE_FSYNC=1 runs BEFORE with fsync on (for a BEFORE tree that has it); SIZES the layered
# DAG sizes (default 1000,10000; SIZES=1000 for a short comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BEFORE=$(cd "$1" && pwd)
ROUNDS=${2:-3}
BENCH=${BENCH:-$ROOT/benchmarks/executor_harness}
WORK=$(mktemp -d)
OUT=${OUT:-$ROOT/benchmarks/results/compare}
mkdir -p "$OUT"
export RAY_AUTH_MODE=disabled
run() {  # label tree fsync round
  (cd "$WORK" && PYTHONPATH=$2 MARIN_FSYNC=$3 "$ROOT/.venv/bin/python" "$BENCH/marin_baseline.py" \
    --adapter "$BENCH/ours_adapter.py" --sizes "${SIZES:-1000,10000}" --chain-depths 200 --reps "${REPS:-3}" \
    --import-reps 5 --workdir "$WORK/$1" --out "$OUT/$1-$4.json" >/dev/null 2>"$OUT/$1-$4.log")
}
for round in $(seq 1 "$ROUNDS"); do
  for mode in ${MODES:-before staging fsync}; do
    case $mode in
      before) run before "$BEFORE" "${BEFORE_FSYNC:-0}" "$round" ;;
      staging) run staging "$ROOT" 0 "$round" ;;
      fsync) run fsync "$ROOT" 1 "$round" ;;
    esac
  done
done
rm -rf "$WORK"
"$ROOT/.venv/bin/python" "$ROOT/benchmarks/compare_summary.py" "$OUT"
