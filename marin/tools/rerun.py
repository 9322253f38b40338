"""Running an experiment again from its record into another prefix (`marin rerun`; docs/executor.md, "Rerun and verify").

The steps are rebuilt from the record by `rebuild.py`; this module decides which code they run and says
how it differs from the recorded code.

Which code runs: by default the record's. The record holds the commit and, when the tree was dirty, a
stored patch (an untracked script included); when this checkout's code differs from that, the commit is
extracted from this repository (`git archive`) into a temporary folder, the patch applied, and the rerun
runs there in a child process (with a git state file, so its record names the same code and can be rerun
in turn). A script outside the checkout is loaded from its stored source when the file here differs.
`--code checkout` runs this checkout as it is. Either way the rerun warns, before anything runs, about
every difference it still sees between the code and packages it runs and the record's.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from marin.execution.authoring import ExecutorStep
from marin.execution.planning import PlanError, plan_steps
from marin.execution.provenance import code_files
from marin.execution.status import read_infos
from marin.provenance.probe import (
    CheckoutState,
    checkout_state,
    git_state,
    installed_packages,
    project_root,
    write_state_file,
)
from marin.provenance.references import script_override, use_script_source
from marin.storage import join, read_bytes
from marin.tools.inspect_prefix import load_record
from marin.tools.rebuild import rebuild_steps

logger = logging.getLogger(__name__)


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


def _code_of(state: dict) -> str:
    patch = state.get("patch_sha256")
    dirty = state.get("dirty")
    extra = f" + patch {_short(patch)}" if patch else (" (uncommitted changes)" if dirty else "")
    return f"commit {_short(state.get('commit'))}{extra}"


def _script_targets(record: dict) -> list[str]:
    targets = []
    for entry in record.get("steps", []):
        for key in ("fn", "config_type"):
            target = str(entry.get(key, "")).rpartition(":")[0]
            if target.endswith(".py") and target not in targets:
                targets.append(target)
    return targets


def code_warnings(record: dict, steps: list[ExecutorStep], prefix: str) -> list[str]:
    """How the code this process would run differs from the record's: commit, patch, scripts."""
    warnings = []
    recorded = record.get("git") or {}
    here = git_state(code_files(plan_steps(steps, prefix)))
    if recorded.get("commit"):
        if "patch_sha256" in recorded:  # records before patches were stored say only whether it was dirty
            same = (here["commit"], here["patch_sha256"]) == (recorded["commit"], recorded["patch_sha256"])
        else:
            same = (here["commit"], here["dirty"]) == (recorded["commit"], recorded.get("dirty"))
        if not same:
            warnings.append(f"the code differs from the record's: recorded {_code_of(recorded)}, here {_code_of(here)}")
    for target, stored in (record.get("scripts") or {}).items():
        local = script_override(target) or target
        try:
            with open(local, "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            sha = None
        if sha != stored.get("sha256"):
            warnings.append(
                f"script {target} differs from the record's (sha256 {_short(stored.get('sha256'))}, "
                f"here {_short(sha) if sha else 'missing'})"
            )
    return warnings


def provenance_warnings(record: dict, record_path: str) -> list[str]:
    """Steps of the record whose outputs were made by other code than the record's (a later run after the
    code changed): the rerun runs the record's code, so their bytes may well differ."""
    from marin.tools.verify import record_location

    recorded = record.get("git") or {}
    if "patch_sha256" not in recorded:
        return []
    steps = record.get("steps", [])
    prefix = record_location(record_path)
    infos = read_infos([join(prefix, s["relative_output_path"]) for s in steps])
    others = []
    for step, info in zip(steps, infos, strict=True):
        made_by = ((info or {}).get("run") or {}).get("git")
        if made_by and (made_by.get("commit"), made_by.get("patch_sha256")) != (
            recorded.get("commit"),
            recorded.get("patch_sha256"),
        ):
            others.append(f"{step['name']} ({_code_of(made_by)})")
    if not others:
        return []
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    return [f"these outputs were made by other code than the record's {_code_of(recorded)}: {shown}"]


def environment_warnings(record: dict) -> list[str]:
    """How the packages here differ from the record's."""
    warnings = []
    recorded = (record.get("environment") or {}).get("packages") or {}
    here = installed_packages()
    changed = sorted(k for k in recorded if here.get(k) != recorded[k])
    if changed:
        shown = ", ".join(f"{k} {recorded[k]} -> {here.get(k, 'absent')}" for k in changed[:10])
        more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
        warnings.append(f"package versions differ: {shown}{more}")
    return warnings


MATERIALIZED_ENV = "MARIN_RERUN_CODE"
"""Set in the process a rerun starts in a materialized copy of the recorded code: what that copy is."""


def _read_stored(record_path: str, rel: str) -> bytes | None:
    from marin.tools.verify import record_location

    return read_bytes(join(record_location(record_path), rel))


def recorded_scripts(record: dict, record_path: str) -> list[str]:
    """Scripts outside the checkout (absolute paths) whose file here is missing or differs from the
    record's: their stored sources are used instead. Returns what it did, for the log."""
    notes = []
    for target, stored in (record.get("scripts") or {}).items():
        try:
            with open(target, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() == stored.get("sha256"):
                    continue
        except OSError:
            pass
        source = _read_stored(record_path, stored["stored"]) if stored.get("stored") else None
        if source is None or hashlib.sha256(source).hexdigest() != stored.get("sha256"):
            continue
        folder = tempfile.mkdtemp(prefix="marin-rerun-script-")
        atexit.register(shutil.rmtree, folder, True)
        local = os.path.join(folder, os.path.basename(target))
        with open(local, "wb") as f:
            f.write(source)
        use_script_source(target, local)
        notes.append(f"script {target}: using the recorded source {stored['stored']} (the file here differs)")
    return notes


def materialize(record: dict, record_path: str) -> tuple[str | None, str]:
    """A copy of the recorded code (the commit from this repository plus the stored patch) in a temporary
    folder, when this checkout's code differs from the record's: (folder, what it is), or (None, why not)."""
    recorded = record.get("git") or {}
    commit = recorded.get("commit")
    if not commit:
        return None, "the record names no git commit"
    files = [os.path.join(project_root(), t) for t in _script_targets(record) if not os.path.isabs(t)]
    files += [os.path.join(project_root(), u) for u in recorded.get("untracked") or []]
    here = checkout_state(files)
    same_patch = here.patch_sha256 == recorded.get("patch_sha256") if "patch_sha256" in recorded else not here.dirty
    if here.commit == commit and same_patch and here.dirty == bool(recorded.get("dirty")):
        return None, ""
    if here.commit is None:
        return None, "this folder is not a git checkout, so the recorded commit cannot be checked out"
    patch = None
    if recorded.get("dirty"):
        if not recorded.get("patch"):
            return None, "the record was made with uncommitted changes but stored no patch"
        patch = _read_stored(record_path, recorded["patch"])
        if patch is None or hashlib.sha256(patch).hexdigest() != recorded.get("patch_sha256"):
            return None, f"the stored patch {recorded['patch']} is missing or does not match its sha256"
    root = project_root()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=root, capture_output=True)
    if archive.returncode != 0:
        return None, f"this repository does not have commit {commit[:12]} ({archive.stderr.decode().strip()})"
    folder = tempfile.mkdtemp(prefix="marin-rerun-code-")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    if patch:
        patch_file = os.path.join(folder, ".marin-rerun.patch")
        with open(patch_file, "wb") as f:
            f.write(patch)
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(folder))
        applied = subprocess.run(
            ["git", "apply", "--binary", "--whitespace=nowarn", patch_file], cwd=folder, capture_output=True, env=env
        )
        os.unlink(patch_file)
        if applied.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            return None, f"the stored patch does not apply to commit {commit[:12]}: {applied.stderr.decode().strip()}"
    write_state_file(
        folder,
        CheckoutState(commit, recorded.get("branch"), bool(patch), patch, tuple(recorded.get("untracked") or ())),
    )
    what = f"commit {commit[:12]}" + (f" + stored patch {recorded['patch']}" if patch else "")
    return folder, what


