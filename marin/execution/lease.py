"""Leases: at most one runner works on a step at a time, on any storage (DESIGN.md §6).

A runner claims a step by creating `.executor_lease` only if it is absent. While the step runs, one
keeper thread per process refreshes every lease it holds each `MARIN_LEASE_HEARTBEAT_S` seconds, each
refresh conditional on the version it last wrote. If a refresh finds another version, someone took the
lease over: the lease is *lost*, the step's thread is interrupted, and nothing more is written for it
(fencing; marin.storage.staging makes that hold for whatever the step itself still writes).

Staleness never compares two hosts' clocks. A waiting runner judges a lease stale when it has seen the
same lease version, unchanged, for `MARIN_LEASE_TIMEOUT_S` by its *own* monotonic clock: a holder
whose wall clock runs minutes ahead or behind is neither robbed while it heartbeats nor waited on
forever once it stops. The heartbeat time in the file is for people (the browser), not for the
protocol. One shortcut: a lease held by a process of this same host that is gone (its pid no longer
runs, or now names a process started at another time) is stale at once. A stale lease is taken over
with a precondition on the stale version. The clock is injectable (`Clock`), so tests skew it.
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
from marin.storage.layout import lease_heartbeat_s, lease_timeout_s

logger = logging.getLogger(__name__)


class Clock:
    """Where leases read the time: `monotonic()` judges staleness, `time()` only labels heartbeats."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK = Clock()


heartbeat_interval_s = lease_heartbeat_s
"""Seconds between refreshes (`MARIN_LEASE_HEARTBEAT_S`, default in marin.storage.layout)."""


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
    clock: Clock = SYSTEM_CLOCK

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
            new = replace_if_unchanged(self.path, _payload(self.owner, self.acquired, self.clock), self.version)
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


def _payload(owner: str, acquired: float, clock: Clock = SYSTEM_CLOCK) -> bytes:
    body = {
        "owner": owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": process_start_time(os.getpid()),
        "heartbeat": clock.time(),
        "acquired": acquired,
    }
    return json.dumps(body, sort_keys=True).encode()


def process_start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux), or None when unknown or gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def holder_is_gone(info: dict) -> bool:
    """True when the lease's holder ran on this host and its process no longer runs."""
    if info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        return False
    pid = info["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    recorded = info.get("pid_started")
    current = process_start_time(pid)
    return recorded is not None and current is not None and recorded != current


def new_owner_id() -> str:
    return uuid.uuid4().hex


ACQUIRE_ATTEMPTS = 20
"""How often `try_acquire` retries when the lease changes between its create, read and takeover."""


class LeaseContention(RuntimeError):
    """The lease changed under every one of `ACQUIRE_ATTEMPTS` tries to claim or read it."""


def try_acquire(
    path: str, owner: str, seen: dict[str, float] | None = None, clock: Clock = SYSTEM_CLOCK
) -> Lease | LeaseHeld:
    """Claims the lease at `path`, taking over a stale one; `seen` tracks versions across calls.

    `seen` maps each lease version this runner met to when it first met it (`clock.monotonic()`); a
    version met more than `MARIN_LEASE_TIMEOUT_S` ago and still there is stale. Without `seen`, only a
    lease whose holder is gone from this host is ever stale.

    A try loses a race when the lease vanishes between the failed create and the read (its holder
    released it), or when another runner takes a stale lease over first; each lost race means someone
    else made progress, so a few tries settle it and a bound turns a pathological loop into an error.
    """
    seen = {} if seen is None else seen
    for _ in range(ACQUIRE_ATTEMPTS):
        now = clock.time()
        version = create_if_absent(path, _payload(owner, now, clock))
        if version is not None:
            return Lease(path, owner, now, version, clock=clock)
        current = read_with_version(path)
        if current is None:
            continue
        try:
            info = json.loads(current.data)
            heartbeat, holder, host = float(info["heartbeat"]), str(info["owner"]), info.get("host")
        except (ValueError, KeyError, TypeError):
            info, heartbeat, holder, host = {}, now, "<unreadable lease>", None
        first_seen = seen.setdefault(current.version, clock.monotonic())
        unchanged_s = clock.monotonic() - first_seen
        gone = holder_is_gone(info)
        if not gone and unchanged_s <= lease_timeout_s():
            return LeaseHeld(holder, host, now - heartbeat, current.version)
        version = replace_if_unchanged(path, _payload(owner, now, clock), current.version)
        if version is None:
            continue
        if gone:
            logger.warning("took over the stale lease %s from %s (its process on this host is gone)", path, holder)
        else:
            logger.warning("took over the stale lease %s from %s (unchanged for %.0f s)", path, holder, unchanged_s)
        return Lease(path, owner, now, version, took_over=True, clock=clock)
    raise LeaseContention(
        f"lease {path}: changed under each of {ACQUIRE_ATTEMPTS} tries to claim it "
        "(created, released or taken over by other runners every time)"
    )


def interrupt_thread(thread_id: int, exc: type[BaseException] = LeaseLost) -> None:
    """Raises `exc` (LeaseLost) in another thread at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


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
