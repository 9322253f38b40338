"""Where a failed step's story is: its attempt's log, and the line of it that says what went wrong.

A run that ends with failures names, for each failed step, the log of its attempt and that log's last
error line (the exception a traceback ends with, or the last line that says error), so that the next
thing a researcher reads is the cause, not a search through `.executor_logs/`. The line is redacted again
(`redaction.redact_text`): a log written by an older marin, or by hand, may hold what a log now never does.
"""

from __future__ import annotations

import re

from marin.provenance.redaction import redact_text
from marin.storage import list_dir, read_range, size
from marin.storage.layout import logs_dir

TAIL_BYTES = 64 << 10
"""How much of a log's end is read to find its last error line."""

_ERROR = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt|Failure)\b|.*\b(?:ERROR|CRITICAL|FATAL)\b|.*error:)")
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def latest_log(output_path: str) -> str | None:
    """The log of the step's most recent attempt (`.executor_logs/NNN.log`), None when it has none."""
    names = sorted(n for n in list_dir(logs_dir(output_path)) if n.endswith(".log") and n.split(".")[0].isdigit())
    return f"{logs_dir(output_path)}/{names[-1]}" if names else None


def last_error_line(log_path: str | None) -> str | None:
    """The last line of the log's end that reads as an error (an exception's `Type: message`, an ERROR log
    record, an `error:` line), else its last non-empty line; None when the log is absent or empty."""
    if not log_path:
        return None
    try:
        total = size(log_path)
        if not total:
            return None
        start = max(0, total - TAIL_BYTES)
        text = read_range(log_path, start, total - start).decode("utf-8", "replace")
    except OSError:
        return None
    lines = [_ESCAPE.sub("", line).rstrip() for line in text.replace("\r", "\n").splitlines()]
    lines = [line for line in lines if line.strip()]
    for line in reversed(lines):
        if _ERROR.match(line.strip()):
            return redact_text(line.strip())[:300]
    return redact_text(lines[-1].strip())[:300] if lines else None
