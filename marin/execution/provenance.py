"""Who ran what code where: a run's provenance, as the records hold it.

A record says which code produced an output (the git commit, the uncommitted patch, the scripts outside
the checkout), on what (python, platform, CPU, accelerator, every installed package, the lock file) and
by whom (user, host, pid, the redacted command line). The checkout and the machine are probed by
`marin.provenance.probe`; this module finds the experiment's code files, stores what a rerun needs
that git does not hold, and refuses a patch holding a credential. It is separate from the record schema
(`records.py`), which is pure data. The formats are in docs/records.md.
"""

from __future__ import annotations

import getpass
import hashlib
import inspect
import json
import os
import socket
import sys

from marin.execution.planning import Plan
from marin.provenance import probe
from marin.provenance.probe import checkout_state, environment
from marin.provenance.redaction import (
    CredentialInPatchError,
    find_in_patch,
    find_in_source,
    redact_argv,
    redacted_json,
)
from marin.provenance.references import project_imports, reference_of


def _dump(record) -> bytes:
    import orjson

    try:
        return orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def dump_json(record: dict) -> bytes:
    """Indented, key-sorted JSON for records people read (orjson: fast for 10,000-step records), redacted
    (`redaction.redacted_json`: one pass over the whole document; where a replacement would break the JSON,
    over each string of `record`)."""
    return redacted_json(record, lambda value: _dump(value).decode("utf-8")).encode("utf-8")


def code_files(plan: Plan) -> list[str]:
    """The project files the experiment's code comes from: each step function's file (the script, or its
    module) and the project modules it imports, transitively."""
    files: set[str] = set()
    seen: set[str] = set()
    for planned in plan.steps:
        for obj in (planned.step.fn, type(planned.step.config)):
            module = sys.modules.get(getattr(inspect.unwrap(obj), "__module__", "") or "")
            file = getattr(module, "__file__", None)
            if not file or file in seen:
                continue
            seen.add(file)
            file = os.path.abspath(file)
            files.add(file)
            files.update(project_imports(file, getattr(module, "__package__", None) or ""))
    return sorted(files)


CODE_FOLDER = "experiments/code"
"""Under the prefix: what a rerun needs that git does not hold, content-addressed (`<sha256>.patch`,
`<sha256>.py` for scripts outside the checkout, `<sha256>.environment.json`)."""


def store_blob(prefix: str, data: bytes, suffix: str, store: bool = True) -> str:
    """`<prefix>/experiments/code/<sha256><suffix>`, relative to the prefix; with `store`, written there (once)."""
    from marin.storage import create_if_absent, exists, join

    rel = f"{CODE_FOLDER}/{hashlib.sha256(data).hexdigest()}{suffix}"
    if store and not exists(join(prefix, rel)):
        create_if_absent(join(prefix, rel), data)
    return rel


def run_provenance(
    plan: Plan, started: str, run_id: str, store: bool = True, allow_credentials_in_patch: bool = False
) -> dict:
    """Who ran what code where: the `run` of each step's `.executor_info` and the record's `git`.

    The patch, the source of scripts outside the checkout and the full environment are named by their
    content-addressed paths relative to the prefix, and, with `store`, written there (a run that finds every
    step done and its record written skips the writes: an earlier run stored them). A patch or a script
    outside the checkout holding something credential-shaped is refused (CredentialInPatchError naming file
    and line) unless `allow_credentials_in_patch`: they are stored verbatim, since a rerun runs them."""
    files = code_files(plan)
    state = checkout_state(files)
    if state.patch and store and not allow_credentials_in_patch:
        findings = find_in_patch(state.patch)
        if findings:
            raise CredentialInPatchError(findings)
    git = state.to_json()
    env = environment()
    env_bytes = dump_json(env)
    git["patch"] = store_blob(plan.prefix, state.patch, ".patch", store) if state.patch else None
    root = probe.project_root()
    scripts = {}
    for planned in plan.steps:
        target = reference_of(planned.step.fn).rpartition(":")[0]
        if target.endswith(".py") and os.path.isabs(target) and target not in scripts and os.path.exists(target):
            with open(target, "rb") as f:
                source = f.read()
            if store and not allow_credentials_in_patch:
                findings = find_in_source(source, target)
                if findings:
                    raise CredentialInPatchError(findings)
            scripts[target] = {
                "sha256": hashlib.sha256(source).hexdigest(),
                "stored": store_blob(plan.prefix, source, ".py", store),
            }
    return {
        "run_id": run_id,
        "started": started,
        **who(),
        "root": root,
        "git": git,
        "scripts": scripts,
        "lock_sha256": env["lock_sha256"],
        "environment_sha256": hashlib.sha256(env_bytes).hexdigest(),
        "environment": store_blob(plan.prefix, env_bytes, ".environment.json", store),
    }


def who() -> dict:
    """Who runs this process: user, host, pid, and its command line with credentials redacted
    (`redacted` names the flags whose values were replaced)."""
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    command = redact_argv(sys.argv)
    return {
        "user": user,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "command": command.argv,
        "redacted": command.redacted,
    }
