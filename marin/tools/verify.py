"""`marin verify A B`: are two runs of an experiment the same, byte for byte, step by step?

Each step of A's record is matched by name with B's, and their manifests (sha256 and size of every
output file) are compared: identical, differs (which files, their sizes; and whether the step's
version itself changed), or missing (no SUCCESS manifest on one side, or not in one record: B's steps
that match none of A's are listed after A's as missing from A). The first step that differs in
topological order is named, since everything downstream of it usually differs because of it; missing
steps are listed on their own line and never stand in for that first difference (a step not run in one
prefix says nothing about bytes). Exit 0 only when every step compared is identical, 1 when any step
differs or is missing, 2 when the arguments or records cannot be used.

Verify proves bytes, not bookkeeping: by default it also hashes every file of every compared step again
(volatile files aside) and compares it with that step's own manifest, so a file overwritten (or added,
or deleted) after its step succeeded is named, on the side where it happened. `--manifests_only` skips the rehash (it reads
every output byte on both sides) and trusts the manifests.

Volatile files (a step's `volatile_files.txt`) are not compared byte for byte, but what is deterministic
in them is: `metrics.jsonl` lines are compared field by field without the timing fields (names ending
in `_s` or `_per_second`), so two trainings must have the same losses, and the first training step
where they differ is named.

Values are compared, not files (marin.tools.verify_values): the files of a zarr array (a Levanter
checkpoint's, whose chunk files follow the devices it was written from), `.safetensors`, `.json` and
`.parquet` files that differ are read on both sides, and the step is identical when their values are,
`close` when they agree within `rtol`/`atol` (each such value's largest difference is listed), else it
differs. `metrics.jsonl` numbers are held to the same tolerance. A run trained on another device layout
is `close` to the original (docs/training.md). Exit 3 when no step differs or is missing but some are
only close.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field

from marin.execution.status import read_statuses
from marin.storage import compute_manifest, join, read_bytes, read_bytes_many
from marin.storage.layout import ExperimentRecord, RecordFormatError, State, StepRecord, manifest_path
from marin.tools.inspect_prefix import load_record, record_paths
from marin.tools.verify_values import DEFAULT_ATOL, DEFAULT_RTOL, compare_values


@dataclass
class StepComparison:
    name: str
    verdict: str
    """identical | close | differs | missing"""
    details: list[str] = field(default_factory=list)
    close: dict[str, float] = field(default_factory=dict)
    """The values (tensors, metrics, JSON numbers) within tolerance but not identical, with their largest
    difference."""
    not_compared: dict[str, str] = field(default_factory=dict)
    """The volatile files left out of the comparison, each with what their bytes did (`same bytes`,
    `bytes differ`, `only in A`, `only in B`); `--show_volatile` lists them."""


def record_location(path: str) -> str:
    """The prefix a record lives under: `<prefix>/experiments/<name>.json` -> `<prefix>`."""
    return path.rstrip("/").rsplit("/", 2)[0]


def resolve_pair(a: str, b: str) -> tuple[str, str]:
    """Two record paths from two records, or a record and a prefix, or two prefixes with one record in common."""
    a_is, b_is = a.endswith(".json"), b.endswith(".json")
    if a_is and b_is:
        return a, b
    if a_is:
        return a, join(b, "experiments", a.rsplit("/", 1)[-1])
    if b_is:
        return join(a, "experiments", b.rsplit("/", 1)[-1]), b
    names_a = {p.rsplit("/", 1)[-1] for p in record_paths(a)}
    names_b = {p.rsplit("/", 1)[-1] for p in record_paths(b)}
    common = sorted(names_a & names_b)
    if len(common) != 1:
        raise ValueError(f"{a} and {b} share {len(common)} records ({common}); name the record files instead")
    return join(a, "experiments", common[0]), join(b, "experiments", common[0])


def _manifests(prefix: str, steps: list[StepRecord]) -> tuple[list[str], list[dict | None]]:
    outs = [join(prefix, s.relative_output_path or s.identity) for s in steps]
    states = read_statuses(outs)
    datas = read_bytes_many([manifest_path(o) for o in outs])
    result = []
    for state, data in zip(states, datas, strict=True):
        try:
            result.append(json.loads(data) if state == State.SUCCESS and data else None)
        except ValueError:
            result.append(None)
    return outs, result


def rehash_mismatches(output: str, manifest: dict) -> list[str]:
    """The files under `output` whose bytes no longer match its own manifest (changed, deleted, added).

    Volatile files are checked too: volatile means their bytes may differ between two identical runs, not
    that they may change once published (a step has finished writing when its function returns)."""
    recorded = {f["path"]: f for f in manifest.get("files", [])}
    # an output reused by reference (marin.execution.reuse) keeps its files in the source folder it names
    now = {f["path"]: f for f in compute_manifest(manifest.get("reference") or output)["files"]}
    problems = []
    for path in sorted(set(recorded) | set(now)):
        before, after = recorded.get(path), now.get(path)
        if after is None:
            problems.append(f"{path}: in its manifest but deleted since")
        elif before is None:
            problems.append(f"{path}: added after its manifest was written")
        elif before["sha256"] != after["sha256"] or before["size"] != after["size"]:
            problems.append(
                f"{path}: bytes no longer match its own manifest ({before['size']} -> {after['size']} bytes, "
                f"sha256 {before['sha256'][:12]} -> {after['sha256'][:12]})"
            )
    return problems


def _is_timing(field_name: str) -> bool:
    return field_name.endswith(("_s", "_per_second"))


def metrics_difference(
    a: bytes | None, b: bytes | None, rtol: float = 0.0, atol: float = 0.0, close: dict | None = None
) -> str | None:
    """Where two `metrics.jsonl` files differ once timings are set aside: the first training step whose
    deterministic fields (loss, lr, tokens, eval losses) differ beyond `rtol`/`atol`, or a step only one
    of them has. Numbers within tolerance but not equal go into `close` (field: largest difference)."""
    if a is None or b is None:
        return "unreadable on " + ("A" if a is None else "B")
    try:
        lines_a = [json.loads(line) for line in a.decode().splitlines() if line.strip()]
        lines_b = [json.loads(line) for line in b.decode().splitlines() if line.strip()]
    except ValueError as exc:
        return f"not JSON lines: {exc}"
    for la, lb in zip(lines_a, lines_b, strict=False):
        keep_a = {k: v for k, v in la.items() if not _is_timing(k)}
        keep_b = {k: v for k, v in lb.items() if not _is_timing(k)}
        fields = sorted(
            k for k in set(keep_a) | set(keep_b) if not _same_number(keep_a.get(k), keep_b.get(k), rtol, atol, close, k)
        )
        if fields:
            step = la.get("step", "?")
            shown = ", ".join(f"{k} {keep_a.get(k)} vs {keep_b.get(k)}" for k in fields[:3])
            return f"first differs at training step {step}: {shown}"
    if len(lines_a) != len(lines_b):
        longer, side = (lines_a, "A") if len(lines_a) > len(lines_b) else (lines_b, "B")
        return f"only {side} has training step {longer[min(len(lines_a), len(lines_b))].get('step', '?')} on"
    return None


def _same_number(x, y, rtol: float, atol: float, close: dict | None, name: str) -> bool:
    if x == y:
        return True
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y))
    if not numbers or not math.isclose(x, y, rel_tol=rtol, abs_tol=atol):
        return False
    if close is not None:
        close[name] = max(close.get(name, 0.0), abs(x - y))
    return True


def match_steps(a_steps: list[StepRecord], b_steps: list[StepRecord]) -> list[StepRecord | None]:
    """B's counterpart of each of A's steps: the same name, else, when a folder has exactly one step of
    A and one of B without a same-name partner, that one. Experiments put settings in step names
    (tiny_lm's tokenizer is `tokenizers/shakespeare-bpe{vocab_size}`), so two runs that differ in such a
    setting have the "same" step under two names; pairing them shows its bytes and its descendants' as
    `differs`, labelled `matched by folder: A-name ~ B-name`, instead of two unrelated missing steps.
    With more than one candidate on either side nothing is guessed: they are missing."""
    by_name = {s.name: s for s in b_steps}
    matched = [by_name.get(s.name) for s in a_steps]
    a_names = {s.name for s in a_steps}

    def folder(step: StepRecord) -> str:
        return step.name.rpartition("/")[0]

    lonely_a: dict[str, list[int]] = {}
    for i, sa in enumerate(a_steps):
        if matched[i] is None:
            lonely_a.setdefault(folder(sa), []).append(i)
    lonely_b: dict[str, list[StepRecord]] = {}
    for sb in b_steps:
        if sb.name not in a_names:
            lonely_b.setdefault(folder(sb), []).append(sb)
    for name, ours in lonely_a.items():
        theirs = lonely_b.get(name, [])
        if len(ours) == 1 and len(theirs) == 1:
            matched[ours[0]] = theirs[0]
    return matched


def different_experiments(a_path: str, b_path: str) -> str | None:
    """Why A and B are records of two different experiments (different scripts), or None when they are one.

    Two different experiments with no step in common are an error (ValueError): verify compares two runs of
    one experiment, and would otherwise call every step of both "missing". Sharing steps (one script grew
    out of the other), they are compared, and the note says what they are."""
    records = [ExperimentRecord.from_json(load_record(p), p, strict=False) for p in (a_path, b_path)]
    names = [r.name for r in records]
    if names[0] == names[1] or None in names:
        return None
    steps = [{s.get("name") for s in r.steps if isinstance(s, dict)} for r in records]
    what = f"A is a record of experiment {names[0]!r}, B of experiment {names[1]!r}"
    if not steps[0] & steps[1]:
        raise ValueError(
            f"{what}: two different experiments with no step in common; verify compares two runs of one "
            "experiment (name a record of the same experiment in each)"
        )
    return f"{what} (two different experiments; their steps of the same name are compared)"


def _typed_steps(record_path: str) -> list[StepRecord]:
    try:
        return ExperimentRecord.from_json(load_record(record_path), record_path).step_records(record_path)
    except RecordFormatError as exc:
        raise ValueError(str(exc)) from None


def compare_records(
    a_path: str,
    b_path: str,
    steps_regex: str | None = None,
    rehash: bool = True,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> list[StepComparison]:
    """Each of A's steps (and B's steps A lacks) compared; with `rehash`, each side's files against its
    manifest; values within `rtol`/`atol` (and none beyond) make a step `close`."""
    a_all, b_all = _typed_steps(a_path), _typed_steps(b_path)
    pattern = re.compile(steps_regex) if steps_regex else None
    a_steps = [s for s in a_all if not pattern or pattern.search(s.name)]
    b_steps = match_steps(a_steps, b_all)
    a_outs, a_manifests = _manifests(record_location(a_path), a_steps)
    present = [s for s in b_steps if s is not None]
    b_found_outs, b_found = _manifests(record_location(b_path), present)
    found = iter(zip(b_found_outs, b_found, strict=True))
    b_pairs = [next(found) if s is not None else (None, None) for s in b_steps]
    b_outs = [o for o, _ in b_pairs]
    b_manifests = [m for _, m in b_pairs]
    out = []
    for sa, sb, ma, mb, oa, ob in zip(a_steps, b_steps, a_manifests, b_manifests, a_outs, b_outs, strict=True):
        cmp = StepComparison(sa.name, "identical")
        if sb is None:
            cmp.verdict, cmp.details = "missing", ["not in B's record"]
        elif ma is None or mb is None:
            cmp.verdict = "missing"
            cmp.details = [f"no SUCCESS manifest in {side}" for side, m in (("A", ma), ("B", mb)) if m is None]
        else:
            _compare_outputs(cmp, oa, ob, ma, mb, rehash, rtol, atol)
        if sb is not None and sb.hash != sa.hash:
            cmp.details.insert(0, f"version differs: hash {sa.hash} vs {sb.hash}")
            if cmp.verdict in ("identical", "close"):
                cmp.verdict = "differs"
        if sb is not None and sb.name != sa.name:
            cmp.details.insert(0, f"matched by folder: {sa.name} ~ {sb.name}")
        out.append(cmp)
    matched = {id(sb) for sb in b_steps if sb is not None}
    for sb in b_all:
        if id(sb) not in matched and (not pattern or pattern.search(sb.name)):
            out.append(StepComparison(sb.name, "missing", ["not in A's record"]))
    return out


def _compare_outputs(
    cmp: StepComparison, oa: str, ob: str, ma: dict, mb: dict, rehash: bool, rtol: float, atol: float
) -> None:
    """Fills `cmp` with the differences between two successful outputs of one step."""
    volatile = {f["path"] for f in ma["files"] + mb["files"] if f.get("volatile")}
    files_a = {f["path"]: f for f in ma["files"] if f["path"] not in volatile}
    files_b = {f["path"]: f for f in mb["files"] if f["path"] not in volatile}
    differing = {
        p
        for p in set(files_a) | set(files_b)
        if p not in files_a or p not in files_b or files_a[p]["sha256"] != files_b[p]["sha256"]
    }
    values = compare_values(oa, ob, differing, set(files_a), set(files_b), rtol=rtol, atol=atol)
    for path in sorted(differing - values.files):
        fa, fb = files_a.get(path), files_b.get(path)
        if fa is None or fb is None:
            cmp.details.append(f"{path}: only in {'B' if fa is None else 'A'}")
        else:
            cmp.details.append(f"{path}: {fa['size']} vs {fb['size']} bytes, sha256 differs")
    cmp.details += values.differs
    cmp.close.update(values.close)
    metrics = sorted(p for p in volatile if p.rsplit("/", 1)[-1] == "metrics.jsonl")
    metrics = [
        p for p in metrics if any(f["path"] == p for f in ma["files"]) and any(f["path"] == p for f in mb["files"])
    ]
    cmp.not_compared = _not_compared(volatile - set(metrics), ma, mb)
    for path in metrics:
        close: dict[str, float] = {}
        why = metrics_difference(read_bytes(join(oa, path)), read_bytes(join(ob, path)), rtol, atol, close)
        if why:
            cmp.details.append(f"{path} (volatile): {why}")
        cmp.close.update({f"{path}:{name}": diff for name, diff in close.items()})
    if rehash:
        for side, output, manifest in (("A", oa, ma), ("B", ob, mb)):
            cmp.details += [f"{side}: {problem}" for problem in rehash_mismatches(output, manifest)]
    if cmp.details:
        cmp.verdict = "differs"
        return
    if cmp.close:
        cmp.verdict = "close"
        cmp.details.append(f"{len(cmp.close)} value(s) within rtol {rtol:g}, atol {atol:g}, not identical")
    if values.files:
        cmp.details.append(
            f"{len(values.files)} differing file(s) compared by value: {len(values.identical)} identical, "
            f"{len(values.close)} close"
        )
    if volatile:
        skipped = len(volatile) - len(metrics)
        cmp.details.append(
            f"{skipped} volatile file(s) not compared"
            + (f", {len(metrics)} compared without timings" if metrics else "")
        )


def _not_compared(paths: set[str], ma: dict, mb: dict) -> dict[str, str]:
    """What each volatile file left out did between A and B, by its manifests' sizes and digests."""
    files_a = {f["path"]: f for f in ma["files"]}
    files_b = {f["path"]: f for f in mb["files"]}
    found = {}
    for path in sorted(paths):
        fa, fb = files_a.get(path), files_b.get(path)
        if fa is None or fb is None:
            found[path] = f"only in {'B' if fa is None else 'A'}"
        elif fa["sha256"] == fb["sha256"]:
            found[path] = "same bytes"
        else:
            found[path] = f"bytes differ ({fa['size']} vs {fb['size']} bytes)"
    return found


