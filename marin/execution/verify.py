"""`marin verify A B`: are two runs of an experiment the same, byte for byte, step by step?

Each step of A's record is matched by name with B's, and their manifests (sha256 and size of every
output file) are compared: identical, differs (which files, their sizes; and whether the step's
version itself changed), or missing (no SUCCESS manifest on one side, or not in one record: B's steps
that match none of A's are listed after A's as missing from A). The first step that differs in
topological order is named, since everything downstream of it usually differs because of it; missing
steps are listed on their own line and never stand in for that first difference (a step not run in one
prefix says nothing about bytes). Exit 0 only when every step compared is identical, 1 when any step
differs or is missing, 2 when the arguments or records cannot be used.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field

from marin.execution.inspect_prefix import load_record, record_paths
from marin.execution.status import SUCCESS, manifest_path, read_statuses
from marin.storage import join, read_bytes_many


@dataclass
class StepComparison:
    name: str
    verdict: str
    """identical | differs | missing"""
    details: list[str] = field(default_factory=list)


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


def _manifests(prefix: str, steps: list[dict]) -> list[dict | None]:
    outs = [join(prefix, s["relative_output_path"]) for s in steps]
    states = read_statuses(outs)
    datas = read_bytes_many([manifest_path(o) for o in outs])
    result = []
    for state, data in zip(states, datas, strict=True):
        try:
            result.append(json.loads(data) if state == SUCCESS and data else None)
        except ValueError:
            result.append(None)
    return result


def match_steps(a_steps: list[dict], b_steps: list[dict]) -> list[dict | None]:
    """B's counterpart of each of A's steps: the same name, else, when a folder has exactly one step of
    A and one of B without a same-name partner, that one. Experiments put settings in step names
    (tiny_lm's tokenizer is `tokenizers/shakespeare-bpe{vocab_size}`), so two runs that differ in such a
    setting have the "same" step under two names; pairing them shows its bytes and its descendants' as
    `differs`, labelled `matched by folder: A-name ~ B-name`, instead of two unrelated missing steps.
    With more than one candidate on either side nothing is guessed: they are missing."""
    by_name = {s["name"]: s for s in b_steps}
    matched = [by_name.get(s["name"]) for s in a_steps]
    a_names = {s["name"] for s in a_steps}

    def folder(step: dict) -> str:
        return step["name"].rpartition("/")[0]

    lonely_a: dict[str, list[int]] = {}
    for i, sa in enumerate(a_steps):
        if matched[i] is None:
            lonely_a.setdefault(folder(sa), []).append(i)
    lonely_b: dict[str, list[dict]] = {}
    for sb in b_steps:
        if sb["name"] not in a_names:
            lonely_b.setdefault(folder(sb), []).append(sb)
    for name, ours in lonely_a.items():
        theirs = lonely_b.get(name, [])
        if len(ours) == 1 and len(theirs) == 1:
            matched[ours[0]] = theirs[0]
    return matched


def compare_records(a_path: str, b_path: str, steps_regex: str | None = None) -> list[StepComparison]:
    a, b = load_record(a_path), load_record(b_path)
    pattern = re.compile(steps_regex) if steps_regex else None
    a_steps = [s for s in a["steps"] if not pattern or pattern.search(s["name"])]
    b_steps = match_steps(a_steps, b["steps"])
    a_manifests = _manifests(record_location(a_path), a_steps)
    present = [s for s in b_steps if s is not None]
    b_found = iter(_manifests(record_location(b_path), present))
    b_manifests = [next(b_found) if s is not None else None for s in b_steps]
    out = []
    for sa, sb, ma, mb in zip(a_steps, b_steps, a_manifests, b_manifests, strict=True):
        cmp = StepComparison(sa["name"], "identical")
        if sb is None:
            cmp.verdict, cmp.details = "missing", ["not in B's record"]
        elif ma is None or mb is None:
            cmp.verdict = "missing"
            cmp.details = [f"no SUCCESS manifest in {side}" for side, m in (("A", ma), ("B", mb)) if m is None]
        else:
            volatile = {f["path"] for f in ma["files"] + mb["files"] if f.get("volatile")}
            files_a = {f["path"]: f for f in ma["files"] if f["path"] not in volatile}
            files_b = {f["path"]: f for f in mb["files"] if f["path"] not in volatile}
            for path in sorted(set(files_a) | set(files_b)):
                fa, fb = files_a.get(path), files_b.get(path)
                if fa is None or fb is None:
                    cmp.details.append(f"{path}: only in {'B' if fa is None else 'A'}")
                elif fa["sha256"] != fb["sha256"]:
                    cmp.details.append(f"{path}: {fa['size']} vs {fb['size']} bytes, sha256 differs")
            if cmp.details:
                cmp.verdict = "differs"
            elif volatile:
                cmp.details.append(f"{len(volatile)} volatile file(s) not compared")
        if sb is not None and sb["hash"] != sa["hash"]:
            cmp.details.insert(0, f"version differs: hash {sa['hash']} vs {sb['hash']}")
            if cmp.verdict == "identical":
                cmp.verdict = "differs"
        if sb is not None and sb["name"] != sa["name"]:
            cmp.details.insert(0, f"matched by folder: {sa['name']} ~ {sb['name']}")
        out.append(cmp)
    matched = {id(sb) for sb in b_steps if sb is not None}
    for sb in b["steps"]:
        if id(sb) not in matched and (not pattern or pattern.search(sb["name"])):
            out.append(StepComparison(sb["name"], "missing", ["not in A's record"]))
    return out


def verify_main(a: str, b: str, steps_regex: str | None = None, file=None) -> int:
    file = file or sys.stdout
    try:
        a_path, b_path = resolve_pair(a, b)
        comparisons = compare_records(a_path, b_path, steps_regex)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"A: {a_path}\nB: {b_path}", file=file)
    for c in comparisons:
        detail = ("  " + "; ".join(c.details[:6]) + (" ..." if len(c.details) > 6 else "")) if c.details else ""
        print(f"  {c.verdict:<10} {c.name}{detail}", file=file)
    differs = [c for c in comparisons if c.verdict == "differs"]
    missing = [c for c in comparisons if c.verdict == "missing"]
    counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in ("identical", "differs", "missing")}
    print(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" of {len(comparisons)} steps", file=file)
    if differs:
        print(f"first difference in topological order: {differs[0].name}", file=file)
    if missing:
        listed = ", ".join(f"{c.name} ({'; '.join(c.details)})" for c in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        print(f"{'' if differs else 'no step differs; '}missing: {listed}{more}", file=file)
    if differs or missing:
        return 1
    print("all steps identical", file=file)
    return 0