def _run_materialized(folder: str, what: str, record_path: str, prefix: str, args: list[str]) -> int:
    logger.warning(
        "rerun: this checkout's code differs from the record's; running the recorded code (%s) from a copy in %s",
        what,
        folder,
    )
    local = "://" not in record_path
    path = os.path.abspath(record_path) if local else record_path
    target = os.path.abspath(prefix) if "://" not in prefix else prefix
    python_path = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=python_path, **{MATERIALIZED_ENV: what})
    try:
        return subprocess.run(
            [sys.executable, "-m", "marin.cli", "rerun", path, "--prefix", target, *args], cwd=folder, env=env
        ).returncode
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _recorded_references(record_path: str):
    """The outputs the last of the record's runs that had any used by reference (marin.execution.reuse), to
    reference again, pinned to the manifests they had: a rerun refuses a step whose referenced bytes changed
    rather than recompute it."""
    from marin.execution.reuse import CacheFrom
    from marin.storage import read_text
    from marin.storage.layout import runs_file

    lines = []
    for text in (read_text(runs_file(record_path)) or "").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    for line in reversed(lines):
        external = line.get("external_inputs")
        if isinstance(external, dict) and external:
            sources = []
            for identity, entry in external.items():
                path = str(entry.get("path", ""))
                source = path[: -len(identity) - 1] if path.endswith("/" + identity) else path.rsplit("/", 1)[0]
                if source not in sources:
                    sources.append(source)
            logger.warning("rerun: referencing %d external input(s) again, verified against the record", len(external))
            pins = {k: str(v.get("manifest_sha256")) for k, v in external.items()}
            return CacheFrom(sources=tuple(sources), mode="reference", pinned=pins)
    return None


