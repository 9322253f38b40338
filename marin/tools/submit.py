"""`marin submit`: run an experiment script on a Ray cluster as a Ray job, unchanged.

    marin submit --address http://HEAD:8265 -- python experiments/tutorial/hello_world.py --prefix gs://b/lab

The job's entrypoint is the command after `--`, run on the cluster with this project's files as its
working directory (uploaded through the dashboard, without `.venv`, `local_store`, `.git`, test
artifacts or anything `.gitignore` names) and with the `MARIN_*` variables of this shell. Inside the job
Ray sets `RAY_ADDRESS`, so `executor_main` connects to that cluster and every step becomes a Ray task
there. Dependencies are not installed per job: the nodes run the project's locked environment (the image
built by `infra/Dockerfile` from `uv.lock`, or for a cluster started from this checkout, the same
`.venv`), and the job's metadata records the lock file's sha256 so a mismatch can be traced. The upload
leaves `.git` out, so the checkout's git state (commit, branch, and the uncommitted changes as a patch,
an untracked script and the project modules it imports included) travels as a file in the uploaded
working directory, `.marin_git_state.json` (+ `.patch`), written there only while the job is submitted;
inside the job the records read it (`marin.provenance.probe.checkout_state`), so they name the commit and store the
patch as a run here would. Outputs go to
the `--prefix` given to the script, which must be storage every node sees (gs://, s3://, or a shared
folder): a relative local prefix would land in the job's temporary working directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shlex
import subprocess
import sys
import time

logger = logging.getLogger(__name__)

EXCLUDES = [
    ".venv",
    ".venv/",
    "local_store/",
    ".git",
    ".git/",
    "test-artifacts/",
    "scratch/",
    "__pycache__/",
    "*.pyc",
    ".pytest_cache/",
    ".ruff_cache/",
    "benchmarks/results/",
]
TERMINAL_OK = "SUCCEEDED"


def marin_checkout() -> str:
    """The checkout this `marin` package lives in (the folder holding `marin/` and `pyproject.toml`): what a
    job uploads, wherever `marin submit` is started (the git root above the working directory, which names
    the code a run records, is `marin.provenance.probe.project_root`)."""
    import marin

    return os.path.dirname(os.path.dirname(os.path.abspath(marin.__file__)))


def _lock_sha256(root: str) -> str | None:
    path = os.path.join(root, "uv.lock")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _git_commit(root: str) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def job_checkout_state(job_argv: list[str], root: str):
    """The git state of `root` for the job: tracked changes, plus the job's script and the project modules it
    imports when git does not track them."""
    from marin.provenance.probe import checkout_state
    from marin.provenance.references import project_imports

    script = next((a for a in job_argv[1:] if a.endswith(".py")), None)
    files = []
    if script:
        path = os.path.abspath(os.path.join(root, script))
        if os.path.exists(path):
            files = [path, *project_imports(path)]
    return checkout_state(files, root)


@contextlib.contextmanager
def staged_git_state(root: str, state):
    """While the job is submitted, `root` holds the git state file the upload carries to the cluster."""
    from marin.provenance.probe import GIT_STATE_FILE, write_state_file

    written = [os.path.join(root, GIT_STATE_FILE), os.path.join(root, GIT_STATE_FILE + ".patch")]
    write_state_file(root, state)
    try:
        yield
    finally:
        for path in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def prefix_warning(job_argv: list[str], env: dict[str, str]) -> str | None:
    """Why the outputs of this command would not be visible outside the job, if they would not."""
    prefix = None
    for i, arg in enumerate(job_argv):
        if arg == "--prefix" and i + 1 < len(job_argv):
            prefix = job_argv[i + 1]
        elif arg.startswith("--prefix="):
            prefix = arg.split("=", 1)[1]
    prefix = prefix or env.get("MARIN_PREFIX")
    if prefix is None:
        return "no --prefix (or MARIN_PREFIX): outputs go to local_store/ inside the job's temporary working directory"
    if "://" not in prefix and not os.path.isabs(prefix):
        return f"--prefix {prefix} is relative: outputs go inside the job's temporary working directory"
    return None


def build_job(job_argv: list[str], root: str | None = None) -> dict:
    """The keyword arguments of `JobSubmissionClient.submit_job` for running `job_argv` on a cluster."""
    if not job_argv:
        raise ValueError("marin submit: no command given; use `marin submit --address ADDR -- python experiments/x.py`")
    root = root or marin_checkout()
    script = next((a for a in job_argv[1:] if a.endswith(".py")), None)
    if script and not os.path.isabs(script) and not os.path.exists(os.path.join(root, script)):
        raise ValueError(f"marin submit: {script} is not a file under the project root {root} (the job's working dir)")
    from marin.execution.backends import forwarded_env

    env = forwarded_env()
    metadata = {"marin_command": shlex.join(job_argv)}
    for key, value in (("marin_uv_lock_sha256", _lock_sha256(root)), ("marin_git_commit", _git_commit(root))):
        if value:
            metadata[key] = value
    return {
        "entrypoint": shlex.join(job_argv),
        "runtime_env": {"working_dir": root, "excludes": list(EXCLUDES), "env_vars": env},
        "metadata": metadata,
    }


def follow(client, job_id: str, out=None) -> str:
    """Streams the job's logs to `out` until it ends; returns its final status."""
    out = out or sys.stdout

    async def tail():
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    asyncio.run(tail())
    status = client.get_job_status(job_id)
    deadline = time.monotonic() + 30
    while not status.is_terminal() and time.monotonic() < deadline:
        time.sleep(0.5)
        status = client.get_job_status(job_id)
    return str(status.value)


def submit_main(address: str, job_argv: list[str], wait: bool = False) -> int:
    """Submits `job_argv` as a Ray job at `address` (the dashboard's http://HOST:PORT); prints how to follow it."""
    from ray.job_submission import JobSubmissionClient

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    root = marin_checkout()
    try:
        job = build_job(list(job_argv), root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = job_checkout_state(list(job_argv), root)
    job["metadata"].update(
        {k: str(v) for k, v in (("marin_git_branch", state.branch), ("marin_git_dirty", state.dirty)) if v is not None}
    )
    warning = prefix_warning(list(job_argv), job["runtime_env"]["env_vars"])
    if warning:
        print(f"warning: {warning}; use gs://, s3:// or a folder every node shares", file=sys.stderr)
    try:
        client = JobSubmissionClient(address)
    except Exception as exc:
        print(f"error: cannot reach the Ray dashboard at {address}: {exc}", file=sys.stderr)
        return 2
    try:
        with staged_git_state(root, state):
            job_id = client.submit_job(**job)
    except Exception as exc:
        print(f"error: the cluster at {address} refused the job: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"submitted job {job_id} to {address}")
    print(f"  follow its logs: ray job logs --follow {job_id} --address {address}")
    print(f"  its status:      ray job status {job_id} --address {address}")
    print(f"  stop it:         ray job stop {job_id} --address {address}")
    if not wait:
        return 0
    try:
        status = follow(client, job_id)
    except KeyboardInterrupt:
        print(f"stopped following; job {job_id} goes on (ray job stop {job_id} --address {address})")
        return 130
    print(f"job {job_id}: {status}")
    return 0 if status == TERMINAL_OK else 1
