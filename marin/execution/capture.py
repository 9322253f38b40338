"""Capturing everything a step prints or logs into its `.executor_logs/<attempt>.log`.

Two modes. In a process of its own (a Ray worker runs one task at a time) the file descriptors 1 and
2 are pointed at the log file, so output of subprocesses and C libraries is captured too. With the
local backend, steps share one process as threads, so `sys.stdout`, `sys.stderr` and the logging
module are routed by the step's log held in a context variable instead. A context variable rather
than a thread-local: a step that fans work out to threads (the tokenize step's pipeline) runs each
piece in a copy of its own context, so what those threads print and log lands in the step's log
too, not on the terminal.

What reaches the log through Python (prints, log records) passes `redaction.redact_text` first: URL
passwords, token-shaped strings and the values redacted from this process's command line never reach
a log file. Bytes a subprocess or a C library writes to the descriptors are not filtered.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import sys
import threading

from marin.execution.redaction import redact_text

_sink: contextvars.ContextVar = contextvars.ContextVar("marin_step_log", default=None)
_install_lock = threading.Lock()
_install_count = 0
_saved_level = logging.NOTSET

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _ThreadRoutedStream(io.TextIOBase):
    def __init__(self, fallback, which: str):
        self._fallback = fallback
        self._which = which

    def write(self, text: str) -> int:
        sink = _sink.get()
        if sink is None:
            return self._fallback.write(text)
        sink.write(redact_text(text))
        return len(text)

    def flush(self) -> None:
        sink = _sink.get()
        (sink if sink is not None else self._fallback).flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self):
        return "utf-8"

    def fileno(self) -> int:
        return self._fallback.fileno()


class _ThreadSinkHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sink = _sink.get()
        if sink is None:
            return
        try:
            sink.write(redact_text(self.format(record)) + "\n")
        except Exception:
            self.handleError(record)


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


_handler = _ThreadSinkHandler()
_handler.setFormatter(logging.Formatter(LOG_FORMAT))


def _install() -> None:
    """Routes sys.stdout/sys.stderr per thread (again, if someone swapped them since) and counts users."""
    global _install_count, _saved_level
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadRoutedStream):
            sys.stdout = _ThreadRoutedStream(sys.stdout, "stdout")
        if not isinstance(sys.stderr, _ThreadRoutedStream):
            sys.stderr = _ThreadRoutedStream(sys.stderr, "stderr")
        if _install_count == 0:
            root = logging.getLogger()
            _saved_level = root.level
            root.addHandler(_handler)
            if root.level > logging.INFO or root.level == logging.NOTSET:
                root.setLevel(logging.INFO)
        _install_count += 1


def _uninstall() -> None:
    """The routers stay (they pass through when no step is capturing); the log handler goes."""
    global _install_count
    with _install_lock:
        _install_count -= 1
        if _install_count == 0:
            root = logging.getLogger()
            root.removeHandler(_handler)
            root.setLevel(_saved_level)


@contextlib.contextmanager
def capture_thread(log_file):
    """Routes this thread's prints and log records to `log_file` (an open text file)."""
    _install()
    token = _sink.set(log_file)
    try:
        yield
    finally:
        _sink.reset(token)
        log_file.flush()
        _uninstall()


@contextlib.contextmanager
def capture_process(log_path: str):
    """Points fds 1 and 2 (and Python's streams and logging) at `log_path` for this process."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(LOG_FORMAT))
    root = logging.getLogger()
    old_level = root.level
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        root.addHandler(handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        root.removeHandler(handler)
        root.setLevel(old_level)
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_out)
        os.close(saved_err)
        os.close(fd)
