"""The on-storage contract in one place: file names, step states, the hash pattern, lease timing, records.

docs/design.md and docs/records.md fix what a run leaves on storage. The executor writes it, the CLI
and the browser read it, and `marin rerun` and `marin verify` rebuild runs from it; when each of them
spelled `.executor_status` or `"SUCCESS"` itself, a rename in one silently broke the others. This
module is that contract as code: the names, a `State` enum, the `<name>-<hash8>` pattern, the lease
defaults, and typed views of the three record kinds (`ExperimentRecord`, `StepRecord`, `RunLine`).
It sits at the bottom layer (no imports beyond the standard library), so every layer can use it.

The record dataclasses are *views* over the JSON that is stored: `from_json` takes a parsed record,
keeps every field it does not know in `extra` (a newer writer's fields survive a round trip through an
older reader), and `to_json` gives back the same mapping. The browser reads tolerantly and uses
`from_json(..., strict=False)`; the executor and `marin rerun` use the strict form, which names the
file and the field that is missing or of the wrong type.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import re
from typing import Any, ClassVar

EXECUTOR_FILE_PREFIX = ".executor_"
"""Every executor bookkeeping file or folder in a step's output starts with this; manifests leave them out."""
STATUS_FILE = ".executor_status"
"""One token: a `State`."""
INFO_FILE = ".executor_info"
"""JSON: the step's record (`StepRecord`)."""
LEASE_FILE = ".executor_lease"
"""JSON: the runner holding the step (`LeaseRecord`)."""
MANIFEST_FILE = ".executor_manifest.json"
"""JSON: every output file with its size and sha256."""
LOGS_DIR = ".executor_logs"
"""One `<attempt>.log` per attempt."""
ATTEMPT_PREFIX = ".executor_attempt."
"""An attempt's staging folder inside the step's output folder: this, then `<NNN>-<owner8>`."""
TRASH_DIR = ".executor_trash"
"""Inside a staging folder: where the published folder's old files go when the staged ones replace them."""

RUNS_DIR = ".executor_runs"
"""Under a prefix: one marker per run in progress (its lease and the steps it runs), removed when the run
ends; what a run killed with kill -9 leaves there tells the next run where to clean (docs/executor.md)."""
EXPERIMENTS_DIR = "experiments"
"""Under a prefix: the experiment records and their run logs."""
RECORD_SUFFIX = ".json"
RUNS_SUFFIX = ".runs.jsonl"
RECORD_FORMAT = "marin.experiment/1"

HASH_PATTERN = re.compile(r"^(?P<base>.+)-(?P<hash>[0-9a-f]{8})$")
"""A step folder or record name: `<name>-<hash8>`."""
STEP_FOLDER_IN_PATH = re.compile(r"-[0-9a-f]{8}(/|$)")
"""A `<name>-<hash8>` folder anywhere in a path."""

LEASE_HEARTBEAT_S = 10.0
"""Default seconds between lease refreshes (env `MARIN_LEASE_HEARTBEAT_S`)."""
LEASE_TIMEOUT_S = 60.0
"""Default seconds without a refresh after which a lease is stale (env `MARIN_LEASE_TIMEOUT_S`)."""


def lease_heartbeat_s() -> float:
    return _seconds("MARIN_LEASE_HEARTBEAT_S", LEASE_HEARTBEAT_S)


def lease_timeout_s() -> float:
    return _seconds("MARIN_LEASE_TIMEOUT_S", LEASE_TIMEOUT_S)


def _seconds(variable: str, default: float) -> float:
    """A lease setting from the environment; ValueError naming the variable unless finite and > 0."""
    raw = os.environ.get(variable)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{variable}={raw!r}: must be a finite number of seconds > 0")
    return value


class State(enum.StrEnum):
    """A step's state as its `.executor_status` holds it."""

    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    DEP_FAILED = "DEP_FAILED"

    @classmethod
    def parse(cls, token: bytes | str | None) -> State | None:
        """The state a status file's bytes name, or None (absent, empty or unknown token)."""
        if token is None:
            return None
        if isinstance(token, bytes):
            token = token.decode("utf-8", "replace")
        try:
            return cls(token.strip())
        except ValueError:
            return None


def _in(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def status_path(output_path: str) -> str:
    return _in(output_path, STATUS_FILE)


def info_path(output_path: str) -> str:
    return _in(output_path, INFO_FILE)


def lease_path(output_path: str) -> str:
    return _in(output_path, LEASE_FILE)


def manifest_path(output_path: str) -> str:
    return _in(output_path, MANIFEST_FILE)


def logs_dir(output_path: str) -> str:
    return _in(output_path, LOGS_DIR)


def is_bookkeeping(relative_path: str) -> bool:
    """True for the executor's own files and temporary names, which are not part of a step's output."""
    return any(part.startswith(EXECUTOR_FILE_PREFIX) or part.startswith(".tmp-") for part in relative_path.split("/"))


def runs_file(record_path: str) -> str:
    """The `.runs.jsonl` beside an experiment record."""
    return record_path.removesuffix(RECORD_SUFFIX) + RUNS_SUFFIX


def is_record_name(filename: str) -> bool:
    return filename.endswith(RECORD_SUFFIX) and not filename.endswith(RUNS_SUFFIX)


class RecordFormatError(ValueError):
    """A stored record lacks a field or holds one of the wrong type; the message names both."""


_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "str | None": (str, type(None)),
    "dict": (dict,),
    "dict | None": (dict, type(None)),
    "list": (list,),
    "list | None": (list, type(None)),
    "float | None": (int, float, type(None)),
    "int | None": (int, type(None)),
    "bool | None": (bool, type(None)),
}


