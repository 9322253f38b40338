"""The local backend: a folder on this machine's file system (plain paths and file:// URLs).

Every publication is a temporary file in the target's folder (`.tmp-<random>.<name>`), renamed over the
target once complete, so a reader sees the old file or the new one, never half of one; a process
killed mid-write leaves only the temporary file, which manifests and publication skip. Conditional
writes compare a version token (inode, mtime, size) under an `flock` of the folder; create-if-absent
is a `link()` of a complete temporary file, which fails if the name exists.

A writer holds an exclusive `flock` on its temporary file from the moment it exists under its name until
the name is gone (renamed into place or removed), and the kernel drops that lock when the process dies,
however it dies. So a temporary file whose lock can be taken is provably an orphan of a dead writer:
`remove_orphaned_temps` removes those of a folder (the executor calls it where a dead runner may have
written). The one window, between the temporary file's creation and its lock, is closed on the writer's
side: having locked, it checks that its name still names its file, and starts over with a new one if a
cleaner removed it in that window.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import shutil
import stat
import tempfile
from typing import BinaryIO

from marin.storage.interface import Backend, VersionedBytes

TEMP_PREFIX = ".tmp-"
_SMALL = 1 << 16
"""A read shorter than this is the whole file: one `read` call for the small files the executor reads."""


def local_path(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def _token(st: os.stat_result) -> str:
    return f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"


def _current_token(path: str) -> str | None:
    try:
        return _token(os.stat(path))
    except FileNotFoundError:
        return None


_umask: int | None = None


def process_umask() -> int:
    """This process's umask, read once without changing it (Linux reports it in /proc; elsewhere it is set and
    restored, which is not thread-safe, hence the /proc read first). Read once: a process sets its umask at
    its start, and reading /proc for every file written cost a file open per lease and per write."""
    global _umask
    if _umask is None:
        _umask = _read_umask()
    return _umask


def _read_umask() -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _published_mode(fd: int) -> None:
    """`mkstemp` creates 0600 files, which would stay 0600 once renamed into place: published files get the
    mode `open()` gives (0666 less the umask), so colleagues sharing a lab folder read them as any tool's output."""
    os.fchmod(fd, 0o666 & ~process_umask())


def _locked_temp(folder: str, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new temporary file in `folder`, open and exclusively flocked by this process (see the module's doc)."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)  # a cleaner took it for an orphan between its creation and the lock


def _temp_in(folder: str, name: str) -> tuple[int, str]:
    fd, tmp = _locked_temp(folder, TEMP_PREFIX, "." + name)
    _published_mode(fd)
    return fd, tmp


def _write_temp(folder: str, data: bytes) -> tuple[int, str]:
    """A locked temporary file holding `data`; the caller closes the descriptor once the name is gone."""
    fd, tmp = _locked_temp(folder, TEMP_PREFIX + "cond-")
    _published_mode(fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        _drop_temp(fd, tmp)
        raise
    return fd, tmp


def _drop_temp(fd: int, tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.close(fd)


def remove_orphaned_temps(folder: str) -> int:
    """Removes the temporary files in `folder` whose writer is dead (their flock is free); how many.

    A temporary file still locked belongs to a live writer (of any process, on any host sharing the file
    system through a lock-aware mount) and is left alone; so is anything not a regular file."""
    folder = local_path(folder)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    removed = 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            if os.stat(path).st_ino == st.st_ino:
                os.unlink(path)
                removed += 1
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def _folder_lock(path: str):
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class AtomicFileWriter(io.BufferedIOBase):
    """Writes a temporary file next to `path` and renames it over `path` on `close()`."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        fd, self._tmp = _temp_in(folder, os.path.basename(path))
        self._file = os.fdopen(fd, "wb")

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return self._file.write(b)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._file.flush()
            os.replace(self._tmp, self.path)  # before closing: the temp's lock is held until its name is gone
            self._file.close()
        except BaseException:
            with contextlib.suppress(OSError):
                self._file.close()
            self._remove_temp()
            raise
        finally:
            super().close()

    def discard(self) -> None:
        if self.closed:
            return
        self._remove_temp()
        self._file.close()
        super().close()

    def _remove_temp(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        if "_file" in self.__dict__ and not self.closed:
            self.discard()


class LocalBackend(Backend):
    name = "local"

    def read(self, path: str) -> bytes | None:
        try:
            fd = os.open(local_path(path), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:  # raw reads: a step's status or record is read in one call, without a Python file object
            data = os.read(fd, _SMALL)
            if len(data) < _SMALL:
                return data
            parts = [data]
            while chunk := os.read(fd, 8 << 20):
                parts.append(chunk)
            return b"".join(parts)
        finally:
            os.close(fd)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        with open(local_path(path), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def write(self, path: str, data: bytes) -> None:
        with AtomicFileWriter(local_path(path)) as f:
            f.write(data)

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def size(self, path: str) -> int | None:
        try:
            return os.stat(local_path(path)).st_size
        except (FileNotFoundError, NotADirectoryError):
            return None

    def list_names(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(local_path(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_files(self, path: str) -> list[tuple[str, int]]:
        base = local_path(path)
        found = []
        for dirpath, _, filenames in os.walk(base):
            for name in filenames:
                full = os.path.join(dirpath, name)
                if os.path.isfile(full):
                    found.append((os.path.relpath(full, base), os.path.getsize(full)))
        return sorted(found)

    def delete(self, path: str, recursive: bool = False) -> None:
        local = local_path(path)
        if os.path.isdir(local) and recursive:
            shutil.rmtree(local, ignore_errors=True)
        elif os.path.lexists(local):
            os.unlink(local)

    def open_read(self, path: str) -> BinaryIO:
        return open(local_path(path), "rb")

    def open_write(self, path: str, part_bytes: int | None = None) -> BinaryIO:
        return AtomicFileWriter(local_path(path))

    def copy(self, source: str, target: str) -> bool:
        try:
            src = open(local_path(source), "rb")
        except FileNotFoundError:
            return False
        with src, AtomicFileWriter(local_path(target)) as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        return True

    # conditional writes -----------------------------------------------------------------------------

    def list_versions(self, path: str) -> list[tuple[str, str]]:
        base = local_path(path)
        return [(rel, _current_token(os.path.join(base, rel)) or "") for rel, _ in self.list_files(path)]

    def read_with_version(self, path: str) -> VersionedBytes | None:
        try:
            fd = os.open(local_path(path), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(fd, "rb") as f:
            return VersionedBytes(f.read(), _token(os.fstat(f.fileno())))

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        path = local_path(path)
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        if not data:  # nothing to expose half-written: one exclusive create
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            except FileExistsError:
                return None
            return _current_token(path)
        fd, tmp = _write_temp(folder, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return None
        else:
            return _token(os.fstat(fd))
        finally:
            _drop_temp(fd, tmp)

    def replace_if_unchanged(self, path: str, data: bytes, version: str) -> str | None:
        path = local_path(path)
        with _folder_lock(path):
            if _current_token(path) != version:
                return None
            fd, tmp = _write_temp(os.path.dirname(path) or ".", data)
            try:
                os.replace(tmp, path)
                return _token(os.fstat(fd))
            finally:
                _drop_temp(fd, tmp)

    def delete_if_unchanged(self, path: str, version: str) -> bool:
        path = local_path(path)
        with _folder_lock(path):
            if _current_token(path) != version:
                return False
            os.unlink(path)
            return True

    def current_version(self, path: str) -> str | None:
        return _current_token(local_path(path))
