"""Summarises benchmarks/executor_compare.sh and executor_vs_marin.sh: per figure, the median over every rep of
every round, per label.

    .venv/bin/python benchmarks/compare_summary.py benchmarks/results/compare [--speedup]

Prints a markdown table with each label's median and its ratio to the first label (`marin`, else `before`);
with `--speedup`, how many times faster each label is than the first (first / label).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

LABELS = ("marin", "before", "staging", "fsync", "ours")


def figures(result: dict) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"cold import marin.execution": result["import"]["import_s_each"]}
    for case in result["cases"]:
        name = f"{case['shape']} {case['n']}"
        out[f"plan/hash, {name}"] = case["plan_hash_each_s"]
        out[f"dry run, {name}"] = [case["dry_run_s"]]
        out[f"first run, {name}"] = case["first_run_each_s"]
        out[f"no-op rerun, {name}"] = case["noop_rerun_each_s"]
        out[f"cpu s of a first run, {name}"] = case["cpu_s_run"]
    return out


def main(folder: str, speedup: bool = False) -> None:
    samples: dict[str, dict[str, list[float]]] = {}
    for path in sorted(Path(folder).glob("*.json")):
        label = path.stem.rsplit("-", 1)[0]
        for figure, values in figures(json.loads(path.read_text())).items():
            samples.setdefault(figure, {}).setdefault(label, []).extend(values)
    labels = [label for label in LABELS if any(label in by for by in samples.values())]
    print("| figure (median of all reps, s) | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for figure, by in samples.items():
        base = statistics.median(by[labels[0]]) if by.get(labels[0]) else None
        cells = []
        for label in labels:
            if not by.get(label):
                cells.append("-")
                continue
            value = statistics.median(by[label])
            if base and label != labels[0]:
                if speedup and value:
                    times = f"{base / value:.1f}x faster" if value <= base else f"{value / base:.1f}x slower"
                else:
                    times = f"x{value / base:.2f}"
                ratio = f" ({times}, n={len(by[label])})"
            else:
                ratio = f" (n={len(by[label])})"
            cells.append(f"{value:.3f}{ratio}")
        print(f"| {figure} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1], "--speedup" in sys.argv[2:])
