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
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal

from marin.execution.authoring import ExecutorStep

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "local_store"
CacheMode = Literal["copy", "reference"]
"""The values of --cache_mode (`marin.execution.reuse.CacheMode`, not imported: a script need not load reuse)."""


@dataclass(frozen=True)
class ExecutorMainConfig:
    """The flags of every experiment script: where it writes, what it runs, and on what."""

    prefix: str | None = None
    """Where outputs and records go: a folder, gs://bucket/path or s3://bucket/path (default: $MARIN_PREFIX,
    else ./local_store)."""
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
    cache_from: list[str] | None = None
    """Other labs' prefixes (repeatable, in order; else MARIN_CACHE_FROM): their steps are verified, then reused."""
    cache_mode: CacheMode = "copy"
    """How reused outputs are published, 'copy' (into this prefix) or 'reference' (read where they are)."""
    cache_code_changed: bool = False
    """Reuse outputs even when the code that made them differs from this checkout's."""
    allow_credentials_in_patch: bool = False
    """Store the uncommitted changes even if a line looks like a credential (a run refuses them otherwise)."""
    traceback: bool = False
    """Print the traceback of an error in the experiment's configs or plan (otherwise one `error:` line)."""


BOOL_FLAGS = tuple(f"--{f.name}" for f in fields(ExecutorMainConfig) if f.type == "bool")
"""Flags that may be given bare (`--dry_run`)."""
LIST_FLAGS = tuple(f"--{f.name}" for f in fields(ExecutorMainConfig) if f.type.startswith("list["))
"""Flags that take several values (`--run_only a b`) and may be repeated."""

FLAG_VALUES = {
    "prefix": "PATH",
    "run_only": "REGEX...",
    "max_concurrent": "N",
    "backend": "auto|ray|local",
    "ray_address": "ADDRESS",
    "cache_from": "PREFIX...",
    "cache_mode": "copy|reference",
}
"""What follows each flag in `--help` (booleans take nothing)."""


def run_flags_help() -> str:
    """One line per flag of `ExecutorMainConfig`, from its field docstrings (what `marin plan --help` lists)."""
    from draccus.wrappers.docstring import get_attribute_docstring

    lines = []
    for f in fields(ExecutorMainConfig):
        flag = f"--{f.name} {FLAG_VALUES[f.name]}" if f.name in FLAG_VALUES else f"--{f.name}"
        lines.append(f"  {flag:<28} {get_attribute_docstring(ExecutorMainConfig, f.name).docstring_below}")
    return "\n".join(lines)


def normalise_args(argv: Sequence[str]) -> list[str]:
    """Bare boolean flags get 'true'; list flags gather their values (over repeats) into draccus's '[a,b]'."""
    out: list[str] = []
    gathered: dict[str, list[str]] = {}
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
                values = [v for v in values[0].strip("[]").split(",") if v]
            if name not in gathered:
                gathered[name] = []
                out += [name, gathered[name]]  # type: ignore[list-item]
            gathered[name].extend(values)
            continue
        out.append(arg)
        i += 1
    return [("[" + ",".join(a) + "]") if isinstance(a, list) else a for a in out]


def _help_formatter():
    """draccus's help formatter, adding "(default: X)" only where the docstring does not say it already and
    X is a value (not None, whose meaning each docstring spells out)."""
    from draccus.help_formatter import SimpleHelpFormatter

    class Formatter(SimpleHelpFormatter):
        def _get_help_string(self, action):
            text = action.help or ""
            if "(default" in text or action.default is None or action.default == "None":
                return text
            return super()._get_help_string(action)

    return Formatter


def parse_main_args(argv: Sequence[str]) -> ExecutorMainConfig:
    """The flags of `argv`; a bad value (an unknown backend, `--max_concurrent 0`) exits with one `error:` line."""
    from draccus.argparsing import ArgumentParser
    from draccus.utils import DecodingError

    try:
        cfg = ArgumentParser(ExecutorMainConfig, formatter_class=_help_formatter()).parse_args(normalise_args(argv))
    except DecodingError as exc:
        cfg, problem = None, f"--{'.'.join(exc.key_path)}: {' '.join(exc.message.split())}"
    else:
        problem = check_main_config(cfg)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    return cfg


BACKENDS = ("auto", "ray", "local")
"""--backend's choices: 'auto' (the default), 'ray' (every step a Ray task), 'local' (every step a thread)."""


def check_main_config(cfg: ExecutorMainConfig) -> str | None:
    """What is wrong with the flags' values, naming the flag, or None."""
    if cfg.backend not in BACKENDS:
        return f"--backend {cfg.backend}: unknown backend; use one of {', '.join(BACKENDS)}"
    if cfg.max_concurrent is not None and cfg.max_concurrent < 1:
        return f"--max_concurrent {cfg.max_concurrent}: must be at least 1 (leave it out for the backend's limit)"
    if cfg.prefix is not None and not cfg.prefix.strip():
        return "--prefix: empty; give a folder, gs://bucket/path or s3://bucket/path"
    return None


def resolve_prefix(prefix: str | None) -> str:
    return prefix or os.environ.get("MARIN_PREFIX") or DEFAULT_PREFIX


def cache_from_of(cfg: ExecutorMainConfig):
    """The run's `CacheFrom` (marin.execution.reuse) from its flags and MARIN_CACHE_FROM, or None."""
    from marin.execution.reuse import CacheFrom

    return CacheFrom.build(cfg.cache_from, cfg.cache_mode, cfg.cache_code_changed)


def run_options(cfg: ExecutorMainConfig) -> dict:
    """The keyword arguments of `Executor.run` that the run's flags set."""
    return {
        "dry_run": cfg.dry_run,
        "run_only": cfg.run_only,
        "force_run_failed": cfg.force_run_failed,
        "rerun_code_changed": cfg.rerun_code_changed,
    }


def configure_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        root.setLevel(logging.INFO)


_capture_hook = None


def capture_steps(hook):
    """While set, `executor_main` hands its steps to `hook(steps, description)` instead of running, and its
    `experiment_name` too when the hook has a parameter of that name (the record's name depends on it).

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
        import inspect

        named = "experiment_name" in inspect.signature(_capture_hook).parameters
        return _capture_hook(steps, description, **({"experiment_name": experiment_name} if named else {}))
    cfg = parse_main_args(sys.argv[1:] if argv is None else argv)
    configure_logging()
    prefix = resolve_prefix(cfg.prefix)
    try:
        executor = Executor(
            prefix,
            backend=cfg.backend,
            max_concurrent=cfg.max_concurrent,
            ray_address=cfg.ray_address,
            description=description,
            experiment_name=experiment_name,
            allow_credentials_in_patch=cfg.allow_credentials_in_patch,
            cache_from=cache_from_of(cfg),
        )
        return executor.run(steps, **run_options(cfg))
    except ExecutorRunError:
        sys.exit(1)
    except KeyboardInterrupt:
        from marin.execution.interrupts import interrupted_exit_code

        sys.exit(interrupted_exit_code())
    except (PlanError, ValueError, TypeError) as exc:
        if cfg.traceback:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        print(f"error: cannot use the prefix {prefix}: {exc}", file=sys.stderr)
        sys.exit(2)
