"""Leases: at most one runner works on a step at a time, on any storage (DESIGN.md §6).

A runner claims a step by creating `.executor_lease` only if it is absent. While the step runs, one
keeper thread per process refreshes every lease it holds each `MARIN_LEASE_HEARTBEAT_S` seconds, each
refresh conditional on the version it last wrote. If a refresh finds another version, someone took the
lease over: the lease is *lost*, the step's thread is interrupted, and nothing more is written for it
(fencing). A lease whose heartbeat is older than `MARIN_LEASE_TIMEOUT_S`, or whose version a waiting
runner has seen unchanged for that long by its own clock (robust to clock skew), is stale and may be
taken over with a precondition on the stale version.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from marin.storage import (
    create_if_absent,
    current_version,
    delete_if_unchanged,
    read_with_version,
    replace_if_unchanged,
)

logger = logging.getLogger(__name__)


def heartbeat_interval_s() -> float:
    return float(os.environ.get("MARIN_LEASE_HEARTBEAT_S", "10"))


def lease_timeout_s() -> float:
    return float(os.environ.get("MARIN_LEASE_TIMEOUT_S", "60"))


class LeaseLost(BaseException):
    """Raised in a step's thread when its lease was taken over; BaseException so steps don't swallow it."""


@dataclass
class LeaseHeld:
    """Someone else holds the lease."""

    owner: str
    host: str | None
    age_s: float
    version: str


@dataclass(eq=False)
class Lease:
    """A lease this process holds."""

    path: str
    owner: str
    acquired: float
    version: str
    took_over: bool = False
    lost: threading.Event = field(default_factory=threading.Event)
    thread_id: int | None = None
    on_tick: Callable[[], None] | None = None
    last_refresh: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: bool = False

    def refresh(self) -> bool:
        """Writes a new heartbeat if the lease is still ours; False (and marks it lost) otherwise."""
        with self.lock:
            return self._refresh_locked()

    def _refresh_locked(self) -> bool:
        if self.released:
            return True
        if self.lost.is_set():
            return False
        try:
            new = replace_if_unchanged(self.path, _payload(self.owner, self.acquired), self.version)
        except Exception as exc:
            if time.monotonic() - self.last_refresh > lease_timeout_s():
                logger.warning("lease %s: cannot refresh for longer than the timeout (%s)", self.path, exc)
                self.lost.set()
                return False
            logger.warning("lease %s: heartbeat failed, will retry: %s", self.path, exc)
            return True
        if new is None:
            self.lost.set()
            return False
        self.version = new
        self.last_refresh = time.monotonic()
        return True

    def still_held(self) -> bool:
        """A read-only fence check: the lease file still has the version this runner last wrote."""
        with self.lock:
            if self.lost.is_set():
                return False
            try:
                if current_version(self.path) == self.version:
                    return True
            except Exception as exc:
                logger.warning("lease %s: fence check failed (%s); refreshing instead", self.path, exc)
                return self._refresh_locked()
            self.lost.set()
            return False

    def heartbeat_or_interrupt(self) -> None:
        """The keeper's tick: refresh, and interrupt the step's thread if the lease was lost."""
        with self.lock:
            if self._refresh_locked() or self.released:
                return
            logger.error("lost the lease %s: another runner took the step over; cancelling", self.path)
            if self.thread_id is not None:
                interrupt_thread(self.thread_id)

    def release(self) -> None:
        _keeper.remove(self)
        with self.lock:
            if self.released:
                return
            self.released = True
            if self.lost.is_set():
                return
            try:
                delete_if_unchanged(self.path, self.version)
            except Exception as exc:
                logger.warning("could not release lease %s (it will go stale): %s", self.path, exc)


def _payload(owner: str, acquired: float) -> bytes:
    body = {
        "owner": owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "heartbeat": time.time(),
        "acquired": acquired,
    }
    return json.dumps(body, sort_keys=True).encode()


def new_owner_id() -> str:
    return uuid.uuid4().hex


ACQUIRE_ATTEMPTS = 20
"""How often `try_acquire` retries when the lease changes between its create, read and takeover."""


class LeaseContention(RuntimeError):
    """The lease changed under every one of `ACQUIRE_ATTEMPTS` tries to claim or read it."""


def try_acquire(path: str, owner: str, seen: dict[str, float] | None = None) -> Lease | LeaseHeld:
    """Claims the lease at `path`, taking over a stale one; `seen` tracks versions across calls.

    A try loses a race when the lease vanishes between the failed create and the read (its holder
    released it), or when another runner takes a stale lease over first; each lost race means someone
    else made progress, so a few tries settle it and a bound turns a pathological loop into an error.
    """
    for _ in range(ACQUIRE_ATTEMPTS):
        now = time.time()
        version = create_if_absent(path, _payload(owner, now))
        if version is not None:
            return Lease(path, owner, now, version)
        current = read_with_version(path)
        if current is None:
            continue
        try:
            info = json.loads(current.data)
            heartbeat, holder, host = float(info["heartbeat"]), str(info["owner"]), info.get("host")
        except (ValueError, KeyError, TypeError):
            heartbeat, holder, host = 0.0, "<unreadable lease>", None
        age = now - heartbeat
        stale = age > lease_timeout_s()
        if seen is not None:
            first_seen = seen.setdefault(current.version, time.monotonic())
            stale = stale or time.monotonic() - first_seen > lease_timeout_s()
        if not stale:
            return LeaseHeld(holder, host, age, current.version)
        version = replace_if_unchanged(path, _payload(owner, now), current.version)
        if version is None:
            continue
        logger.warning("took over the stale lease %s from %s (heartbeat %.0f s old)", path, holder, age)
        return Lease(path, owner, now, version, took_over=True)
    raise LeaseContention(
        f"lease {path}: changed under each of {ACQUIRE_ATTEMPTS} tries to claim it "
        "(created, released or taken over by other runners every time)"
    )


def interrupt_thread(thread_id: int) -> None:
    """Raises LeaseLost in another thread at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(LeaseLost))


class _Keeper:
    """One thread per process that heartbeats every lease the process holds."""

    def __init__(self):
        self._leases: set[Lease] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.add(lease)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="marin-lease-keeper", daemon=True)
                self._thread.start()

    def remove(self, lease: Lease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _loop(self) -> None:
        while True:
            self._wake.wait(heartbeat_interval_s())
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                if lease.lost.is_set():
                    continue
                if lease.on_tick is not None:
                    try:
                        lease.on_tick()
                    except Exception as exc:
                        logger.debug("lease tick callback failed: %s", exc)
                lease.heartbeat_or_interrupt()


_keeper = _Keeper()


def keep_alive(lease: Lease) -> None:
    """Starts heartbeating `lease` and interrupts the current thread if it is lost."""
    lease.thread_id = threading.get_ident()
    _keeper.add(lease)
