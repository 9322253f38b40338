"""Reading the executor's records (docs/records.md) the way a browser must: tolerantly.

A record can be half-written, from an older format, or plain garbage; the browser shows
what it can and says what is wrong (`RecordError` carries a one-line message naming the
file), never a stack trace. Step folders are found through the record's
`relative_output_path` (records carry absolute paths from the run that wrote them, and the
root being browsed may be a copy elsewhere). Parsed records are cached by (path, size,
modification stamp) because records are written once; statuses, leases and run logs are
read fresh on every request because they change while an experiment runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency, this is only a fallback
    _loads = json.loads

from marin.browser.storage import Root, list_dir, read_many, read_tail
from marin.storage.layout import LEASE_FILE, State, lease_path, lease_timeout_s, runs_file, status_path

NOT_STARTED = "NOT_STARTED"
"""The browser's name for a step with no status file (not a stored state)."""
STATES = (State.SUCCESS, State.RUNNING, State.FAILED, State.DEP_FAILED, NOT_STARTED)


class RecordError(Exception):
    """A record or step file that cannot be understood; the message is one line for the page."""


def loads(data: bytes | str, what: str) -> Any:
    try:
        return _loads(data)
    except Exception as e:  # noqa: BLE001 - any decoder error is the file's fault
        raise RecordError(f"{what}: not valid JSON ({str(e).splitlines()[0][:160]})") from None


@dataclass
class StepRef:
    """One step as an experiment record lists it."""

    name: str
    hash: str
    rel: str
    record: dict
    deps: list[str] = field(default_factory=list)
    pseudo_deps: list[str] = field(default_factory=list)
    state: str = "NOT_STARTED"


@dataclass
class Experiment:
    root_index: int
    rel: str
    record: dict | None = None
    error: str | None = None
    steps: list[StepRef] = field(default_factory=list)

    @property
    def name(self) -> str:
        if self.record and isinstance(self.record.get("name"), str):
            return self.record["name"]
        return self.rel.rsplit("/", 1)[-1].removesuffix(".json")


def stamp(info: dict) -> tuple:
    for key in ("mtime", "generation", "ETag", "etag", "updated", "LastModified"):
        if info.get(key) is not None:
            return (info.get("size"), str(info[key]))
    return (info.get("size"), None)


_record_cache: dict[tuple, tuple[tuple, dict | None, str | None]] = {}


def relative_step_path(step: dict, prefix: str | None) -> str:
    rel = step.get("relative_output_path")
    if isinstance(rel, str) and rel:
        return rel.strip("/")
    out = step.get("output_path")
    if isinstance(out, str) and prefix and out.startswith(prefix.rstrip("/") + "/"):
        return out[len(prefix.rstrip("/")) + 1 :]
    name, h = step.get("name"), step.get("hash")
    if isinstance(name, str) and isinstance(h, str):
        return f"{name}-{h}"
    raise RecordError("step without relative_output_path, output_path or name+hash")


def parse_record(data: bytes, what: str) -> tuple[dict, list[StepRef]]:
    record = loads(data, what)
    if not isinstance(record, dict):
        raise RecordError(f"{what}: expected a JSON object, got {type(record).__name__}")
    steps_raw = record.get("steps")
    if not isinstance(steps_raw, list):
        raise RecordError(f"{what}: field 'steps' is missing or not a list")
    prefix = record.get("prefix") if isinstance(record.get("prefix"), str) else None
    by_output: dict[str, str] = {}
    steps: list[StepRef] = []
    for i, s in enumerate(steps_raw):
        if not isinstance(s, dict):
            raise RecordError(f"{what}: steps[{i}] is not an object")
        try:
            rel = relative_step_path(s, prefix)
        except RecordError as e:
            raise RecordError(f"{what}: steps[{i}]: {e}") from None
        ref = StepRef(name=str(s.get("name", rel)), hash=str(s.get("hash", "")), rel=rel, record=s)
        steps.append(ref)
        if isinstance(s.get("output_path"), str):
            by_output[s["output_path"].rstrip("/")] = rel
        by_output[rel] = rel

    def dep_rel(dep: Any) -> str | None:
        if not isinstance(dep, str):
            return None
        dep = dep.rstrip("/")
        if dep in by_output:
            return by_output[dep]
        if prefix and dep.startswith(prefix.rstrip("/") + "/"):
            return dep[len(prefix.rstrip("/")) + 1 :]
        return None

    for ref in steps:
        for key, target in (("dependencies", ref.deps), ("pseudo_dependencies", ref.pseudo_deps)):
            deps = ref.record.get(key) or []
            if isinstance(deps, list):
                target.extend(d for d in (dep_rel(x) for x in deps) if d)
    return record, steps


