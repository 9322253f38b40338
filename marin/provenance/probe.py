"""Probing the checkout and the machine: what a record says about the code and the software behind a run.

The project root (the git checkout, or a tree holding a git state file), the checkout's git state (its
commit, and a patch of what the working tree adds), and the machine and software a run used (python,
platform, CPU, accelerator, installed packages, the lock file). This touches the machine (git
subprocesses, /proc, site-packages) and knows nothing of steps, plans or records, so it lives below the
executor, which turns what it finds into records (marin.execution.provenance).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Sequence

GIT_STATE_FILE = ".marin_git_state.json"
"""Written into a tree that has no `.git` (a `marin submit` upload, a rerun's materialized checkout):
the git state of the checkout it was made from, which `checkout_state` reads instead."""


@functools.lru_cache(maxsize=1)
def project_root() -> str:
    """The git root above the current directory (or a folder holding a git state file, as a job's uploaded
    working directory does), or the current directory."""
    path = os.path.abspath(os.getcwd())
    probe = path
    while True:
        if os.path.exists(os.path.join(probe, ".git")) or os.path.exists(os.path.join(probe, GIT_STATE_FILE)):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return path
        probe = parent


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
