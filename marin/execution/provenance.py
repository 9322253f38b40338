"""Who ran what code where: the environment probing behind a run's provenance.

A record says which code produced an output (the git commit, the uncommitted patch, the scripts outside
the checkout), on what (python, platform, CPU, accelerator, every installed package, the lock file) and
by whom (user, host, pid, the redacted command line). Probing is separate from the record schema
(`records.py`) because it touches the machine (git subprocesses, /proc, site-packages), while the
schema is pure data. The formats are in docs/records.md.
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import inspect
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Sequence

from marin.execution.planning import Plan
from marin.execution.redaction import CredentialInPatchError, find_in_patch, redact_argv
from marin.execution.references import GIT_STATE_FILE, project_imports, project_root, reference_of


def dump_json(record: dict) -> bytes:
    """Indented, key-sorted JSON for records people read (orjson: fast for 10,000-step records)."""
    import orjson

    try:
        return orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


@dataclasses.dataclass(frozen=True)
class CheckoutState:
    """The code a process runs, as git sees it: a commit, and what the working tree adds to it."""

    commit: str | None
    """HEAD's sha, or None outside git (or when git could not run)."""
    branch: str | None
    """The checked-out branch ('HEAD' when detached)."""
    dirty: bool | None
    """True when the patch is not empty: a tracked file changed, or a file the experiment needs is untracked."""
    patch: bytes | None
    """`git diff HEAD --binary` plus new-file diffs of the untracked files the experiment needs; None when clean."""
    untracked: tuple[str, ...] = ()
    """The untracked files (relative to the root) whose contents the patch adds."""

    @property
    def patch_sha256(self) -> str | None:
        return hashlib.sha256(self.patch).hexdigest() if self.patch else None

    def to_json(self) -> dict:
        """What the records hold: the patch by its sha256, not its bytes."""
        return {
            "commit": self.commit,
            "branch": self.branch,
            "dirty": self.dirty,
            "patch_sha256": self.patch_sha256,
            "untracked": list(self.untracked),
        }


def checkout_state(files: Sequence[str] = (), root: str | None = None) -> CheckoutState:
    """The git state of the project checkout; `files` (absolute paths) that git does not track make it dirty
    and are added to the patch, so that a checkout of the commit plus the patch holds all of them.

    Read once per process, checkout and set of files (git subprocesses, ~20 ms, would otherwise cost every
    run, even one with nothing to do): the code a process runs is what it imported, so the state at its
    first record stands for all of its runs. A tree without `.git` that holds a git state file (a
    `marin submit` upload, a rerun's materialized checkout) reports the state written there.
    """
    root = root or project_root()
    wanted = tuple(sorted({os.path.relpath(f, root) for f in files if f.startswith(root + os.sep)}))
    key = (root, wanted)
    if key not in _GIT_STATES:
        state = _state_from_file(root) or _read_git_state(root, wanted)
        if state is None:
            return CheckoutState(None, None, None, None)
        _GIT_STATES[key] = state
    return _GIT_STATES[key]


def git_state(files: Sequence[str] = ()) -> dict:
    """`checkout_state(files)` as the JSON the records hold (the patch by its sha256, not its bytes)."""
    return checkout_state(files).to_json()


_GIT_STATES: dict[tuple, CheckoutState] = {}


def _git(root: str, *args: str, ok: tuple[int, ...] = (0,)) -> bytes | None:
    result = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)
    return result.stdout if result.returncode in ok else None


def _read_git_state(root: str, wanted: tuple[str, ...]) -> CheckoutState | None:
    """None when git could not be asked (missing, timed out): not remembered, unlike "not a checkout"."""
    try:
        head = _git(root, "rev-parse", "HEAD", "--abbrev-ref", "HEAD")
        if not head or not os.path.exists(os.path.join(root, ".git")):
            return CheckoutState(None, None, None, None)
        commit, _, branch = head.decode().strip().partition("\n")
        diff = _git(root, "diff", "HEAD", "--binary")
        if diff is None:
            return CheckoutState(None, None, None, None)
        untracked: list[str] = []
        if wanted:
            listed = _git(root, "ls-files", "-z", "--others", "--", *wanted) or b""
            untracked = sorted(name for name in listed.decode().split("\0") if name)
        patch = diff
        for rel in untracked:
            patch += _git(root, "diff", "--binary", "--no-index", "--", "/dev/null", rel, ok=(0, 1)) or b""
    except (OSError, subprocess.SubprocessError):
        return None
    return CheckoutState(commit, branch.strip() or None, bool(patch), patch or None, tuple(untracked))


def write_state_file(folder: str, state: CheckoutState) -> None:
    """Leaves `state` in `folder` (a tree without `.git`) for `checkout_state` to report there."""
    with open(os.path.join(folder, GIT_STATE_FILE), "w") as f:
        json.dump({**state.to_json(), "patch_file": GIT_STATE_FILE + ".patch" if state.patch else None}, f)
    if state.patch:
        with open(os.path.join(folder, GIT_STATE_FILE + ".patch"), "wb") as f:
            f.write(state.patch)


def _state_from_file(root: str) -> CheckoutState | None:
    path = os.path.join(root, GIT_STATE_FILE)
    if os.path.exists(os.path.join(root, ".git")) or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
        patch = None
        if data.get("patch_file"):
            with open(os.path.join(root, data["patch_file"]), "rb") as f:
                patch = f.read()
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable git state file: {exc}") from None
    return CheckoutState(
        data.get("commit"), data.get("branch"), data.get("dirty"), patch, tuple(data.get("untracked") or ())
    )


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
    step done and its record written skips the writes: an earlier run stored them). A patch holding
    something credential-shaped is refused (CredentialInPatchError naming file and line) unless
    `allow_credentials_in_patch`: it is stored verbatim, since a rerun applies it."""
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
    root = project_root()
    scripts = {}
    for planned in plan.steps:
        target = reference_of(planned.step.fn).rpartition(":")[0]
        if target.endswith(".py") and os.path.isabs(target) and target not in scripts and os.path.exists(target):
            with open(target, "rb") as f:
                source = f.read()
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
