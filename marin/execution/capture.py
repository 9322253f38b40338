"""Capturing everything a step prints or logs into its `.executor_logs/<attempt>.log`.

Two modes. In a process of its own (a Ray worker runs one task at a time) the file descriptors 1 and
2 are pointed at the log file, so output of subprocesses and C libraries is captured too. With the
local backend, steps share one process as threads, so `sys.stdout`, `sys.stderr` and the logging
module are routed by the step's log held in a context variable instead. A context variable rather
than a thread-local: a step that fans work out to threads (the tokenize step's pipeline) runs each
piece in a copy of its own context, so what those threads print and log lands in the step's log
too, not on the terminal.

Everything that reaches the log passes a `LogCleaner`: whole lines, progress bars as their last state, no
terminal escape codes, and `redaction.redact_text` on every line (URL passwords, token shapes,
credential-named assignments, the values redacted from this process's command line and the values of its
credential-named environment variables, read when a capture starts, never reach a log file). In a process
of its own the descriptors point at a pipe that a thread copies into the log through a cleaner, so what a
subprocess or a C library writes is cleaned too; with the local backend a subprocess's output is not
captured at all (it goes to the terminal).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import re
import sys
import tempfile
import threading

from marin.provenance.redaction import redact_text, remember_environment

_sink: contextvars.ContextVar = contextvars.ContextVar("marin_step_log", default=None)
_install_lock = threading.Lock()
_install_count = 0
_saved_level = logging.NOTSET

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _TextOver(io.TextIOBase):
    """A text stream written to another one (`_target`): not a terminal, UTF-8, the target's descriptor."""

    _target: io.TextIOBase

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self):
        return "utf-8"

    def fileno(self) -> int:
        return self._target.fileno()


class _ThreadRoutedStream(_TextOver):
    def __init__(self, fallback):
        self._target = fallback

    def write(self, text: str) -> int:
        sink = _sink.get()
        if sink is None:
            return self._target.write(text)
        sink.write(text)
        return len(text)

    def flush(self) -> None:
        sink = _sink.get()
        (sink if sink is not None else self._target).flush()


class _ThreadSinkHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sink = _sink.get()
        if sink is None:
            return
        try:
            sink.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])")
_BREAK = re.compile(r"(\r\n|\r|\n)")
LOG_MIRROR_S = 5.0
"""How often a log on a bucket is copied there from its local file while it is written."""
PENDING_LIMIT = 1 << 16
"""A partial line longer than this is written out without waiting for its end."""


class LogCleaner(_TextOver):
    """What a step's log file receives: whole lines, as a terminal would end up showing them.

    Progress bars redraw one line with carriage returns and move the cursor with escape codes; in a file
    that is a line of fifty overwritten states and bytes no viewer renders. Here a carriage return drops
    the partial line before it (the last state of a bar is what is written, once its line ends), escape
    codes are removed, and each line passes `redact_text` before it is written.
    """

    def __init__(self, target):
        self._target = target
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            out = []
            for part in _BREAK.split(_ESCAPE.sub("", text)):
                if part in ("\n", "\r\n"):
                    out.append(redact_text(self._pending) + "\n")
                    self._pending = ""
                elif part == "\r":
                    self._pending = ""
                else:
                    self._pending += part
            if len(self._pending) > PENDING_LIMIT:
                out.append(redact_text(self._pending))
                self._pending = ""
            if out:
                self._target.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def finish(self) -> None:
        """Writes a last partial line, if any, and flushes."""
        with self._lock:
            if self._pending:
                self._target.write(redact_text(self._pending) + "\n")
                self._pending = ""
        self._target.flush()


_handler = _ThreadSinkHandler()
_handler.setFormatter(logging.Formatter(LOG_FORMAT))


def _install() -> None:
    """Routes sys.stdout/sys.stderr per thread (again, if someone swapped them since) and counts users."""
    global _install_count, _saved_level
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadRoutedStream):
            sys.stdout = _ThreadRoutedStream(sys.stdout)
        if not isinstance(sys.stderr, _ThreadRoutedStream):
            sys.stderr = _ThreadRoutedStream(sys.stderr)
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
    remember_environment()
    _install()
    cleaner = LogCleaner(log_file)
    token = _sink.set(cleaner)
    try:
        yield
    finally:
        _sink.reset(token)
        cleaner.finish()
        _uninstall()


PUMP_DRAIN_S = 5.0
"""After a process capture ends, how long its pipe is drained for output still in flight; a subprocess left
running with the descriptors open keeps being copied into the log by the (daemon) pump."""


def _pump(read_fd: int, cleaner: LogCleaner) -> None:
    """Copies what the pipe receives into the log through `cleaner`, until every writer has closed it."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(1 << 16):
            cleaner.write(decoder.decode(chunk))
            cleaner.flush()
        cleaner.write(decoder.decode(b"", final=True))
    cleaner.finish()


@contextlib.contextmanager
def capture_process(log_path: str):
    """Points fds 1 and 2 (and Python's streams and logging) at `log_path` for this process, through a pipe
    whose every line is cleaned and redacted (`LogCleaner`) before it is written."""
    remember_environment()
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    log_file = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
    read_fd, write_fd = os.pipe()
    pump = threading.Thread(target=_pump, args=(read_fd, LogCleaner(log_file)), daemon=True, name="marin-log-pump")
    pump.start()
    streams = sys.stdout, sys.stderr
    cleaners = LogCleaner(sys.stdout), LogCleaner(sys.stderr)
    handler = logging.StreamHandler(cleaners[1])
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    old_level = root.level
    try:
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        sys.stdout, sys.stderr = cleaners
        root.addHandler(handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        yield
    finally:
        for cleaner in cleaners:
            cleaner.finish()
        sys.stdout, sys.stderr = streams
        sys.stdout.flush()
        sys.stderr.flush()
        root.removeHandler(handler)
        root.setLevel(old_level)
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_out)
        os.close(saved_err)
        pump.join(PUMP_DRAIN_S)
        if not pump.is_alive():
            log_file.close()


@contextlib.contextmanager
def capture_into(log_path: str, process: bool):
    """Captures into the log `log_path`: the whole process (`capture_process`), else this thread's prints
    and log records (`capture_thread`). On a local disk the log is the file itself; on a bucket a temporary
    file, copied to `log_path` every LOG_MIRROR_S (so the browser can follow a running step) and at the end."""
    from marin.storage import is_local, makedirs, strip_protocol, write_bytes

    stop = threading.Event()
    if is_local(log_path):
        local, mirror = strip_protocol(log_path), None
        makedirs(os.path.dirname(local))
    else:
        fd, local = tempfile.mkstemp(prefix="marin-log-", suffix=".log")
        os.close(fd)

        def copy():
            with open(local, "rb") as f:
                write_bytes(log_path, f.read())

        def copy_until_stopped():
            while not stop.wait(LOG_MIRROR_S):
                with contextlib.suppress(Exception):
                    copy()

        mirror = threading.Thread(target=copy_until_stopped, daemon=True, name="marin-log-mirror")
        mirror.start()
    try:
        if process:
            with capture_process(local):
                yield
        else:
            with open(local, "a", encoding="utf-8", buffering=1) as f, capture_thread(f):
                yield
    finally:
        if mirror is not None:
            stop.set()
            mirror.join()
            try:
                copy()
            finally:
                os.unlink(local)
