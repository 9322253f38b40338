"""What a run leaves beside its outputs: the experiment record, each step's record, the run log.

The experiment record (`<prefix>/experiments/<script>-<hash8>.json`) is what `marin rerun` rebuilds
an experiment from and what the browser draws: every step's function and config type by import
path, its instantiated config, version and output path, and the environment (git commit, python,
packages, lock file) that produced it. Its name hashes the identities of the DAG's steps, so the same
experiment has the same record in every prefix. It is written once; every run appends a line to the
`.runs.jsonl` beside it. The formats are described field by field in docs/records.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import getpass
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import PurePath
from typing import Any

from marin.execution.canonical import canonical_json
from marin.execution.planning import Plan, PlannedStep, instantiate_config
from marin.execution.references import code_fingerprint, project_root, reference_of

RECORD_FORMAT = "marin.experiment/1"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def config_to_json(value: Any, path: str = "", types: dict[str, str] | None = None) -> Any:
    """A JSON form of an instantiated config; nested dataclass types are noted in `types` by path."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, enum.Enum):
        return config_to_json(value.value, path, types)
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if types is not None and path:
            types[path] = reference_of(type(value))
        return {
            f.name: config_to_json(getattr(value, f.name), f"{path}.{f.name}" if path else f.name, types)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, list | tuple):
        return [config_to_json(v, f"{path}[{i}]", types) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): config_to_json(v, f"{path}.{k}", types) for k, v in value.items()}
    return {"__unserializable__": f"{type(value).__module__}.{type(value).__qualname__}", "repr": repr(value)[:200]}


def resources_to_json(planned: PlannedStep) -> dict:
    from marin.execution.authoring import ResourceConfig

    res = planned.step.resources or ResourceConfig()
    return dataclasses.asdict(res)


def step_record(planned: PlannedStep, plan: Plan) -> dict:
    """The record of one step: also the content of its `.executor_info`."""
    cached = plan.step_records.get(id(planned))
    if cached is not None:
        return cached
    config = instantiate_config(planned, plan)
    types: dict[str, str] = {}
    config_json = config_to_json(config, "", types)
    record = plan.step_records[id(planned)] = {
        "name": planned.name,
        "hash": planned.hash,
        "output_path": planned.output_path,
        "relative_output_path": planned.relative_output_path,
        "fn": reference_of(planned.step.fn),
        "config_type": reference_of(type(config)) if config is not None else None,
        "config_types": types,
        "config": config_json,
        "version": planned.version,
        "dependencies": [d.output_path for d in planned.dependencies],
        "pseudo_dependencies": [d.output_path for d in planned.pseudo_dependencies],
        "description": planned.step.description,
        "resources": resources_to_json(planned),
        "code_fingerprint": code_fingerprint(planned.step.fn),
        "prefix": plan.prefix,
    }
    return record


def experiment_hash(plan: Plan) -> str:
    identities = sorted(p.identity for p in plan.steps)
    return hashlib.sha256(canonical_json(identities).encode()).hexdigest()[:8]


def git_state() -> dict:
    """The commit and dirty flag of the project checkout, or nulls outside git.

    Read once per process and checkout (two git subprocesses, ~20 ms, would otherwise cost every
    run, even one with nothing to do): the code a process runs is what it imported, so the state
    at its first record stands for all of its runs.
    """
    root = project_root()
    if root not in _GIT_STATES:
        state = _read_git_state(root)
        if state is None:
            return {"commit": None, "dirty": None}
        _GIT_STATES[root] = state
    return dict(_GIT_STATES[root])


_GIT_STATES: dict[str, dict] = {}


def _read_git_state(root: str) -> dict | None:
    """None when git could not be asked (missing, timed out): not remembered, unlike "not a checkout"."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty_out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if not commit or dirty_out.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty_out.stdout.strip())}


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return sorted(line.split(":", 1)[1].split())
    except OSError:
        pass
    return []


def _accelerator() -> str | None:
    if os.path.exists("/dev/nvidia0"):
        return "nvidia-gpu"
    if os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio"):
        return "tpu"
    return None


def installed_packages() -> dict[str, str]:
    """Name -> version of every installed distribution, read from the dist-info folder names (fast)."""
    import re
    import site
    import sysconfig

    folders = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    packages: dict[str, str] = {}
    pattern = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+)\.dist-info$")
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for entry in names:
            m = pattern.match(entry)
            if m:
                packages[re.sub(r"[-_.]+", "-", m["name"]).lower()] = m["version"]
    return packages


def environment() -> dict:
    """What a bit-for-bit rerun needs to know about the machine and the software."""
    packages = installed_packages()
    lock = os.path.join(project_root(), "uv.lock")
    lock_sha = None
    if os.path.exists(lock):
        with open(lock, "rb") as f:
            lock_sha = hashlib.sha256(f.read()).hexdigest()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_flags": _cpu_flags(),
        "accelerator": _accelerator(),
        "lock_sha256": lock_sha,
        "packages": dict(sorted(packages.items())),
    }


def who() -> dict:
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    return {"user": user, "host": socket.gethostname(), "pid": os.getpid(), "command": list(sys.argv)}


def experiment_record(plan: Plan, name: str, script: str | None, description: str | None) -> dict:
    identity = who()
    return {
        "format": RECORD_FORMAT,
        "name": name,
        "hash": experiment_hash(plan),
        "script": script,
        "description": description,
        "prefix": plan.prefix,
        "created": utc_now(),
        "user": identity["user"],
        "host": identity["host"],
        "command": identity["command"],
        "git": git_state(),
        "environment": environment(),
        "steps": [step_record(p, plan) for p in plan.steps],
    }


def dump_json(record: dict) -> bytes:
    """Indented, key-sorted JSON for records people read (orjson: fast for 10,000-step records)."""
    import orjson

    try:
        return orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
