#!/usr/bin/env bash
# This project's executor beside Marin's (`marin-core==0.2.20.dev202606180959`), side by side in one run:
#   MARIN_VENV="$HOME/marin312" benchmarks/executor_vs_marin.sh [ROUNDS]
# MARIN_VENV is a Python 3.12 venv outside the repository holding Marin's executor
# (`python3.12 -m venv $MARIN_VENV && $MARIN_VENV/bin/pip install marin-core==0.2.20.dev202606180959 GitPython`,
# about 4 minutes, 2 GB; GitPython is an undeclared dependency of levanter). Both run the same harness and DAG
# shapes (benchmarks/executor_harness: layered 1,000 and 10,000 steps, width 100, fan-in 2; a chain of 200),
# every phase in a fresh process, alternating Marin, this tree (fsync on, as shipped) in each round so that
# load on a shared machine falls on both alike; BEFORE=TREE adds an older tree of this project (this .venv,
# its code first on PYTHONPATH). SIZES (default 1000,10000), CHAIN (default 200) and REPS (default 1) narrow
# it. JSON per run: $OUT/<label>-<round>.json (default benchmarks/results/vs-marin); summary to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${1:-2}
BENCH=$ROOT/benchmarks/executor_harness
: "${MARIN_VENV:?set MARIN_VENV to the venv holding marin-core (see the header)}"
WORK=$(mktemp -d)
OUT=${OUT:-$ROOT/benchmarks/results/vs-marin}
mkdir -p "$OUT"
export RAY_AUTH_MODE=disabled
# Marin's installed package carries the bytecode pip wrote; a source tree run where PYTHONDONTWRITEBYTECODE is
# set would compile every module in every fresh process, so each tree measured here is compiled first.
for tree in "$ROOT" ${BEFORE:+"$BEFORE"}; do "$ROOT/.venv/bin/python" -m compileall -q -j 0 "$tree/marin" >/dev/null; done
run() {  # label python pythonpath adapter round
  (cd "$WORK" && env PYTHONPATH="$3" "$2" "$BENCH/marin_baseline.py" --adapter "$BENCH/$4" \
    --sizes "${SIZES:-1000,10000}" --chain-depths "${CHAIN:-200}" --reps "${REPS:-1}" --import-reps 3 \
    --timeout 600 --workdir "$WORK/$1" --out "$OUT/$1-$5.json" >/dev/null 2>"$OUT/$1-$5.log")
}
for round in $(seq 1 "$ROUNDS"); do
  run marin "$MARIN_VENV/bin/python" "" marin_adapter.py "$round"
  run ours "$ROOT/.venv/bin/python" "$ROOT" ours_adapter.py "$round"
  if [ -n "${BEFORE:-}" ]; then run before "$ROOT/.venv/bin/python" "$(cd "$BEFORE" && pwd)" ours_adapter.py "$round"; fi
done
rm -rf "$WORK"
"$ROOT/.venv/bin/python" "$ROOT/benchmarks/compare_summary.py" "$OUT" --speedup