SHOWN_CLOSE = 10
"""Tensors within tolerance listed under a close step, the largest differences first."""


def verify_main(
    a: str,
    b: str,
    steps_regex: str | None = None,
    file=None,
    rehash: bool = True,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    show_volatile: bool = False,
) -> int:
    """Prints the comparison of two runs and returns the exit status (module docstring); `show_volatile`
    lists, under each step, the volatile files that were not compared and what their bytes did."""
    file = file or sys.stdout
    try:
        a_path, b_path = resolve_pair(a, b)
        different = different_experiments(a_path, b_path)
        comparisons = compare_records(a_path, b_path, steps_regex, rehash=rehash, rtol=rtol, atol=atol)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"A: {a_path}\nB: {b_path}", file=file)
    if different:
        print(f"note: {different}", file=file)
    for c in comparisons:
        detail = ("  " + "; ".join(c.details[:6]) + (" ..." if len(c.details) > 6 else "")) if c.details else ""
        print(f"  {c.verdict:<10} {c.name}{detail}", file=file)
        largest = sorted(c.close.items(), key=lambda item: -item[1])
        for name, diff in largest[:SHOWN_CLOSE]:
            print(f"               max |A-B| {diff:.3g}  {name}", file=file)
        if len(largest) > SHOWN_CLOSE:
            print(f"               ... and {len(largest) - SHOWN_CLOSE} more within tolerance", file=file)
        if show_volatile:
            for path, what in c.not_compared.items():
                print(f"               not compared (volatile): {path}  {what}", file=file)
    differs = [c for c in comparisons if c.verdict == "differs"]
    missing = [c for c in comparisons if c.verdict == "missing"]
    close = [c for c in comparisons if c.verdict == "close"]
    counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in ("identical", "close", "differs", "missing")}
    print(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" of {len(comparisons)} steps", file=file)
    if differs:
        print(f"first difference in topological order: {differs[0].name}", file=file)
    if missing:
        listed = ", ".join(f"{c.name} ({'; '.join(c.details)})" for c in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        print(f"{'' if differs else 'no step differs; '}missing: {listed}{more}", file=file)
    hidden = sum(len(c.not_compared) for c in comparisons)
    if hidden and not show_volatile:
        print(f"{hidden} volatile file(s) not compared; --show_volatile names them", file=file)
    if differs or missing:
        return 1
    if close:
        print(
            f"no step differs; {len(close)} within tolerance (rtol {rtol:g}, atol {atol:g}), not identical", file=file
        )
        return 3
    print("all steps identical", file=file)
    return 0
