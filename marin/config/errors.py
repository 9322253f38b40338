"""A bad value in an experiment's configs, reported as one `error:` line that names the step and the field.

An experiment builds its configs while the script is imported, before `executor_main` parses a flag:

    bad = default_train("mine", tokenized, checkpoint_every_steps="25")

`TrainConfig` refuses the string when it is built, so the run stops before anything runs. Left to Python,
that refusal is a traceback through the helper, the dataclass machinery and `__post_init__`, and the step it
was for appears nowhere. Here it reads

    error: step 'checkpoints/mine' (mine.py:12): TrainConfig.checkpoint_every_steps: expected int, got str '25'

`ConfigError` is what a config (or a checked helper) raises for a value it refuses when built; it is a
`TypeError` or a `ValueError` as before, so callers that catch those still do. An experiment helper
decorated with `names_step("checkpoints")` adds the step its `name` makes (`checkpoints/mine`); the place
in the user's script is the frame of the running script nearest to the error. `marin run`, `plan` and
`explain` catch it and print the line (exit status 2); a script run as `python mine.py` gets the same line
from an exception hook that the first `ConfigError` installs (Python then exits with status 1). The
traceback comes back with `--traceback` on the command line or `MARIN_TRACEBACK=1`.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "MARIN_TRACEBACK"


class ConfigError(Exception):
    """A value a config refused when it was built; the message names the class and the field."""

    step: str | None = None
    """The step the config was for, when the helper that built it said (`names_step`)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        install_hook()


class ConfigTypeError(ConfigError, TypeError):
    """A value of the wrong type for its field's annotation."""


class ConfigValueError(ConfigError, ValueError):
    """A value the config's `validate()` refused."""


def names_step(folder: str) -> Callable:
    """Decorator for an experiment helper `helper(name, ...)` that builds the step `<folder>/<name>`: a
    `ConfigError` raised while it builds its configs names that step."""

    def decorate(helper: Callable) -> Callable:
        @functools.wraps(helper)
        def build(name: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return helper(name, *args, **kwargs)
            except ConfigError as exc:
                if exc.step is None:
                    exc.step = f"{folder}/{name}"
                raise

        return build

    return decorate


def wants_traceback(argv: list[str] | None = None) -> bool:
    """Whether the user asked for tracebacks: `--traceback` among the arguments, or MARIN_TRACEBACK set."""
    argv = sys.argv[1:] if argv is None else argv
    flag = os.environ.get(TRACEBACK_ENV, "").strip().lower()
    return TRACEBACK_FLAG in argv or flag not in ("", "0", "false", "no")


def one_line(exc: BaseException) -> str:
    """`error: step 'S' (script.py:N): Class.field: why`, with what is known of the step and the place."""
    where = _place(exc)
    parts = [f"step {exc.step!r}"] if getattr(exc, "step", None) else []
    if where:
        parts.append(f"({where})" if parts else where)
    head = " ".join(parts)
    message = " ".join(str(exc).split())
    return f"error: {head}: {message}" if head else f"error: {message}"


def report(exc: BaseException, file: Any = None) -> None:
    """Print the error line, then the traceback when asked for, else how to ask for it."""
    file = sys.stderr if file is None else file
    if wants_traceback():
        traceback.print_exception(exc, file=file)
    print(one_line(exc), file=file)
    if not wants_traceback():
        print(f"  (the traceback: add {TRACEBACK_FLAG}, or set {TRACEBACK_ENV}=1)", file=file)


def _place(exc: BaseException) -> str | None:
    """`file:line` of the running script's frame nearest to where `exc` was raised (relative to the working
    folder when under it), or None when the script's own code is not on the way."""
    if not sys.argv or not sys.argv[0]:
        return None
    script = os.path.abspath(sys.argv[0])
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.abspath(frame.filename) == script:
            shown = os.path.relpath(script)
            return f"{script if shown.startswith('..') else shown}:{frame.lineno}"
    return None


_installed = False


def install_hook() -> None:
    """Make an uncaught `ConfigError` print as one line (other exceptions go to the hook there was)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind, exc, tb):
        if isinstance(exc, ConfigError):
            report(exc)
        else:
            previous(kind, exc, tb)

    sys.excepthook = hook