def rerun_main(record_path: str, prefix: str, args: list[str], code: str = "recorded") -> int:
    """`marin rerun RECORD --prefix P [--code recorded|checkout] [--dry_run] [--run_only ...] ...`."""
    from marin.execution.executor import Executor, ExecutorRunError
    from marin.execution.main import cache_from_of, configure_logging, parse_main_args, run_options

    configure_logging()
    cfg = parse_main_args(args)
    notes: list[str] = []
    try:
        record = load_record(record_path)
        if code == "recorded" and not os.environ.get(MATERIALIZED_ENV):
            folder, what = materialize(record, record_path)
            if folder:
                return _run_materialized(folder, what, record_path, prefix, args)
            if what:
                logger.warning("rerun: cannot run the recorded code (%s); running this checkout's", what)
        if code == "recorded":
            notes = recorded_scripts(record, record_path)
        new_prefix = prefix if "://" in prefix else os.path.abspath(prefix)
        steps = rebuild_steps(record, new_prefix)
    except (ValueError, ImportError) as exc:
        print(f"error: cannot rerun {record_path}: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        logger.warning("rerun: %s", note)
    warnings = (
        code_warnings(record, steps, new_prefix)
        + provenance_warnings(record, record_path)
        + environment_warnings(record)
    )
    for w in warnings:
        logger.warning("rerun: %s", w)
    extra = {"rerun_of": record_path, "rerun_warnings": warnings}
    if os.environ.get(MATERIALIZED_ENV):
        extra["rerun_code"] = os.environ[MATERIALIZED_ENV]
    executor = Executor(
        prefix,
        backend=cfg.backend,
        max_concurrent=cfg.max_concurrent,
        ray_address=cfg.ray_address,
        description=record.get("description"),
        experiment_name=record.get("name"),
        script=record.get("script"),
        record_extra=extra,
        cache_from=cache_from_of(cfg) or _recorded_references(record_path),
    )
    try:
        executor.run(steps, **run_options(cfg))
    except ExecutorRunError:
        return 1
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
