"""`executor_main`: the command line of every experiment script (draccus over `ExecutorMainConfig`).

    python experiments/tutorial/hello_world.py --prefix scratch/lab --dry_run --run_only 'stats$'

Boolean flags may be given bare (`--dry_run`) and `--run_only` may take several patterns; both are
normalised into draccus's own syntax before parsing. The prefix comes from `--prefix`, then the
`MARIN_PREFIX` environment variable, then `./local_store`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from marin.execution.authoring import ExecutorStep

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "local_store"
BOOL_FLAGS = ("--dry_run", "--force_run_failed", "--rerun_code_changed")
LIST_FLAGS = ("--run_only",)


@dataclass(frozen=True)
class ExecutorMainConfig:
    prefix: str | None = None
    """Where outputs and records go: a folder, gs://bucket/path or s3://bucket/path."""
    dry_run: bool = False
    """Print what would run and why; write nothing."""
    run_only: list[str] | None = None
    """Regexes: run only the steps whose names match (and what they depend on)."""
    force_run_failed: bool = False
    """Rerun steps that FAILED before (otherwise they stay failed)."""
    rerun_code_changed: bool = False
    """Rerun succeeded steps whose function's code changed since."""
    max_concurrent: int | None = None
    """At most this many steps at once (default: the backend's)."""
    backend: str = "auto"
    """'auto' (default: Ray for steps that declare resources or when a cluster is given, threads for the
    rest), 'ray' (every step a Ray task) or 'local' (every step a thread of this process, for pdb)."""
    ray_address: str | None = None
    """An existing Ray cluster (default: RAY_ADDRESS, else start a local one)."""


FLAG_VALUES = {
    "prefix": "PATH",
    "run_only": "REGEX...",
    "max_concurrent": "N",
    "backend": "auto|ray|local",
    "ray_address": "ADDRESS",
}
"""What follows each flag in `--help` (booleans take nothing)."""


def run_flags_help() -> str:
    """One line per flag of `ExecutorMainConfig`, from its field docstrings (what `marin plan --help` lists)."""
    from dataclasses import fields

    from draccus.wrappers.docstring import get_attribute_docstring

    lines = []
    for f in fields(ExecutorMainConfig):
        flag = f"--{f.name} {FLAG_VALUES[f.name]}" if f.name in FLAG_VALUES else f"--{f.name}"
        lines.append(f"  {flag:<28} {get_attribute_docstring(ExecutorMainConfig, f.name).docstring_below}")
    return "\n".join(lines)


def normalise_args(argv: Sequence[str]) -> list[str]:
    """Bare boolean flags get 'true'; list flags gather their values into draccus's '[a,b]'."""
    out: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in BOOL_FLAGS and not eq:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or nxt.startswith("--"):
                out += [name, "true"]
                i += 1
                continue
        if name in LIST_FLAGS:
            values = [value] if eq else []
            i += 1
            while not eq and i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            if len(values) == 1 and values[0].startswith("["):
                out += [name, values[0]]
            else:
                out += [name, "[" + ",".join(values) + "]"]
            continue
        out.append(arg)
        i += 1
    return out


def parse_main_args(argv: Sequence[str]) -> ExecutorMainConfig:
    import draccus

    return draccus.parse(ExecutorMainConfig, args=normalise_args(argv))


def resolve_prefix(prefix: str | None) -> str:
    return prefix or os.environ.get("MARIN_PREFIX") or DEFAULT_PREFIX


def configure_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        root.setLevel(logging.INFO)


_capture_hook = None


def capture_steps(hook):
    """While set, `executor_main` hands its steps to `hook(steps, description)` instead of running.

    This is how `marin plan SCRIPT` and `marin explain SCRIPT STEP` see a script's DAG: the script runs
    as `__main__` as usual, and its own call to `executor_main` answers the question.
    """
    global _capture_hook
    previous, _capture_hook = _capture_hook, hook
    return previous


def executor_main(
    steps: Sequence[ExecutorStep],
    description: str | None = None,
    argv: Sequence[str] | None = None,
    experiment_name: str | None = None,
) -> dict[ExecutorStep, str]:
    """Parses the command line and runs `steps`; exits non-zero when a step failed."""
    from marin.execution.executor import Executor, ExecutorRunError
    from marin.execution.planning import PlanError

    if _capture_hook is not None:
        return _capture_hook(steps, description)
    cfg = parse_main_args(sys.argv[1:] if argv is None else argv)
    configure_logging()
    prefix = resolve_prefix(cfg.prefix)
    executor = Executor(
        prefix,
        backend=cfg.backend,
        max_concurrent=cfg.max_concurrent,
        ray_address=cfg.ray_address,
        description=description,
        experiment_name=experiment_name,
    )
    try:
        return executor.run(
            steps,
            dry_run=cfg.dry_run,
            run_only=cfg.run_only,
            force_run_failed=cfg.force_run_failed,
            rerun_code_changed=cfg.rerun_code_changed,
        )
    except ExecutorRunError:
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except (PlanError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        print(f"error: cannot use the prefix {prefix}: {exc}", file=sys.stderr)
        sys.exit(2)
