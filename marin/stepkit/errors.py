"""One-line config errors (`marin.config.errors`), re-exported for experiment helpers and the CLI."""

from __future__ import annotations

from marin.config.errors import (
    TRACEBACK_ENV,
    TRACEBACK_FLAG,
    ConfigError,
    ConfigTypeError,
    ConfigValueError,
    install_hook,
    names_step,
    one_line,
    report,
    wants_traceback,
)

__all__ = [
    "TRACEBACK_ENV",
    "TRACEBACK_FLAG",
    "ConfigError",
    "ConfigTypeError",
    "ConfigValueError",
    "install_hook",
    "names_step",
    "one_line",
    "report",
    "wants_traceback",
]