@dataclasses.dataclass
class _Record:
    """Shared `from_json` / `to_json` for the record views: typed known fields, the rest kept in `extra`."""

    REQUIRED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_json(cls, data: Any, where: str = "record", strict: bool = True):
        if not isinstance(data, dict):
            raise RecordFormatError(f"{where}: expected a JSON object, got {type(data).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        kwargs: dict[str, Any] = {}
        for name, f in known.items():
            if name not in data:
                if strict and name in cls.REQUIRED:
                    raise RecordFormatError(f"{where}: field {name!r} is missing")
                continue
            value = data[name]
            allowed = _TYPES.get(str(f.type))
            if allowed is not None and not isinstance(value, allowed):
                if strict:
                    raise RecordFormatError(
                        f"{where}: field {name!r} should be {f.type}, got {type(value).__name__}: {value!r:.60}"
                    )
                continue
            kwargs[name] = value
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out


@dataclasses.dataclass
class StepRecord(_Record):
    """One step of an experiment record; also the whole content of the step's `.executor_info`."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "hash", "output_path", "fn", "config_type", "config", "version")

    name: str = ""
    """The step's name, e.g. 'tokenized/tiny'."""
    hash: str = ""
    """The 8 hex digits of its version's sha256."""
    output_path: str = ""
    """Where the run wrote it (absolute, under `prefix`)."""
    relative_output_path: str | None = None
    """The output path relative to the prefix: `<name>-<hash>` unless the step fixed its path."""
    fn: str = ""
    """`module:qualname` or `path/to/script.py:qualname`."""
    config_type: str | None = None
    """The config's dataclass, named like `fn` (None for a step with `config=None`)."""
    config_types: dict | None = None
    """Dotted field path -> dataclass of each nested config."""
    config: dict | None = None
    """The instantiated config (markers replaced by plain values); None for `config=None`."""
    version: dict = dataclasses.field(default_factory=dict)
    """What was hashed: name, versioned fields and inputs, dependencies."""
    dependencies: list | None = None
    """Output paths of the blocking dependencies, in order."""
    pseudo_dependencies: list | None = None
    """Output paths of the nonblocking dependencies."""
    description: str | None = None
    resources: dict | None = None
    code_fingerprint: str | None = None
    """sha256 over the code behind `fn` (see docs/records.md)."""
    prefix: str | None = None
    """The prefix the record was written under."""
    extra: dict = dataclasses.field(default_factory=dict)
    """Fields this version of marin does not know (kept for round trips)."""

    @property
    def identity(self) -> str:
        return f"{self.name}-{self.hash}"


@dataclasses.dataclass
class ExperimentRecord(_Record):
    """`<prefix>/experiments/<script>-<hash8>.json`: the DAG and the environment that first ran it."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("steps",)

    format: str | None = None
    name: str | None = None
    """The script's stem."""
    hash: str | None = None
    """sha256[:8] over the sorted identities of the steps."""
    script: str | None = None
    """The script's path relative to the repository root."""
    description: str | None = None
    prefix: str | None = None
    created: str | None = None
    user: str | None = None
    host: str | None = None
    command: list | None = None
    """The command line that wrote the record, credentials redacted."""
    redacted: list | None = None
    """What was redacted from `command` (flag names, or `--flag (kind)` for a token shape or URL password)."""
    git: dict | None = None
    scripts: dict | None = None
    """Scripts outside the checkout: absolute path -> {sha256, stored (relative to the prefix)}."""
    environment: dict | None = None
    steps: list = dataclasses.field(default_factory=list)
    """The steps' records as stored (dicts); `step_records()` gives them typed."""
    extra: dict = dataclasses.field(default_factory=dict)

    def step_records(self, where: str = "record", strict: bool = True) -> list[StepRecord]:
        return [StepRecord.from_json(s, f"{where}: steps[{i}]", strict) for i, s in enumerate(self.steps)]


@dataclasses.dataclass
class RunLine(_Record):
    """One line of `<record>.runs.jsonl`: one run of the experiment, who made it and each step's outcome."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("steps",)

    run_id: str | None = None
    user: str | None = None
    host: str | None = None
    command: list | None = None
    """The run's command line, credentials redacted."""
    redacted: list | None = None
    """What was redacted from `command`."""
    started: str | None = None
    ended: str | None = None
    git: dict | None = None
    prefix: str | None = None
    backend: str | None = None
    steps: dict = dataclasses.field(default_factory=dict)
    """Step identity -> {outcome, started, ended, duration_s, error}."""
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class LeaseRecord(_Record):
    """`.executor_lease`: who holds a step."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("owner",)

    owner: str = ""
    host: str | None = None
    pid: int | None = None
    pid_started: int | None = None
    """The holder process's start time (clock ticks since boot), to tell a gone holder from a reused pid."""
    heartbeat: float | None = None
    """Unix time of the last refresh, for display: staleness is judged by the taker's own clock."""
    acquired: float | None = None
    extra: dict = dataclasses.field(default_factory=dict)