def list_experiments(roots) -> tuple[list[Experiment], list[str]]:
    """Every experiment record under every root, with each step's state; plus root-level errors."""
    experiments: list[Experiment] = []
    errors: list[str] = []
    for index, root in enumerate(roots):
        folder = root.join("experiments")
        try:
            entries = list_dir(root.fs, folder)
        except FileNotFoundError:
            errors.append(f"{root.url}: no experiments/ folder (not an executor prefix?)")
            continue
        except Exception as e:  # noqa: BLE001 - a root that cannot be listed is shown, not fatal
            errors.append(f"{root.url}: cannot list experiments/ ({type(e).__name__}: {e})")
            continue
        files = [e for e in entries if e.get("type") == "file" and e["name"].endswith(".json")]
        files.sort(key=lambda e: e["name"])
        todo = []
        found: list[Experiment] = []
        for e in files:
            full = root.fs._strip_protocol(e["name"])
            rel = "experiments/" + full.rsplit("/", 1)[-1]
            key = (root.url, rel)
            cached = _record_cache.get(key)
            exp = Experiment(root_index=index, rel=rel)
            found.append(exp)
            if cached and cached[0] == stamp(e):
                exp.record, exp.error = cached[1], cached[2]
                exp.steps = [StepRef(s.name, s.hash, s.rel, s.record, s.deps, s.pseudo_deps) for s in cached[3]]
            else:
                todo.append((exp, full, key, stamp(e)))
        blobs = read_many(root.fs, [t[1] for t in todo])
        for exp, full, key, st in todo:
            data = blobs.get(full)
            steps: list[StepRef] = []
            if isinstance(data, Exception) or data is None:
                exp.error = f"{exp.rel}: cannot read ({type(data).__name__})"
            else:
                try:
                    exp.record, steps = parse_record(data, exp.rel)
                except RecordError as err:
                    exp.error = str(err)
            exp.steps = steps
            _record_cache[key] = (st, exp.record, exp.error, steps)
        read_states(root, [s for exp in found for s in exp.steps])
        experiments.extend(found)
    return experiments, errors


def read_states(root: Root, steps: list[StepRef]) -> None:
    """Fill `state` of each step from its `.executor_status` (no folder or no status: NOT_STARTED)."""
    paths = {s.rel: status_path(root.join(s.rel)) for s in steps}
    blobs = read_many(root.fs, list(dict.fromkeys(paths.values())))
    for s in steps:
        data = blobs.get(paths[s.rel])
        if isinstance(data, bytes | bytearray):
            token = data.decode("utf-8", "replace").strip()
            s.state = token if token in STATES else f"UNKNOWN({token[:20]})"
        else:
            s.state = NOT_STARTED


def load_experiment(roots, index: int, rel: str) -> Experiment:
    root, rel, full = roots.resolve(index, rel)
    exp = Experiment(root_index=index, rel=rel)
    try:
        data = root.fs.cat_file(full)
    except FileNotFoundError:
        raise
    try:
        exp.record, exp.steps = parse_record(data, rel)
    except RecordError as e:
        exp.error = str(e)
        return exp
    read_states(root, exp.steps)
    return exp


def read_runs(root: Root, record_full: str, limit: int = 4 << 20) -> tuple[list[dict], str | None]:
    """Lines of `<record>.runs.jsonl` (oldest first; at most the last `limit` bytes), and an error."""
    path = runs_file(record_full)
    try:
        size = root.fs.info(path)["size"]
    except FileNotFoundError:
        return [], None
    data, start = read_tail(root.fs, path, size, limit)
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]
    runs, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            run = _loads(line)
            if isinstance(run, dict):
                runs.append(run)
            else:
                bad += 1
        except Exception:  # noqa: BLE001
            bad += 1
    name = path.rsplit("/", 1)[-1]
    return runs, (f"{name}: {bad} line(s) are not valid JSON and were skipped" if bad else None)


def read_related_runs(root: Root, record_full: str) -> tuple[list[dict], str | None]:
    """Runs of this record, after those of the other records of the same experiment name.

    A step that an earlier version of the experiment already ran is SKIPPED (no duration) in
    this record's runs; its duration is in the record that ran it.
    """
    folder, file = record_full.rsplit("/", 1)
    stem = file.removesuffix(".json")
    name = stem.rsplit("-", 1)[0]
    own, error = read_runs(root, record_full)
    others: list[dict] = []
    try:
        entries = list_dir(root.fs, folder)
    except FileNotFoundError:
        return own, error
    for e in sorted(entries, key=lambda e: e["name"]):
        other = root.fs._strip_protocol(e["name"]).rsplit("/", 1)[-1]
        if other.endswith(".runs.jsonl") and other.startswith(name + "-") and other != stem + ".runs.jsonl":
            if other.removesuffix(".runs.jsonl").rsplit("-", 1)[0] == name:
                runs, _ = read_runs(root, f"{folder}/{other.removesuffix('.runs.jsonl')}.json")
                others.extend(runs)
    return others + own, error


def step_timings(runs: list[dict]) -> dict[str, dict]:
    """Per step (relative path), the newest run entry that has a duration (else the newest entry)."""
    out: dict[str, dict] = {}
    for run in reversed(runs):
        steps = run.get("steps")
        if not isinstance(steps, dict):
            continue
        for rel, entry in steps.items():
            if not isinstance(entry, dict):
                continue
            have = out.get(rel)
            if have is None or (have.get("duration_s") is None and entry.get("duration_s") is not None):
                out[rel] = entry
    return out


def read_lease(root: Root, step_full: str) -> dict | None:
    try:
        data = root.fs.cat_file(lease_path(step_full))
    except FileNotFoundError:
        return None
    lease = loads(data, LEASE_FILE)
    if not isinstance(lease, dict):
        raise RecordError(f"{LEASE_FILE}: expected a JSON object")
    hb = lease.get("heartbeat")
    if isinstance(hb, int | float):
        lease["_age_s"] = max(0.0, time.time() - hb)
        lease["_stale"] = lease["_age_s"] > lease_timeout_s()
    return lease
